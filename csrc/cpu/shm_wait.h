// How a rank waits for a peer: spin briefly (a peer on another core answers within
// microseconds), then yield the core (ranks may outnumber cores, and the peer we wait for may
// need ours), then sleep in short naps once the wait is clearly long. While waiting, it watches
// the deadline, the abort flag and the peers' liveness, so no failure becomes a hang.
#pragma once

#include <sched.h>
#include <time.h>

#include <chrono>
#include <sstream>

namespace dpcore {

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

template <class Ready, class Blame>
void ShmComm::waitUntil(Ready ready, Blame blame) {
  constexpr int kSpins = 256;
  for (int i = 0; i < kSpins; ++i) {
    if (ready()) return;
    cpuRelax();
  }
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  bool longWait = false;
  for (uint64_t iter = 1;; ++iter) {
    if (ready()) return;
    checkAbort();
    if (iter % 64 == 0) {
      const auto now = Clock::now();
      if (now - lastPeerCheck_ > std::chrono::milliseconds(200)) checkPeers();
      if (now > deadline_) {
        std::ostringstream why;
        why << "timed out after " << timeout_ << " s waiting for " << blame();
        fail(why.str());
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
