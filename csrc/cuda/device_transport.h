// The device transport ("cuda"): the ranks of one node, their data in device memory that every
// peer maps (CUDA IPC, or the emulation's shared segments), moved by reduceCopy kernels
// (reduce_copy.h). Control stays on the host: a shared-memory segment (ShmTransport) carries the
// headers, the FIFOs' counters, liveness and failure, exactly as for CPU buffers, so matching,
// deadlines and the news of a dead peer are the CPU path's.
//
// Every ring verb is one kernel, and the ranks' steps are ordered on the devices by interprocess
// events, never by a kernel waiting for another process's kernel: a rank records an event after
// the kernel that fills a slot of the next rank's FIFO and posts the FIFO's host counter at
// once; the next rank's host, seeing the post, makes its stream wait for that event and queues
// the kernel that reads the slot, then records an event of its own that frees the slot again
// (DevicePrims). The host queues a call's kernels as fast as the FIFO's counters let it and
// waits once, for the last. Ranks that share one GPU (whose kernels the GPU time-slices) cannot
// deadlock, since a stream waiting for an event holds no multiprocessor, and the same schedule
// runs on one GPU or eight. One-shot, direct and the exchanges wait for each kernel's end.
//
// Device memory per rank, one allocation: its FIFO (fifoSlots slots of slotBytes, filled by the
// previous rank's kernels) and two one-shot slots (the call's parity), 16 bytes of headroom each
// so data can sit at its offset modulo 16 in the user's buffer and move in 16-byte packs. And
// regions: comm.alloc(device="cuda") buffers, one per rank, that every peer maps once; direct
// reads the peers' data straight out of them, one kernel per step (all_reduce: one kernel that
// also writes its chunk into every peer's output).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/call.h"
#include "cpu/shm_transport.h"
#include "cuda/device.h"

namespace dpcore {

class DevicePrims;
class DevicePayloads;
class DevicePeerMemory;

struct DeviceConfig {
  int fifoSlots;
  size_t slotBytes;     // the ring's segment
  size_t oneShotBytes;  // the largest one-shot payload per rank
};

// What this transport's kernels moved, counted at each launch from its arguments (alike on a GPU
// and in the emulation): the numbers docs/busbw.md's floor and the design's targets are held to.
struct DeviceCounts {
  uint64_t kernels = 0;       // launched
  uint64_t hostWaits = 0;     // times the host waited for a kernel to end before going on
  uint64_t bytesRead = 0;     // every source element of every kernel
  uint64_t bytesWritten = 0;  // every destination element
  uint64_t packedBytes = 0;   // of those read and written, through 16-byte packs
};

class DeviceTransport {
 public:
  static constexpr bool kPeerMemory = true;  // direct, over regions
  static constexpr size_t kHeadroom = 16;
  // The shared-memory transport's facts, in this one's units: align is modulo kHeadroom, the
  // regions are comm.alloc(device="cuda")'s.
  using Meta = ShmMeta;

  // controlName: the shared-memory segment of the host side (create: local rank 0 makes it).
  DeviceTransport(std::unique_ptr<Device> device, const std::string& controlName, bool create,
                  int rank, int size, const DeviceConfig& config, double spinUs);

  // Set-up, on every rank in turn: this rank's handles (its allocation's, then its events'),
  // then every rank's (mapped here), then, once all ranks have mapped all,
  // device().unlinkShared().
  const std::string& handles() const { return handles_; }
  void mapPeers(const std::vector<std::string>& handles);
  Device& device() { return *device_; }

  // Regions, collectively: each rank has a buffer, which every rank maps under one id. Two
  // kinds: comm.alloc(device="cuda")'s, which each rank allocates (allocRegion), and
  // comm.register's, the user's own memory, exported as the allocation that holds it
  // (exportBuffer: its handle, and the buffer's offset in it). mapRegion: handles and offsets,
  // every rank's; bases: each buffer's address in its own rank; owned: allocRegion's (this
  // rank frees its buffer). A peer's allocation is mapped here once, however many regions it
  // holds (CUDA IPC maps a handle once per process), and unmapped with the last of them.
  void* allocRegion(size_t bytes, IpcHandle* handle) { return device_->allocShared(bytes, handle); }
  IpcHandle exportBuffer(const void* p, size_t bytes, uint64_t* offset) {
    return device_->exportMemory(p, bytes, offset);
  }
  void mapRegion(uint32_t id, size_t bytes, const std::vector<IpcHandle>& handles,
                 const std::vector<uint64_t>& bases, const std::vector<uint64_t>& offsets,
                 bool owned);
  // A region every rank has dropped, its calls ended: unmapRegion closes the peers' buffers
  // here; freeRegion frees this rank's, once every rank has unmapped it (an owned one's).
  void unmapRegion(uint32_t id);
  void freeRegion(uint32_t id);
  uint32_t regionOf(const void* p, size_t bytes) const;  // 0: in none
  // Where peer's address `addr` in its region `id` is mapped here.
  const char* peerAddress(int peer, uint32_t id, uint64_t addr) const;

  int rank() const { return control_.rank(); }
  int size() const { return control_.size(); }
  int name(int r) const { return control_.name(r); }

  // -- one collective, as core/collectives.h drives it --------------------------------------
  void validate(const Task& task) const;
  Meta annotate(const Task& task) const;
  static bool sharedInput(const Meta& meta) { return ShmTransport::sharedInput(meta); }
  void begin(const CallContext& call);
  // The communicator's host transport, where it is shared memory (ShmTransport::pairWithHost):
  // a peer that makes a call on host arrays where this rank passes CUDA arrays is found at
  // once. `host` outlives this transport (the bindings keep it).
  void pairWithHost(ShmTransport& host) {
    host_ = &host;
    control_.pairWithHost(&host);
  }
  std::vector<CollHeader> exchange(const Task& task, const CollHeader& mine);
  size_t segmentBytes() const { return config_.slotBytes; }
  size_t oneShotBytes() const { return config_.oneShotBytes; }
  DevicePrims prims(const RingCall& ring, const std::vector<CollHeader>& headers);
  DevicePayloads payloads(const Task& task, const std::vector<CollHeader>& headers);
  DevicePeerMemory peerMemory(const std::vector<CollHeader>& headers);
  void copyAlone(void* out, const void* in, size_t bytes);
  void abort(const std::string& message) {
    device_->abandon();
    control_.abort(message);
  }
  void leave(const std::string& why) { control_.leave(why); }
  void passOn(const std::string& news) { control_.passOn(news); }

  // -- what the verbs and payloads use ------------------------------------------------------
  ShmTransport& control() { return control_; }
  char* fifoSlot(int r, uint64_t index) const;  // rank r's FIFO, slot index % fifoSlots
  char* oneShotSlot(int r) const;               // rank r's one-shot slot of this call's parity
  // Queues reduceCopy and returns its ticket (0: nothing to run); waitFor(ticket) waits,
  // watching the peers and the deadline, until that kernel and every earlier one have ended;
  // run does both.
  uint64_t launch(DType dtype, ReduceOp op, const ReduceCopyArgs& args);
  void waitFor(uint64_t ticket);
  void run(DType dtype, ReduceOp op, const ReduceCopyArgs& args) {
    waitFor(launch(dtype, op, args));
  }
  // The ring's events, one pair per FIFO slot (index: the slot's number, as the FIFO's counters
  // give it): filled after this rank's kernel wrote the next rank's slot, drained after its
  // kernel read its own. awaitFilled: what this rank queues next waits until the previous rank
  // filled our slot; awaitDrained: until the next rank has drained its slot, which we fill next.
  void markFilled(uint64_t index) { device_->record(filledEvent(index)); }
  void markDrained(uint64_t index) { device_->record(drainedEvent(index)); }
  void awaitFilled(uint64_t index) { device_->await(prevRank(), filledEvent(index)); }
  void awaitDrained(uint64_t index) { device_->await(nextRank(), drainedEvent(index)); }
  // every output = inputs reduced in order, rounding after every op (roundEach) or once; or a
  // copy
  void reduce(DType dtype, ReduceOp op, const void* const* inputs, int numInputs,
              void* const* outputs, int numOutputs, size_t count, int divisor, bool roundEach);
  void copy(void* dst, const void* src, size_t bytes);
  const DeviceCounts& counts() const { return counts_; }  // read once the queue is drained

 private:
  size_t slotStride() const { return config_.slotBytes + kHeadroom; }
  size_t oneShotStride() const { return config_.oneShotBytes + kHeadroom; }
  size_t bytes() const { return config_.fifoSlots * slotStride() + 2 * oneShotStride(); }
  int nextRank() const { return (rank() + 1) % size(); }
  int prevRank() const { return (rank() + size() - 1) % size(); }
  int filledEvent(uint64_t index) const { return static_cast<int>(index % config_.fifoSlots); }
  int drainedEvent(uint64_t index) const {
    return config_.fifoSlots + static_cast<int>(index % config_.fifoSlots);
  }

  std::unique_ptr<Device> device_;
  DeviceConfig config_;
  ShmTransport control_;
  std::string handles_;  // this rank's allocation's IPC handle, then its events'
  std::vector<char*> peers_;  // every rank's allocation, as mapped here (ours: our own)
  struct Region {
    size_t bytes;
    std::vector<char*> mapped;    // every rank's buffer, as mapped here
    std::vector<uint64_t> bases;  // ... and in its own process
    std::vector<char*> opened;    // the peers' allocations that hold them, as mapped here
    bool owned;                   // this rank's buffer is allocRegion's
  };
  struct Import {  // a peer's allocation, mapped here
    char* base;
    int regions;   // that hold a buffer in it
  };
  char* openPeer(int peer, const IpcHandle& handle, size_t bytes);  // under regionsMutex_
  void closePeer(int peer, char* base);                             // under regionsMutex_
  mutable std::mutex regionsMutex_;  // Python adds regions while queued calls may read them
  std::map<uint32_t, Region> regions_;
  std::map<std::pair<int, std::string>, Import> imports_;  // by (peer, handle)
  std::map<uint32_t, char*> unmapped_;  // this rank's buffer of each region unmapped, to free
  const CallContext* call_ = nullptr;
  uint64_t followed_ = 0;  // the last caller's mark our work follows (Task::ready)
  ShmTransport* host_ = nullptr;  // pairWithHost
  DeviceCounts counts_;
};

}  // namespace dpcore

#include "cuda/device_prims.h"
