// The shared-memory transport: the ranks of one node, one segment (shm_layout.h), a FIFO into
// every rank from its ring predecessor, per-rank one-shot slots, and direct reads of the peers'
// buffers. It carries the headers and the data of one collective at a time for core/collectives.h,
// which matches the calls and runs the algorithms; here live only the segment, waiting, liveness
// and failure.
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/call.h"
#include "cpu/shared_buffers.h"
#include "cpu/shm_layout.h"
#include "cpu/shm_segment.h"

namespace dpcore {

enum class DirectStage;  // algo/direct.h
class ShmPrims;
class ShmPayloads;
class ShmPeerMemory;
class ShmRounds;
struct RingCall;

// What a rank's header tells the peers that read its data (ShmTransport::Meta).
struct ShmMeta {
  uint32_t align;      // where this rank's data sits in its slots (ShmLayout::kAlignSpan)
  uint32_t inRegion;   // the shared buffer (cpu/shared_buffers.h) that holds addr's data, or 0;
  uint32_t outRegion;  // and outAddr's (all_reduce; gather's root)
  uint64_t addr;     // direct algorithm: this rank's input (broadcast: its buffer), as an
  uint64_t outAddr;  // address in its own process, and its output; peers read both (gather: write)
  // An input in pieces (task.h: scatter's root given a list): addr is its table of their
  // addresses, from which a peer reads its piece's before the piece.
};

// The ShmMeta of `task`: its data at `align` in the slots, its buffers in the regions that
// `regionOf(p, bytes)` finds (0: in none). The device transport's too, in its own units.
template <class RegionOf>
ShmMeta shmMetaOf(const Task& task, uint32_t align, RegionOf regionOf) {
  const size_t bytes = task.count * dtypeSize(task.dtype);
  const void* published = task.coll == Coll::kBroadcast ? task.out : task.in;
  // the output the peers reach: all_reduce's direct reads it, gather's senders write the root's
  const size_t outBytes = task.coll == Coll::kAllReduce ? bytes
                          : task.coll == Coll::kGather  ? task.total * dtypeSize(task.dtype)
                                                        : 0;
  if (task.pieces.at) {  // read where they lie, through the table
    return ShmMeta{align, 0, 0, reinterpret_cast<uint64_t>(task.pieces.at),
                   reinterpret_cast<uint64_t>(task.out)};
  }
  return ShmMeta{align, regionOf(published, bytes), outBytes ? regionOf(task.out, outBytes) : 0,
                 reinterpret_cast<uint64_t>(published), reinterpret_cast<uint64_t>(task.out)};
}

class ShmTransport {
 public:
  static constexpr bool kPeerMemory = true;  // direct can run here
  using Meta = ShmMeta;

  // spinUs: the longest a blocking call's wait polls before it sleeps, while the ranks do not
  // outnumber the cores (DPCORE_SPIN_US; shm_wait.h).
  ShmTransport(const std::string& name, bool create, int rank, const ShmConfig& config,
               double spinUs);
  ~ShmTransport();  // tells the peers this rank has left, so none waits for it in vain
  ShmTransport(const ShmTransport&) = delete;
  ShmTransport& operator=(const ShmTransport&) = delete;

  void unlinkSegment() { segment_->unlink(); }  // once every rank has mapped it
  // Whether this rank may read every peer's memory (the direct algorithm); call on all ranks
  // after every rank has mapped the segment, and agree on the answer (all must say yes).
  bool canReadPeers();
  // Communicator.alloc's buffers, which direct reads through; each buffer holds a reference.
  const std::shared_ptr<SharedBuffers>& sharedBuffers() { return shared_; }

  int rank() const { return rank_; }
  int size() const { return config_.size; }
  int name(int r) const { return config_.names.empty() ? r : config_.names[r]; }  // in messages

  // -- one collective, as core/collectives.h drives it --------------------------------------
  void validate(const Task& task) const;  // a one-shot payload fits its slot
  Meta annotate(const Task& task) const;
  // The tuner's BufferKind: direct reads a shared buffer with a plain copy.
  static bool sharedInput(const Meta& meta) { return meta.inRegion != 0; }
  void begin(const CallContext& call) {
    call_ = &call;
    layout_.rank(base_, rank_)->entered.value.store(call.number, std::memory_order_release);
  }
  // Publishes this rank's header (and a one-shot payload) and returns every rank's header. In
  // two halves for a transport that publishes its payload elsewhere (cuda/device_transport.h):
  // once openExchange returns, this rank's one-shot slot of the call's parity is free.
  std::vector<CollHeader> exchange(const Task& task, const CollHeader& mine);
  void openExchange();
  std::vector<CollHeader> closeExchange(const CollHeader& mine);
  size_t segmentBytes() const { return config_.slotBytes; }
  size_t oneShotBytes() const { return config_.oneShotBytes; }
  static void copyAlone(void* out, const void* in, size_t bytes) { std::memmove(out, in, bytes); }
  ShmPrims prims(const RingCall& ring, const std::vector<CollHeader>& headers);
  ShmPayloads payloads(const Task& task, const std::vector<CollHeader>& headers);
  ShmPeerMemory peerMemory(const std::vector<CollHeader>& headers);
  // Whether every rank of the node may read its peers' memory (canReadPeers, agreed at init):
  // without, gather, scatter and all_to_all move through the one-shot slots in rounds.
  void setPeerReads(bool ok) { peerReads_ = ok; }
  bool peerReads() const { return peerReads_; }
  ShmRounds rounds();
  // This rank failed: tell the peers, so that they stop waiting and report why.
  void abort(const std::string& message);
  // This rank makes no more calls: peers that wait for one stop (the destructor says it too).
  void leave(const std::string& why);
  void passOn(const std::string& news) { abort(news); }  // another failure: the abort flag

  // -- what the verbs and peer memory use -----------------------------------------------------
  // The ring's FIFOs: this rank fills slots of the next rank's and empties its own. The slot
  // functions wait until the slot may be used; the post functions hand it over.
  char* sendSlot();
  void postSend();
  const char* recvSlot();
  void postRecv();
  // The same waits, for a transport whose slots live elsewhere: the slot's number in the FIFO
  // (modulo its depth), the next rank's to fill, or ours to empty.
  uint64_t waitSendSlot();
  uint64_t waitRecvSlot();
  // Such a transport's note beside slot `index` of rank r's FIFO: the slot of that number in
  // the segment, whose bytes the posts order as they order the data (DevicePrims: where the
  // segment sits in the device's slot).
  char* hostSlot(int r, uint64_t index) { return layout_.fifoSlot(base_, r, index); }
  char* oneShotSlot(int r) const { return layout_.oneShotSlot(base_, r, call_->seq); }
  // An exchange in rounds (ShmRounds): rank r's slot i, whole: 0 its one-shot slot of this
  // call, 1 that of the next call's parity (free during this call: every peer finished the
  // call before, and none reads the next one's before this rank arrives there); and the
  // round's stage, as signal and waitAll for a round of this call.
  size_t stageBytes() const { return layout_.oneShotStride(); }
  char* roundSlot(int r, int i) const { return layout_.oneShotSlot(base_, r, call_->seq + i); }
  void signalRound(Counter RankControl::*stage, uint64_t round);
  void waitRound(Counter RankControl::*stage, uint64_t round, const char* what);
  // Copies from / to a peer's memory (its address `remote`, in shared buffer `region` or 0).
  // stream: this rank's output (readFrom), or the peer's (writeTo), is too large to stay in
  // cache (stream_copy.h); only a copy through a mapping can stream, the kernel's cannot.
  void readFrom(int peer, uint64_t remote, uint32_t region, void* dst, size_t bytes,
                bool stream);
  void writeTo(int peer, uint64_t remote, uint32_t region, const void* src, size_t bytes,
               bool stream);
  // Tells the peers this rank passed `stage` of this call / waits until every rank has.
  void signal(Counter RankControl::*stage);
  void waitAll(Counter RankControl::*stage, const char* what);
  // The same for direct's stages (algo/direct.h), on the counters reduced and done.
  void signal(DirectStage stage);
  void waitAll(DirectStage stage);
  char* ringScratch();          // a slot's worth of local memory: the ring's partial sums
  char* directScratch(int i);   // direct's two cache-sized pieces (i = 0, 1)

  // Waiting (shm_wait.h): poll, then sleep on this rank's doorbell, watching the deadline, the
  // abort flag and the peers' liveness; blame() names what a timeout waited for ("rank 1"),
  // and peer is the one rank waited for, if one.
  template <class Ready, class Blame>
  void waitUntil(Ready ready, Blame blame, int peer = -1);
  template <class Ready>
  void waitUntil(Ready ready, int peer) {
    waitUntil(ready, [this, peer] { return "rank " + std::to_string(name(peer)); }, peer);
  }
  // For a wait of this rank's own (its device, cuda/device_transport.h): fails the call if a
  // peer failed or died or the deadline passed, naming `what` it waited for. A peer that left
  // is no reason: this rank's own work does not wait for it.
  void watch(const char* what);
  // The device's control, where the device's work runs on this process's threads (the
  // emulation: cuda/device.h, onHostCores): with the ranks outnumbering the cores, a wait
  // sleeps after its spin rather than yielding for a while first (shm_wait.h), since a
  // yielding waiter keeps its share of the cores that the peers' kernels need.
  void leaveCoresToWork() { yields_ = false; }
  // A communicator's calls on host arrays and on CUDA arrays go to two transports, both of
  // them a ShmTransport on the host (the device's: its control()). Each rank says in the host
  // one's segment which call it entered on each side (RankControl::entered, elsewhere), so a
  // peer that made this very call on the other side, and will never post here, is found
  // within a peer check (otherSideTrouble).
  // The device's control: `host` is the communicator's host transport, which outlives it.
  void pairWithHost(ShmTransport* host) { hostSide_ = host; }
  // The host transport: this rank entered call `number` on the device side.
  void enterElsewhere(uint64_t number) {
    layout_.rank(base_, rank_)->elsewhere.value.store(number, std::memory_order_release);
  }
  // The host transport, before the device side exists (its set-up is part of the first call on
  // CUDA arrays): enters `call` on the device side and waits until every peer has too, or
  // fails at once where one made it here, on host arrays.
  void meetElsewhere(const CallContext& call);
  // Whether every peer has left or died: none can read this rank's memory any more.
  bool peersGone() { return peerTroubleCount() == config_.size - 1; }
  // After posting a counter: wake rank r (or every peer) if it sleeps in waitUntil.
  void notify(int r);
  void notifyAll();

 private:
  void wakeIfAsleep(int r);  // notify without its fence: the caller has fenced
  void checkAbort() const;   // another rank failed: stop, and say why
  // Why a peer will never post what we wait for ("" if none): it died, or (leftCounts) it
  // closed its communicator.
  std::string peerTrouble(bool leftCounts = true);
  std::string otherSideTrouble() const;  // a peer made this call on the other side, or ""
  int peerTroubleCount();
  std::string heldUpBy(int peer) const;  // "rank 0 (stopped), for which ..." or ""
  std::string ranksBehind(Counter RankControl::*counter, uint64_t seq) const;
  // Until every rank's `stage` counter reaches `mark` (waitAll's and waitRound's wait).
  void waitAllReach(Counter RankControl::*stage, uint64_t mark, const char* what);
  pid_t peerPid(int peer) const;
  // readFrom's and writeTo's loop: in pieces, so that a peer's failure (the abort flag) stops a
  // long copy early; piece(done, len) copies one and returns 0 or the kernel call's errno.
  template <class Piece>
  void copyInPieces(int peer, const char* verb, const char* call, size_t bytes, Piece piece) {
    constexpr size_t kPiece = 4 << 20;
    for (size_t done = 0; done < bytes; done += kPiece) {
      checkAbort();
      const int err = piece(done, std::min(kPiece, bytes - done));
      if (err == ESRCH) {
        call_->fail("rank " + std::to_string(name(peer)) + " (pid " +
                    std::to_string(peerPid(peer)) + ") died");
      }
      if (err != 0) {
        call_->fail(std::string("cannot ") + verb + " rank " + std::to_string(name(peer)) +
                    "'s buffer (" + call + ": " + std::strerror(err) + ")");
      }
    }
  }

  int rank_;
  ShmConfig config_;
  ShmLayout layout_;
  std::unique_ptr<ShmSegment> segment_;
  char* base_;
  bool oversubscribed_;  // more ranks on this node than cores this process may run on
  bool yields_ = true;   // oversubscribed: a wait yields a while before it sleeps (shm_wait.h)
  std::chrono::nanoseconds spin_;     // waitUntil's longest polling before a sleep
  std::chrono::nanoseconds pollFor_;  // its polling now (shm_wait.h): blocking calls only
  uint32_t polledWaits_ = 0;          // waits that polled: every kProbeEvery-th polls spin_
  const CallContext* call_ = nullptr;  // the collective in flight
  uint64_t sendHead_ = 0;  // slots this rank has filled in the next rank's FIFO
  uint64_t recvTail_ = 0;  // slots this rank has emptied from its own FIFO
  std::chrono::steady_clock::time_point lastPeerCheck_;
  ShmTransport* hostSide_ = nullptr;  // the device's control: the host transport (pairWithHost)
  bool meeting_ = false;  // in meetElsewhere, where peers are expected on the other side
  bool peerReads_ = true;  // setPeerReads
  std::shared_ptr<SharedBuffers> shared_ = std::make_shared<SharedBuffers>();
  std::vector<char> ringScratch_, directScratch_;
};

}  // namespace dpcore

#include "cpu/shm_wait.h"
// what prims(), payloads() and peerMemory() return, for whoever runs the algorithms
#include "cpu/shm_peers.h"
#include "cpu/shm_prims.h"
