// The emulation's streams (cuda/emulated_device.cc): what makes the CPU stand-in asynchronous as
// a GPU is, so that it can fail what a GPU would. A stream is a queue of work run in order by a
// thread of its own, each item after a random delay drawn from a seeded generator, so a test
// that forgets to order its work on a stream sees stale data, as it would on the GPU, and sees
// it again under the same seed (DPCORE_EMULATION_SEED). The delays:
// DPCORE_EMULATION_DELAY_US=HI (uniform in 0..HI microseconds) or LO-HI; 0 turns them off.
//
// The caller's streams, as the emulated arrays (dpcore/emulated.py) name them: 0 and 1, the
// legacy default stream, one per process; 2, the per-thread default stream, one per thread, as
// CUDA's cudaStreamPerThread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

namespace dpcore {

class EmulatedStream {
 public:
  explicit EmulatedStream(uint64_t salt);  // salt: which stream, mixed into the seed
  ~EmulatedStream();                       // runs what is queued, then stops
  EmulatedStream(const EmulatedStream&) = delete;
  EmulatedStream& operator=(const EmulatedStream&) = delete;

  // Queues work after everything queued before it; returns its ticket (1, 2, ...).
  uint64_t enqueue(std::function<void()> work);
  uint64_t tail();                 // the ticket of the last work queued (0: none yet)
  bool reached(uint64_t ticket);   // that work has ended (and every earlier one)
  void wait(uint64_t ticket);      // until it has
  // Whether it is capturing a CUDA graph, as a test says (emulated_capture): the emulation
  // captures nothing, it only answers cudaStreamIsCapturing.
  bool capturing() const { return capturing_.load(); }
  void setCapturing(bool on) { capturing_.store(on); }

 private:
  void serve();

  std::mutex mutex_;
  std::condition_variable queued_, ended_;
  std::deque<std::pair<uint32_t, std::function<void()>>> work_;  // (delay in us, work)
  uint64_t tickets_ = 0, finished_ = 0;
  bool stop_ = false;
  std::mt19937_64 rng_;
  uint32_t lo_, hi_;
  std::atomic<bool> capturing_{false};
  std::thread thread_;  // last: started once the rest exists
};

// The caller's stream that `handle` names on this thread (see above); throws for other handles.
std::shared_ptr<EmulatedStream> callerStream(uintptr_t handle);

// Memory whose owner exits becomes unreadable to the peers that map it, as a GPU's does: a
// shared segment's descriptor, truncated to nothing at exitUnmap or, for those left, at process
// exit, so a peer's read past that faults (SIGBUS) instead of finding stale data.
void unmapAtExit(int fd);
void exitUnmap(int fd);

}  // namespace dpcore
