// The little a kernel body needs from its device, so that one source compiles twice: by nvcc
// for the GPU, and by g++ for the CPU emulation (cuda/emulated_device.cc), where every CUDA
// thread is a std::thread. The emulation is what CI runs: exhaustively, and under
// ThreadSanitizer, which sees a missing barrier or a relaxed flag that plain x86 runs forgive.
//
//   KernelThread   where this thread sits (thread and block indices) and the block's barrier
//   signalDone     the kernel's completion: its blocks counted in device memory, and the last
//                  one's system-scope release store, which the host acquires
#pragma once

#include <cstdint>

#include "dpcore/types.h"

#if defined(__CUDACC__)
#include <cuda/atomic>
#define DP_DEVICE __device__
#define DP_FORCE_INLINE __forceinline__
#define DP_UNROLL _Pragma("unroll")
#else
#include <condition_variable>
#include <mutex>
#define DP_DEVICE
#define DP_FORCE_INLINE inline __attribute__((always_inline))
#define DP_UNROLL _Pragma("GCC unroll 16")
#endif

namespace dpcore {

#if defined(__CUDACC__)

struct KernelThread {
  DP_DEVICE unsigned thread() const { return threadIdx.x; }
  DP_DEVICE unsigned threads() const { return blockDim.x; }
  DP_DEVICE unsigned block() const { return blockIdx.x; }
  DP_DEVICE unsigned blocks() const { return gridDim.x; }
  DP_DEVICE void sync() const { __syncthreads(); }
};

// Counts this block in a counter in device memory; returns the count before it. acq_rel: the
// block that arrives last has seen every earlier block's writes (a device-scope atomic in
// device memory, which CUDA guarantees everywhere, unlike atomics on host memory over PCIe).
DP_DEVICE inline uint64_t arrive(uint64_t* counter) {
  return cuda::atomic_ref<uint64_t, cuda::thread_scope_device>(*counter).fetch_add(
      1, cuda::memory_order_acq_rel);
}
DP_DEVICE inline void resetArrivals(uint64_t* counter) {
  cuda::atomic_ref<uint64_t, cuda::thread_scope_device>(*counter).store(
      0, cuda::memory_order_relaxed);
}
// Stores value into memory the host maps (a plain store, no read-modify-write over PCIe):
// everything this thread has seen is visible to whoever reads value with acquire.
DP_DEVICE inline void releaseStore(uint64_t* word, uint64_t value) {
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*word).store(
      value, cuda::memory_order_release);
}

#else

// A reusable barrier for the threads of one emulated block (C++17 has no std::barrier).
class BlockBarrier {
 public:
  explicit BlockBarrier(unsigned threads) : threads_(threads) {}
  void arriveAndWait() {
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t phase = phase_;
    if (++arrived_ == threads_) {
      arrived_ = 0;
      ++phase_;
      all_.notify_all();
      return;
    }
    all_.wait(lock, [&] { return phase_ != phase; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable all_;
  unsigned threads_;
  unsigned arrived_ = 0;
  uint64_t phase_ = 0;
};

struct KernelThread {
  unsigned threadIdx, blockDim, blockIdx, gridDim;
  BlockBarrier* barrier;
  unsigned thread() const { return threadIdx; }
  unsigned threads() const { return blockDim; }
  unsigned block() const { return blockIdx; }
  unsigned blocks() const { return gridDim; }
  void sync() const { barrier->arriveAndWait(); }
};

inline uint64_t arrive(uint64_t* counter) {
  return __atomic_fetch_add(counter, 1, __ATOMIC_ACQ_REL);
}
inline void resetArrivals(uint64_t* counter) { __atomic_store_n(counter, 0, __ATOMIC_RELAXED); }
inline void releaseStore(uint64_t* word, uint64_t value) {
  __atomic_store_n(word, value, __ATOMIC_RELEASE);
}

#endif

// The host's side of releaseStore.
inline uint64_t acquireLoad(const uint64_t* counter) {
  return __atomic_load_n(counter, __ATOMIC_ACQUIRE);
}

// The end of every kernel: once all threads of the block have stored their part (without the
// barrier, thread 0 could count the block while its neighbours still write), one of them counts
// the block; the last block resets the count for the next kernel (which the stream starts only
// after this one) and publishes the kernel's ticket to the host, once.
template <class Thread>
DP_DEVICE DP_FORCE_INLINE void signalDone(const Thread& t, uint64_t* arrivals, uint64_t* done,
                                          uint64_t ticket) {
  t.sync();
  if (t.thread() != 0 || !done) return;
  if (arrive(arrivals) + 1 == t.blocks()) {
    resetArrivals(arrivals);
    releaseStore(done, ticket);
  }
}

}  // namespace dpcore
