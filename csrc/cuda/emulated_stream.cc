// The emulation's streams and memory that dies with its process (emulated_stream.h).
#include "cuda/emulated_stream.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>

namespace dpcore {
namespace {

uint64_t envNumber(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

// DPCORE_EMULATION_DELAY_US: "HI" or "LO-HI"; by default up to 50 us, which keeps the suite
// fast and still reorders whatever is left unordered.
std::pair<uint32_t, uint32_t> delayRange() {
  const char* v = std::getenv("DPCORE_EMULATION_DELAY_US");
  if (!v || !*v) return {0, 50};
  char* end = nullptr;
  const auto first = static_cast<uint32_t>(std::strtoul(v, &end, 10));
  if (end && *end == '-') return {first, static_cast<uint32_t>(std::strtoul(end + 1, nullptr, 10))};
  return {0, first};
}

}  // namespace

EmulatedStream::EmulatedStream(uint64_t salt)
    : rng_(envNumber("DPCORE_EMULATION_SEED", 0) * 0x9E3779B97F4A7C15ull + salt) {
  std::tie(lo_, hi_) = delayRange();
  if (hi_ < lo_) hi_ = lo_;
  thread_ = std::thread([this] { serve(); });
}

EmulatedStream::~EmulatedStream() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  queued_.notify_all();
  thread_.join();
}

uint64_t EmulatedStream::enqueue(std::function<void()> work) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint32_t delay = hi_ ? std::uniform_int_distribution<uint32_t>(lo_, hi_)(rng_) : 0;
  work_.emplace_back(delay, std::move(work));
  queued_.notify_all();
  return ++tickets_;
}

uint64_t EmulatedStream::tail() {
  std::lock_guard<std::mutex> lock(mutex_);
  return tickets_;
}

bool EmulatedStream::reached(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mutex_);
  return finished_ >= ticket;
}

void EmulatedStream::wait(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(mutex_);
  ended_.wait(lock, [&] { return finished_ >= ticket; });
}

void EmulatedStream::serve() {
  for (;;) {
    std::pair<uint32_t, std::function<void()>> next;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      queued_.wait(lock, [&] { return stop_ || !work_.empty(); });
      if (work_.empty()) return;  // stopped, and everything queued has run
      next = std::move(work_.front());
      work_.pop_front();
    }
    if (next.first) std::this_thread::sleep_for(std::chrono::microseconds(next.first));
    next.second();
    std::lock_guard<std::mutex> lock(mutex_);
    ++finished_;
    ended_.notify_all();
  }
}

std::shared_ptr<EmulatedStream> callerStream(uintptr_t handle) {
  if (handle == 0 || handle == 1) {
    static std::mutex mutex;
    static std::shared_ptr<EmulatedStream> legacy;  // made at first use; lives to the exit
    std::lock_guard<std::mutex> lock(mutex);
    if (!legacy) legacy = std::make_shared<EmulatedStream>(1);
    return legacy;
  }
  if (handle == 2) {
    static std::atomic<uint64_t> threads{0};
    thread_local std::shared_ptr<EmulatedStream> perThread;
    if (!perThread) perThread = std::make_shared<EmulatedStream>(1000 + threads++);
    return perThread;
  }
  throw std::invalid_argument("dpcore: the CUDA emulation knows streams 0 and 1 (the legacy "
                              "default) and 2 (the per-thread default), not " +
                              std::to_string(handle));
}

namespace {

std::mutex& exitMutex() {
  static std::mutex m;
  return m;
}
std::set<int>& exitFds() {
  static auto* fds = new std::set<int>;  // never destroyed: read by the exit handler
  return *fds;
}

void unmapAll() {
  std::lock_guard<std::mutex> lock(exitMutex());
  for (int fd : exitFds()) {
    if (ftruncate(fd, 0) != 0) {}  // nothing to do about it at exit
    close(fd);
  }
  exitFds().clear();
}

}  // namespace

void unmapAtExit(int fd) {
  static const bool registered = std::atexit(unmapAll) == 0;
  (void)registered;
  std::lock_guard<std::mutex> lock(exitMutex());
  exitFds().insert(fd);
}

void exitUnmap(int fd) {
  std::lock_guard<std::mutex> lock(exitMutex());
  if (exitFds().erase(fd)) {
    if (ftruncate(fd, 0) != 0) {}  // the segment goes with our mapping anyway
    close(fd);
  }
}

}  // namespace dpcore
