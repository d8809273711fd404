// The point-to-point engine (p2p_engine.h): posting, waiting, the progress thread, deadlines
// and the first failure.
#include "p2p/p2p_engine.h"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <sstream>

#include "dpcore/error.h"
#include "dpcore/limits.h"

namespace dpcore {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kDeepCheckEvery = std::chrono::milliseconds(200);  // pids, as shm_wait.h

// Idle waiting between two looks at the channel: spin a little (a peer a few microseconds late
// finds this rank awake), then yield the core (ranks may outnumber cores, and a peer waiting for
// this core then runs), then nap, so a long wait costs no core.
class Backoff {
 public:
  // spin: a thread that waits (the caller's); the progress thread does not spin, since it
  // would take the core of the caller, who computes meanwhile.
  explicit Backoff(bool spin) : spin_(spin) {}
  void reset() { idle_ = 0; }
  void pause() {
    ++idle_;
    if (spin_ && idle_ < 64) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    } else if (idle_ < 4096) {
      sched_yield();
    } else {
      timespec nap{0, idle_ < 8192 ? 50 * 1000 : 500 * 1000};
      nanosleep(&nap, nullptr);
    }
  }

 private:
  bool spin_;
  long idle_ = 0;
};

std::string timedOut(double timeout, const P2pOp& op) {
  std::ostringstream why;
  why << "timed out after " << timeout << " s waiting for " << op.waitingFor();
  return op.message(why.str());
}

}  // namespace

P2pEngine::P2pEngine(std::unique_ptr<P2pChannel> channel, double timeout, bool threaded)
    : channel_(std::move(channel)), timeout_(timeout), threaded_(threaded),
      sent_(channel_->size(), 0), lastDeepCheck_(Clock::now()) {}

// Dropped without close(): nothing waits here (at exit, a pending op would hold the process
// for its timeout); what is pending fails, and the peers hear that this rank left.
P2pEngine::~P2pEngine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!closed_) {
      closed_ = true;
      for (const auto& op : ops_) op->fail("dpcore: the communicator was dropped");
      ops_.clear();
      channel_->leave();
    }
    stop_ = true;
  }
  work_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string P2pEngine::broken() {
  std::lock_guard<std::mutex> lock(mu_);
  return broken_;
}

std::shared_ptr<P2pOp> P2pEngine::post(bool send, int peer, int tag, DType dtype, void* data,
                                       size_t bytes, bool async) {
  auto op = std::make_shared<P2pOp>();
  op->send = send;
  op->rank = channel_->rank();
  op->peer = peer;
  op->tag = tag;
  op->dtype = dtype;
  op->data = static_cast<char*>(data);
  op->bytes = bytes;
  std::unique_lock<std::mutex> lock(mu_);
  if (closed_) throw CommError("dpcore: the communicator is closed");
  if (!broken_.empty()) {
    throw CommError("dpcore: communicator unusable after an earlier failure: " + broken_);
  }
  op->number = send ? ++sent_[peer] : ++received_;
  op->deadline = deadlineAfter(Clock::now(), timeout_);
  ops_.push_back(op);
  progressLocked();  // a message already waiting, or room in the mailbox: it moves at once
  if (async && threaded_ && !op->finished()) {
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
    lock.unlock();
    work_.notify_one();
  }
  return op;
}

bool P2pEngine::wait(P2pOp& op, double seconds) {
  const Clock::time_point until =
      seconds < 0 ? Clock::time_point::max() : deadlineAfter(Clock::now(), seconds);
  Backoff backoff(true);
  while (!op.finished()) {
    bool moved;
    {
      std::lock_guard<std::mutex> lock(mu_);
      moved = progressLocked();
    }
    if (op.finished()) break;
    if (Clock::now() > until) return false;
    if (moved) backoff.reset();
    else backoff.pause();
  }
  if (op.state.load(std::memory_order_acquire) == P2pOp::kFailed) throw CommError(op.error);
  return true;
}

bool P2pEngine::progressLocked() {
  if (ops_.empty()) return false;
  bool moved = false;
  try {
    moved = channel_->progress(ops_);
    const Clock::time_point now = Clock::now();
    const bool deep = now - lastDeepCheck_ > kDeepCheckEvery;
    if (deep) lastDeepCheck_ = now;
    for (const auto& op : ops_) {
      if (op->finished()) continue;
      const std::string trouble = channel_->trouble(op->peer, deep);
      // a failed point-to-point op's message is told as it is; a peer's fate is this op's news
      if (!trouble.empty()) {
        channel_->progress(ops_);  // the peer's fate comes after all it did: look once more
        if (op->finished()) continue;
        throw CommError(trouble.rfind("dpcore ", 0) == 0 ? trouble : op->message(trouble));
      }
      if (now > op->deadline) throw CommError(timedOut(timeout_, *op));
    }
  } catch (const std::exception& e) {
    breakWith(e.what());
    return true;
  }
  ops_.erase(std::remove_if(ops_.begin(), ops_.end(),
                            [](const std::shared_ptr<P2pOp>& op) { return op->finished(); }),
             ops_.end());
  return moved;
}

void P2pEngine::breakWith(const std::string& why) {
  if (broken_.empty()) broken_ = why;
  for (const auto& op : ops_) {
    if (!op->finished()) op->fail(why);
  }
  channel_->abort(why, ops_);
  ops_.clear();
}

std::string P2pEngine::close() {
  std::unique_lock<std::mutex> lock(mu_);
  if (closed_) return broken_;
  Backoff backoff(true);
  while (!ops_.empty()) {  // each op ends at its deadline at the latest
    if (progressLocked()) backoff.reset();
    lock.unlock();
    backoff.pause();
    lock.lock();
  }
  closed_ = true;
  channel_->leave();
  return broken_;
}

void P2pEngine::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  Backoff backoff(false);
  while (!stop_) {
    if (ops_.empty()) {
      work_.wait(lock, [this] { return stop_ || !ops_.empty(); });
      backoff.reset();
      continue;
    }
    const bool moved = progressLocked();
    lock.unlock();
    if (moved) {
      backoff.reset();
      sched_yield();
    } else {
      backoff.pause();
    }
    lock.lock();
  }
}

}  // namespace dpcore
