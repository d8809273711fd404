// The point-to-point engine: send and receive ops between two ranks, outside the collective
// engine (core/collectives.h matches calls of every rank; here only two take part). isend and
// irecv post an op and return; the ops move whenever someone drives the channel: a blocking op
// or a wait on the caller's thread (no hand-off: the lowest latency), and, once an async op is
// in flight, a progress thread of its own that sleeps while nothing is pending. Every wait
// moves every op, so a ring exchange (isend to the next rank, irecv from the previous, wait
// both) completes whatever order the ranks wait in.
//
// Each op has the communicator's timeout as its deadline; a dead or departed peer fails it
// within 200 ms of being seen. The first failure breaks the engine: every pending op fails with
// that message, the channel tells the peers, and later ops are refused, as a communicator whose
// collective failed refuses the next (the two ranks no longer agree on what was exchanged).
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "p2p/p2p_channel.h"

namespace dpcore {

class P2pEngine {
 public:
  // threaded: a progress thread may call the channel (MPI: only where MPI_THREAD_MULTIPLE);
  // without one, async ops move only while this rank waits or posts.
  P2pEngine(std::unique_ptr<P2pChannel> channel, double timeout, bool threaded);
  ~P2pEngine();
  P2pEngine(const P2pEngine&) = delete;
  P2pEngine& operator=(const P2pEngine&) = delete;

  // Posts an op (peer: kAnySource for a receive from any rank); async: it may move without a
  // wait (the progress thread). Throws CommError once the engine is broken or closed.
  std::shared_ptr<P2pOp> post(bool send, int peer, int tag, DType dtype, void* data,
                              size_t bytes, bool async);
  // Drives the channel until `op` is finished or `seconds` passed (negative: no limit); true
  // once finished. Throws the op's CommError if it failed.
  bool wait(P2pOp& op, double seconds);
  // Finishes the pending ops, or fails them at their deadlines; then leaves: the peers hear
  // that this rank posts nothing more. Returns the first failure's message, or "".
  std::string close();
  std::string broken();  // the first failure's message, or ""
  int rank() const { return channel_->rank(); }
  int size() const { return channel_->size(); }

 private:
  bool progressLocked();  // under mu_: moves ops, checks deadlines and peers; whether any moved
  void breakWith(const std::string& why);
  void loop();            // the progress thread

  std::unique_ptr<P2pChannel> channel_;
  const double timeout_;
  bool threaded_;
  std::mutex mu_;  // the channel and ops_
  std::condition_variable work_;  // ops_ became non-empty, or stop_
  P2pOps ops_;     // pending, in posting order
  std::vector<uint64_t> sent_;  // sends posted per destination
  uint64_t received_ = 0;       // receives posted
  std::string broken_;
  bool closed_ = false;
  bool stop_ = false;
  std::chrono::steady_clock::time_point lastDeepCheck_;
  std::thread thread_;  // started by the first async op
};

}  // namespace dpcore
