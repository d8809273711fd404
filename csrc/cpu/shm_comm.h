// The shared-memory communicator: ranks of one node, one segment, a FIFO into every rank from
// its ring predecessor, and per-rank one-shot slots for small messages. It runs one collective
// at a time (the worker serialises them); the Python layer has checked the arguments.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cpu/shared_buffers.h"
#include "cpu/shm_layout.h"
#include "cpu/shm_segment.h"
#include "cpu/trace.h"
#include "cpu/tuner.h"
#include "dpcore/types.h"

namespace dpcore {

// kCountsOnly publishes headers only: all_gather without out= learns the shard sizes first.
// kDirect: every rank reads what it needs straight from the peers' buffers (cpu/direct.h), one
// copy instead of the ring's two through a FIFO. kTuned: ring or direct, as rank 0's tuner picks
// (cpu/tuner.h); algoCalls() counts what ran.
enum class Algo : int32_t { kOneShot = 0, kRing = 1, kCountsOnly = 2, kDirect = 3, kTuned = 4 };

struct Task {
  Coll coll = Coll::kBarrier;
  DType dtype = DType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
  Algo algo = Algo::kOneShot;
  const void* in = nullptr;
  void* out = nullptr;
  size_t count = 0;  // elements of in (all_gather: this rank's shard)
  size_t total = 0;  // elements of the all_gather output; count otherwise
};

class ShmComm {
 public:
  ShmComm(const std::string& name, bool create, int rank, const ShmConfig& config,
          double timeoutSeconds);
  ~ShmComm();  // tells the peers this rank has left, so none waits for it in vain
  void unlinkSegment() { segment_->unlink(); }  // once every rank has mapped it

  // Runs one collective; returns every rank's header (its call, as that rank made it).
  std::vector<CollHeader> run(const Task& task);
  // All ranks' all_gather shard sizes, through a header-only collective.
  std::vector<size_t> exchangeCounts(DType dtype, size_t mine);
  // Whether this rank may read every peer's memory (the direct algorithm); call on all ranks
  // after every rank has mapped the segment, and agree on the answer (all must say yes).
  bool canReadPeers();

  int rank() const { return rank_; }
  int size() const { return config_.size; }
  const ShmConfig& config() const { return config_; }
  uint64_t sequence() const { return seq_; }
  // Collectives run by each algorithm (kTuned resolved to what ran), indexed by Algo below
  // kTuned.
  static constexpr int kRunnableAlgos = static_cast<int>(Algo::kTuned);
  const uint64_t* algoCalls() const { return algoCalls_; }
  void setTimeout(double seconds) { timeout_ = seconds; }
  // Communicator.alloc's buffers, which direct reads through; each buffer holds a reference
  const std::shared_ptr<SharedBuffers>& sharedBuffers() { return shared_; }

  // Waiting, shared with the primitives. blame() names the ranks a timeout blames ("rank 1").
  template <class Ready, class Blame>
  void waitUntil(Ready ready, Blame blame);
  template <class Ready>
  void waitUntil(Ready ready, int peer) {
    waitUntil(ready, [peer] { return "rank " + std::to_string(peer); });
  }
  // After posting a counter: wake rank r (or every peer) if it sleeps in waitUntil.
  void notify(int r);
  void notifyAll();
  void wakeIfAsleep(int r);  // notify without its fence: the caller has fenced
  [[noreturn]] void fail(const std::string& why);
  void checkAbort() {  // another rank failed: stop, and say why
    SegmentControl* control = layout_.control(base_);
    if (control->abort.value.load(std::memory_order_acquire) != 0) {
      fail(std::string("aborted: ") + control->reason);
    }
  }

  // Transport state the primitives use.
  FifoControl* fifo(int r) const { return layout_.fifo(base_, r); }
  char* fifoSlot(int r, uint64_t index) const { return layout_.fifoSlot(base_, r, index); }
  Tracer tracer_;
  uint64_t sendHead_ = 0;  // slots this rank has filled in the next rank's FIFO
  uint64_t recvTail_ = 0;  // slots this rank has emptied from its own FIFO

 private:
  void arrive(const Task& task, CollHeader& header);
  // "ranks 1, 3": those whose `counter` (arrived, done) is below seq.
  std::string ranksBehind(Counter RankControl::*counter, uint64_t seq) const;
  std::vector<CollHeader> gatherHeaders(const CollHeader& mine);
  void checkHeaders(const std::vector<CollHeader>& headers, const CollHeader& mine);
  std::string peerTrouble();
  std::string describe(const CollHeader& h) const;
  void runOneShot(const Task& task, const std::vector<CollHeader>& headers);
  void runRing(const Task& task, const std::vector<CollHeader>& headers);
  void runDirect(const Task& task, const std::vector<CollHeader>& headers);
  // region: the shared buffer the peer said holds `remote` (0: none, a kernel copy)
  void readFrom(int peer, uint64_t remote, uint32_t region, void* local, size_t bytes,
                bool stream);
  void reduceOwnChunk(const Task& task, const std::vector<CollHeader>& headers, char* dst);
  void waitForAll(Counter RankControl::*counter, const char* what);
  std::vector<char> directAcc_, directPeer_;  // cache-sized pieces for the direct reduction
  std::vector<char> ringScratch_;              // a slot's worth, for the ring's partial sums

  int rank_;
  ShmConfig config_;
  ShmLayout layout_;
  std::unique_ptr<ShmSegment> segment_;
  char* base_;
  double timeout_;
  bool oversubscribed_;  // more ranks on this node than cores this process may run on
  uint64_t seq_ = 0;
  uint64_t algoCalls_[kRunnableAlgos] = {};
  Tuner tuner_;  // rank 0's; the others follow its pick
  std::shared_ptr<SharedBuffers> shared_ = std::make_shared<SharedBuffers>();
  const char* collName_ = "";  // of the collective in flight, for messages
  std::chrono::steady_clock::time_point deadline_;
  std::chrono::steady_clock::time_point lastPeerCheck_;
  std::string brokenReason_;
};

}  // namespace dpcore

#include "cpu/shm_wait.h"
