// How a rank of the shared-memory transport waits for a peer. While the ranks do not outnumber
// the cores, a blocking call polls for a time (up to spin_, DPCORE_SPIN_US), since a peer that
// arrives within that time finds it awake and a futex wake costs more than a peer's usual
// lateness, then sleeps on this rank's doorbell futex until a peer posts (Doorbell,
// shm_layout.h). An async call (on the worker thread, core/worker.h) does not poll: the thread
// that queued it computes meanwhile, and polling would take the core from it. The time adapts
// (pollFor_): a wait that polling ended doubles it, up to spin_; one that had to sleep halves
// it, down to kPollFloor. Where the peer cannot run while this rank polls (another process
// holds the other core), polling only delays the peer until this rank sleeps, so there the
// time shrinks. Every kProbeEvery-th wait polls the whole spin_ all the same, and one that
// polling ends puts pollFor_ back to spin_: without that probe, a few long waits (set-up, a
// peer descheduled) would leave a rank sleeping through peers that arrive a random 0-40 us
// late, as in a training loop, since polling 5 us then rarely pays to double it again.
// Polling yields between looks (every kPollSpins pauses, a few microseconds): with no other
// task on this core the yield returns at once, and with one (the peer, or another program
// holding the peer's core) it runs instead of this rank's polling. An 8-byte all_reduce beside
// one busy process: 0.53-0.56x MPI polling 100 us without yields, 0.72-1.00x with them; no cost
// seen without the busy process (2026-12-02-users-view.md).
// Sleeping, not yielding: a yield hands the core to whatever else is runnable for a whole time
// slice, such as the backward pass on the thread that queued an async all-reduce. Only where the
// ranks outnumber the cores does a rank yield first, after a short spin: there the peer it waits
// for is likely waiting for its core, and a yield hands it over without the two system calls of
// a sleep and a wake. Not where the process's other threads need the cores too (the device
// emulation's kernels: leaveCoresToWork). (The measurements behind these choices:
// benchmarks/results/2026-12-01-structure.md, "Numbers the comments used to quote", and
// 2026-12-02-users-view.md.)
// While waiting it watches the deadline, the abort flag and the peers' liveness, so no failure
// becomes a hang.
#pragma once

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>

#include "core/worker.h"

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
inline void ShmTransport::wakeIfAsleep(int r) {
  Doorbell& bell = layout_.rank(base_, r)->doorbell;
  if (bell.sleeping.load(std::memory_order_relaxed)) {
    bell.count.fetch_add(1, std::memory_order_release);
    futexWakeAll(&bell.count);
  }
}

inline void ShmTransport::notify(int r) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  wakeIfAsleep(r);
}

inline void ShmTransport::notifyAll() {
  std::atomic_thread_fence(std::memory_order_seq_cst);  // one fence serves every peer's bell
  for (int r = 0; r < config_.size; ++r) {
    if (r != rank_) wakeIfAsleep(r);
  }
}

template <class Ready, class Blame>
void ShmTransport::waitUntil(Ready ready, Blame blame, int peer) {
  const int spins = oversubscribed_ ? 16 : 256;
  constexpr auto kYieldFor = std::chrono::milliseconds(20);  // oversubscribed: then sleep
  constexpr int kPollSpins = 64;  // polling: pauses between two looks at the clock
  constexpr std::chrono::nanoseconds kPollFloor = std::chrono::microseconds(5);  // pollFor_'s least
  constexpr uint32_t kProbeEvery = 16;  // where polling does not pay: 1/16 of spin_ a wait
  constexpr long kNapNs = 1000 * 1000;  // a sleep's longest stretch, to look at the clock
  for (int i = 0; i < spins; ++i) {
    if (ready()) return;
    cpuRelax();
  }
  Doorbell& bell = layout_.rank(base_, rank_)->doorbell;
  const auto start = std::chrono::steady_clock::now();
  struct Waiting {  // says whom this rank waits for, until it returns or throws
    std::atomic<uint64_t>& word;
    Waiting(std::atomic<uint64_t>& w, int peer) : word(w) {
      word.store(peer >= 0 ? peer + 1 : kWaitingForSeveral, std::memory_order_relaxed);
    }
    ~Waiting() { word.store(0, std::memory_order_relaxed); }
  } waiting(layout_.rank(base_, rank_)->waitingFor.value, peer);
  const bool polls = !oversubscribed_ && !onWorkerThread();
  const bool probe = polls && ++polledWaits_ % kProbeEvery == 0;
  const std::chrono::nanoseconds pollFor = probe ? spin_ : pollFor_;
  bool slept = false;
  for (;;) {
    if (ready()) {
      if (polls && !slept) pollFor_ = probe ? spin_ : std::min(spin_, 2 * pollFor_);
      return;
    }
    checkAbort();
    const auto now = std::chrono::steady_clock::now();
    if (now - lastPeerCheck_ > std::chrono::milliseconds(200)) {
      std::string trouble = peerTrouble();
      // a peer's trouble comes after everything it did post: look once more before giving up
      if (!trouble.empty()) {
        if (ready()) return;
        call_->fail(trouble);
      }
    }
    if (call_->expired(now)) {
      const std::string culprit = heldUpBy(peer);
      call_->fail(call_->timedOut(culprit.empty() ? blame() : culprit));
    }
    if (oversubscribed_ && yields_ && now - start < kYieldFor) {
      sched_yield();
      continue;
    }
    if (polls && now - start < pollFor) {
      for (int i = 0; i < kPollSpins && !ready(); ++i) cpuRelax();
      sched_yield();  // where another process holds the other core, lets the peer run here
      continue;
    }
    if (polls && !slept && !probe) {
      pollFor_ = std::max(std::min(spin_, kPollFloor), pollFor_ / 2);
    }
    slept = true;
    const uint32_t seen = bell.count.load(std::memory_order_acquire);
    bell.sleeping.store(1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (!ready()) futexWait(&bell.count, seen, kNapNs);
    bell.sleeping.store(0, std::memory_order_relaxed);
  }
}

}  // namespace dpcore
