// How a rank waits for a peer: spin briefly (a peer on another core answers within
// microseconds), then yield the core (ranks may outnumber cores, and the peer we wait for may
// need ours), then sleep in short naps once the wait is clearly long. While waiting, it watches
// the deadline, the abort flag and the peers' liveness, so no failure becomes a hang.
#pragma once

#include <sched.h>
#include <time.h>

#include <chrono>

namespace dpcore {

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

template <class Ready>
void ShmComm::waitUntil(Ready ready, const std::vector<int>& waitingFor) {
  constexpr int kSpins = 256;
  for (int i = 0; i < kSpins; ++i) {
    if (ready()) return;
    cpuRelax();
  }
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  SegmentControl* control = layout_.control(base_);
  bool longWait = false;
  for (uint64_t iter = 1;; ++iter) {
    if (ready()) return;
    if (control->abort.value.load(std::memory_order_acquire) != 0) {
      fail(std::string("aborted: ") + control->reason);
    }
    if (iter % 64 == 0) {
      const auto now = Clock::now();
      if (now - lastPeerCheck_ > std::chrono::milliseconds(200)) checkPeers();
      if (now > deadline_) {
        std::string who;
        for (int r : waitingFor) who += (who.empty() ? "" : ", ") + std::to_string(r);
        fail("timed out after " + std::to_string(timeout_) + " s waiting for rank(s) [" + who +
             "]");
      }
      longWait = now - start > std::chrono::milliseconds(20);
    }
    if (longWait) {
      timespec nap{0, 50 * 1000};
      nanosleep(&nap, nullptr);
    } else {
      sched_yield();
    }
  }
}

}  // namespace dpcore
