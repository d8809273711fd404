// How a rank waits for a peer: spin briefly (a peer on another core answers within
// microseconds), then sleep on this rank's doorbell futex until a peer posts (Doorbell,
// shm_layout.h). Sleeping, not yielding: a yield hands the core to whatever else is runnable
// for a whole time slice (milliseconds), such as the backward pass on the thread that queued
// an async all-reduce, which then crawled one handoff per slice (4 MiB took 4-14 ms beside a
// matmul loop, 0.2-0.5 ms alone); a woken sleeper runs at once. Only where the ranks
// outnumber the cores does a rank yield first, after a shorter spin, for up to 20 ms: there
// the peer it waits for is likely waiting for its core, and a yield hands it over without the
// two system calls of a sleep and a wake (4 ranks on 2 cores, both after 256 spins: 8-byte
// all-reduce 13 us yielding, 30 us sleeping).
// While waiting it watches the deadline, the abort flag and the peers' liveness, so no
// failure becomes a hang.
#pragma once

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
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

// The futex word lives in the shared segment, so these are the shared (not _PRIVATE) calls.
inline void futexWait(std::atomic<uint32_t>* word, uint32_t seen, long timeoutNs) {
  timespec timeout{0, timeoutNs};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, seen, &timeout, nullptr, 0);
}
inline void futexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr,
          0);
}

// The poster's half of the handshake in waitUntil: the fence orders the counter just posted
// before the load of `sleeping`, as the sleeper's fence orders `sleeping` before its last
// look at the counter, so one of the two always sees the other.
inline void ShmComm::wakeIfAsleep(int r) {
  Doorbell& bell = layout_.rank(base_, r)->doorbell;
  if (bell.sleeping.load(std::memory_order_relaxed)) {
    bell.count.fetch_add(1, std::memory_order_release);
    futexWakeAll(&bell.count);
  }
}

inline void ShmComm::notify(int r) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  wakeIfAsleep(r);
}

inline void ShmComm::notifyAll() {
  std::atomic_thread_fence(std::memory_order_seq_cst);  // one fence serves every peer's bell
  for (int r = 0; r < config_.size; ++r) {
    if (r != rank_) wakeIfAsleep(r);
  }
}

template <class Ready, class Blame>
void ShmComm::waitUntil(Ready ready, Blame blame) {
  // Where the ranks outnumber the cores, the peer awaited is likely waiting for this core:
  // spinning only delays the yield that hands it over (4 ranks on 2 cores: an 8-byte
  // all_reduce took 12 us after 256 spins, 6 us after 16).
  const int spins = oversubscribed_ ? 16 : 256;
  constexpr long kNapNs = 1000 * 1000;  // a sleep's longest stretch, to look at the clock
  for (int i = 0; i < spins; ++i) {
    if (ready()) return;
    cpuRelax();
  }
  Doorbell& bell = layout_.rank(base_, rank_)->doorbell;
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    if (ready()) return;
    checkAbort();
    const auto now = std::chrono::steady_clock::now();
    if (now - lastPeerCheck_ > std::chrono::milliseconds(200)) {
      std::string trouble = peerTrouble();
      if (!trouble.empty()) {
        if (ready()) return;
        fail(trouble);
      }
    }
    if (now > deadline_) {
      std::ostringstream why;
      why << "timed out after " << timeout_ << " s waiting for " << blame();
      fail(why.str());
    }
    if (oversubscribed_ && now - start < std::chrono::milliseconds(20)) {
      sched_yield();
      continue;
    }
    const uint32_t seen = bell.count.load(std::memory_order_acquire);
    bell.sleeping.store(1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (!ready()) futexWait(&bell.count, seen, kNapNs);
    bell.sleeping.store(0, std::memory_order_relaxed);
  }
}

}  // namespace dpcore
