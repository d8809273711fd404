// The shared-memory transport's watch on its peers (shm_transport.h): why a peer will never post
// what this rank waits for (it died, left, failed, or made the call on the communicator's other
// side), and whom a timeout names.
#include <string>

#include "core/process.h"
#include "cpu/shm_transport.h"

namespace dpcore {
namespace {

std::string sidesDiffer(int peer, bool peerOnDevice) {
  const char* host = "host arrays";
  const char* device = "CUDA arrays";
  return "rank " + std::to_string(peer) + " made this call on " + (peerOnDevice ? device : host) +
         ", this rank on " + (peerOnDevice ? host : device) +
         ": every rank passes its arrays on the same side";
}

}  // namespace

void ShmTransport::checkAbort() const {
  SegmentControl* control = layout_.control(base_);
  if (control->abort.value.load(std::memory_order_acquire) != 0) {
    call_->fail(std::string("aborted: ") + control->reason);
  }
}

// Why a peer will never post what we wait for: it made the call on the other side (and may
// since have closed its communicator, having failed there), it died, or it closed its
// communicator.
std::string ShmTransport::peerTrouble(bool leftCounts) {
  lastPeerCheck_ = std::chrono::steady_clock::now();
  std::string elsewhere = otherSideTrouble();
  if (!elsewhere.empty()) return elsewhere;
  for (int r = 0; r < config_.size; ++r) {
    if (r == rank_) continue;
    RankControl* peer = layout_.rank(base_, r);
    auto pid = static_cast<pid_t>(peer->pid.value.load(std::memory_order_acquire));
    if (pid > 0 && !processAlive(pid)) {
      return "rank " + std::to_string(name(r)) + " (pid " + std::to_string(pid) + ") died";
    }
    if (leftCounts && peer->left.value.load(std::memory_order_acquire) != 0) {
      return "rank " + std::to_string(name(r)) +
             " closed its communicator without making this call";
    }
  }
  return "";
}

// Numbers are the communicator's, alike on every rank and never reused: a peer whose last call
// on the other side has this call's number made this call there.
std::string ShmTransport::otherSideTrouble() const {
  if (meeting_) return "";
  const bool device = hostSide_ != nullptr;
  const ShmTransport& host = device ? *hostSide_ : *this;
  Counter RankControl::*there = device ? &RankControl::entered : &RankControl::elsewhere;
  for (int r = 0; r < config_.size; ++r) {
    if (r == rank_) continue;
    if ((host.layout_.rank(host.base_, r)->*there).value.load(std::memory_order_acquire) ==
        call_->number) {
      return sidesDiffer(name(r), !device);
    }
  }
  return "";
}

void ShmTransport::meetElsewhere(const CallContext& call) {
  call_ = &call;
  enterElsewhere(call.number);
  notifyAll();  // peers meeting here too
  struct Meeting {
    bool& flag;
    explicit Meeting(bool& f) : flag(f) { flag = true; }
    ~Meeting() { flag = false; }
  } meeting(meeting_);
  for (int r = 0; r < config_.size; ++r) {
    if (r == rank_) continue;
    RankControl* peer = layout_.rank(base_, r);
    waitUntil([&] {
      return peer->elsewhere.value.load(std::memory_order_acquire) >= call.number ||
             peer->entered.value.load(std::memory_order_acquire) == call.number;
    }, r);
    if (peer->entered.value.load(std::memory_order_acquire) == call.number) {
      call.fail(sidesDiffer(name(r), false));
    }
  }
}

// Follows the waits from `peer`: the rank where they end waits for nobody, so it holds up
// every rank on the way (stopped, or busy elsewhere). A timeout names it rather than the
// neighbour this rank waits for: "rank 0 (stopped), for which ...", or "" if none is found.
std::string ShmTransport::heldUpBy(int peer) const {
  if (peer < 0) return "";
  auto stopped = [&](int r) {
    const auto pid = static_cast<pid_t>(layout_.rank(base_, r)->pid.value.load());
    return pid > 0 && processState(pid) == ProcessState::kStopped;
  };
  std::vector<bool> seen(config_.size, false);
  int r = peer;
  while (!stopped(r)) {  // a stopped rank may have stopped inside a wait of its own
    seen[r] = true;
    const uint64_t w = layout_.rank(base_, r)->waitingFor.value.load(std::memory_order_acquire);
    if (w == kWaitingForSeveral) return "";
    if (w == 0) break;
    const int next = static_cast<int>(w - 1);
    if (next < 0 || next >= config_.size || seen[next]) return "";
    r = next;
  }
  const std::string held =
      "rank " + std::to_string(name(r)) + (stopped(r) ? " (stopped)" : "");
  if (r == peer) return stopped(r) ? held : "";
  return held + ", for which the rank this one waits for waits too";
}

// "ranks 1, 3": those whose `counter` (arrived, done) is below seq.
std::string ShmTransport::ranksBehind(Counter RankControl::*counter, uint64_t seq) const {
  std::string list;
  int count = 0;
  for (int r = 0; r < config_.size; ++r) {
    if ((layout_.rank(base_, r)->*counter).value.load(std::memory_order_acquire) < seq) {
      list += (count++ ? ", " : "") + std::to_string(name(r));
    }
  }
  return (count == 1 ? "rank " : "ranks ") + list;
}

void ShmTransport::watch(const char* what) {
  checkAbort();
  const auto now = std::chrono::steady_clock::now();
  if (now - lastPeerCheck_ > std::chrono::milliseconds(200)) {
    const std::string trouble = peerTrouble(false);
    if (!trouble.empty()) call_->fail(trouble);
  }
  if (call_->expired(now)) call_->fail(call_->timedOut(what));
}

int ShmTransport::peerTroubleCount() {
  int gone = 0;
  for (int r = 0; r < config_.size; ++r) {
    if (r == rank_) continue;
    RankControl* peer = layout_.rank(base_, r);
    auto pid = static_cast<pid_t>(peer->pid.value.load(std::memory_order_acquire));
    gone += (pid > 0 && !processAlive(pid)) || peer->left.value.load(std::memory_order_acquire);
  }
  return gone;
}

}  // namespace dpcore
