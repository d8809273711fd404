// A device as the device transport (cuda/device_transport.h) drives it: memory the peers map,
// kernels queued in order on one stream of its own, and their completion as the host sees it.
// Two implementations: the GPU (cuda/cuda_device.cu, CUDA runtime and IPC) and the CPU
// emulation (cuda/emulated_device.cc: shared-memory segments, kernels on std::threads), which
// is what runs in CI. No CUDA header here, so the transport compiles with g++ alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "cuda/reduce_copy.h"

namespace dpcore {

// What a peer needs to map an allocation: cudaIpcMemHandle_t (64 bytes), or the emulation's
// segment name.
struct IpcHandle {
  char bytes[64];
};

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;  // "cuda:0", "emulated"

  // Memory of this device that the peers map (freed with the Device), zero-filled before it is
  // returned (a fill still queued when the handle reaches a peer would land after the peer's
  // reads), and a peer's, mapped here (unmapped with the Device). unlinkShared: every peer has
  // mapped what this rank shared (the emulation then removes the segments' names, so nothing
  // outlives a crash).
  virtual void* allocShared(size_t bytes, IpcHandle* handle) = 0;
  virtual void* openShared(const IpcHandle& handle, size_t bytes) = 0;
  virtual void unlinkShared() = 0;
  // freeShared: this rank's allocShared memory, once its queued work has ended and no peer maps
  // it any more; closeShared: a peer's, mapped here by openShared.
  virtual void freeShared(void* p) = 0;
  virtual void closeShared(void* p) = 0;
  // An ordinary allocation of this device, the user's (comm.register): the handle of the whole
  // allocation that holds [p, p + bytes), which openShared maps whole in a peer, as CUDA IPC
  // does, and p's offset in it. Throws for memory that cannot be shared so.
  virtual IpcHandle exportMemory(const void* p, size_t bytes, uint64_t* offset) = 0;

  // The caller's stream (a cudaStream_t; 0: the legacy default stream; 2: the calling thread's
  // default) as it stood when the call was made: mark(stream) records the work queued there so
  // far (an event), on the caller's thread at the call, since later, on the worker's thread,
  // the per-thread default stream names another stream and the caller's may be gone; passed
  // is whether the host can see that work has ended; follow makes the work queued here next
  // wait for it. Marks are followed in the order made; following one releases it and those
  // made before it (a refused call's).
  // capturing: whether the caller's stream is capturing a CUDA graph, where a call would break
  // the capture (and a host that waits for a kernel never sees it run): such calls are refused.
  virtual bool capturing(uintptr_t stream) = 0;
  virtual uint64_t mark(uintptr_t stream) = 0;
  virtual bool passed(uint64_t mark) = 0;
  virtual void follow(uint64_t mark) = 0;

  // Work, queued in order: launch queues a reduceCopy and returns its ticket; done(ticket) is
  // whether that kernel and every earlier one have finished and their stores are visible here
  // and to the peers' next kernels.
  virtual uint64_t launch(DType dtype, ReduceOp op, ReduceCopyArgs args) = 0;
  virtual bool done(uint64_t ticket) = 0;  // throws if the device reported an error
  // Whether the device's work runs on the host's own cores (the emulation's kernels and streams
  // are threads of this process); a GPU's does not. Where it does, a host that waits must leave
  // the cores to that work: idle(ticket) sleeps until the kernel ends (or a moment has passed)
  // instead of yielding, and the transport's waits for the peers do likewise (DeviceTransport).
  // A yielding waiter keeps its fair share of the cores, which on 2 cores and 3-4 ranks slowed
  // the emulation 2-5x, in some runs and not others (4 ranks: 4-25 s a run; 2026-12-07 note).
  virtual bool onHostCores() const = 0;
  virtual void idle(uint64_t ticket) = 0;

  // Interprocess events (cudaIpcEventHandle_t), which order one rank's queued work after a
  // peer's on the device itself, with no host waiting for either and no kernel spinning (the
  // GPU holds a stream at the wait). makeEvents: this rank's `count` events, and their handles
  // for the peers to open (openEvents, under the peer's rank). record(e): this rank's event e
  // completes once the work queued so far has ended; await(peer, e): the work queued here next
  // starts once the peer's event e, as last recorded before this call, has completed. So a
  // peer may record e again only once this rank has awaited it: the FIFOs' host counters order
  // that (DevicePrims).
  virtual std::string makeEvents(int count) = 0;
  virtual void openEvents(int peer, const std::string& handles) = 0;
  virtual void record(int event) = 0;
  virtual void await(int peer, int event) = 0;
  // The call failed: work still queued may wait for a peer that will never record, or write
  // memory of a peer that is gone. The emulation drops it; a GPU runs what it has.
  virtual void abandon() = 0;
};

// The marks a device made (Device::mark) and has not followed yet, by number: made on the
// callers' threads, read and taken on the worker's.
template <class M>
class Marks {
 public:
  uint64_t add(M m) {
    std::lock_guard<std::mutex> lock(mutex_);
    made_.emplace_back(++count_, std::move(m));
    return count_;
  }
  M get(uint64_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [n, m] : made_) {
      if (n == id) return m;
    }
    throw std::logic_error("dpcore: a mark followed already, or never made");
  }
  // Mark id and those made before it, which nobody will follow (the last is id's).
  std::vector<M> take(uint64_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<M> taken;
    while (!made_.empty() && made_.front().first <= id) {
      taken.push_back(std::move(made_.front().second));
      made_.pop_front();
    }
    if (taken.empty()) throw std::logic_error("dpcore: a mark followed already, or never made");
    return taken;
  }

 private:
  std::mutex mutex_;
  std::deque<std::pair<uint64_t, M>> made_;
  uint64_t count_ = 0;
};

// The emulation, with `blocks` x `threads` std::threads per kernel (small grids: one per call).
std::unique_ptr<Device> makeEmulatedDevice(unsigned blocks, unsigned threads);
// The GPU `device` of this process, or an error that says why not (no CUDA build, no GPU).
std::unique_ptr<Device> makeCudaDevice(int device);

}  // namespace dpcore
