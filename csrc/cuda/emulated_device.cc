// The CPU emulation of a device (cuda/device.h), for CI, which has no GPU: memory the peers map
// is a shared-memory segment (its name is the IPC handle), and a kernel is `blocks` x `threads`
// threads running the very kernel body nvcc compiles (cuda/reduce_copy.h), one pool of them per
// device, started once. As on the GPU, the host learns that a kernel finished only from the
// store its last block publishes (device_layer.h's signalDone; the pool's own bookkeeping is
// seen only at the next launch, as stream order), so ThreadSanitizer checks the synchronisation
// the GPU relies on.
//
// And as on the GPU, nothing happens when it is asked for: kernels, fills, events and waits for
// a caller's stream or a peer's event go to the device's stream (emulated_stream.h), which runs
// them in order after seeded random delays; fresh memory holds garbage until its queued
// zero-fill lands; and the memory is truncated when its owner exits, so a peer that still reads
// it faults. An interprocess event is two words in a shared segment: how often its owner's host
// recorded it, and how many of those records its stream has reached; a peer's stream, at an
// await, waits until the second reaches what the first said when the await was queued.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "cpu/shm_segment.h"
#include "cuda/device.h"
#include "cuda/emulated_memory.h"
#include "cuda/emulated_stream.h"

namespace dpcore {
namespace {

// blocks x threads std::threads that run one kernel at a time, in launch order.
class ThreadGrid {
 public:
  using Body = std::function<void(const KernelThread&)>;

  ThreadGrid(unsigned blocks, unsigned threads)
      : blocks_(blocks), threads_(threads), finished_(blocks * threads) {
    for (unsigned b = 0; b < blocks; ++b) {
      barriers_.push_back(std::make_unique<BlockBarrier>(threads));
    }
    for (unsigned b = 0; b < blocks; ++b) {
      for (unsigned t = 0; t < threads; ++t) {
        pool_.emplace_back([this, me = KernelThread{t, threads, b, blocks, barriers_[b].get()}] {
          serve(me);
        });
      }
    }
  }
  ~ThreadGrid() {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      stop_ = true;
    }
    start_.notify_all();
    for (auto& t : pool_) t.join();
  }

  // Runs body on every thread of the grid, once the previous kernel has ended everywhere.
  void launch(Body body) {
    std::unique_lock<std::mutex> lock(mutex_);
    ended_.wait(lock, [&] { return finished_ == pool_.size(); });
    body_ = std::move(body);
    finished_ = 0;
    ++generation_;
    start_.notify_all();
  }

  // Runs body as launch does, and returns once every thread has ended it.
  void run(Body body) {
    launch(std::move(body));
    std::unique_lock<std::mutex> lock(mutex_);
    ended_.wait(lock, [&] { return finished_ == pool_.size(); });
  }

 private:
  void serve(const KernelThread& me) {
    uint64_t seen = 0;
    for (;;) {
      Body body;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        start_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        body = body_;
      }
      body(me);
      std::unique_lock<std::mutex> lock(mutex_);
      if (++finished_ == pool_.size()) ended_.notify_all();
    }
  }

  unsigned blocks_, threads_;
  std::vector<std::unique_ptr<BlockBarrier>> barriers_;
  std::mutex mutex_;
  std::condition_variable start_, ended_;
  Body body_;
  uint64_t generation_ = 0;
  size_t finished_;  // threads done with the current kernel: all of them before the first
  bool stop_ = false;
  std::vector<std::thread> pool_;  // last: started once the rest exists
};

class EmulatedDevice : public Device {
 public:
  EmulatedDevice(unsigned blocks, unsigned threads)
      : grid_(checked(blocks, threads), threads), stream_(std::make_unique<EmulatedStream>(2)) {}
  ~EmulatedDevice() override {
    abandoned_.store(true);  // nothing more is recorded: an await still queued would never end
    stream_.reset();         // its queued work ends before the memory goes
    for (int fd : fds_) exitUnmap(fd);
    for (void* base : imported_) emulated::closeImport(base);
  }

  std::string name() const override { return "emulated"; }

  void* allocShared(size_t bytes, IpcHandle* handle) override {
    static std::atomic<unsigned> made{0};
    // named as dpcore/setup/segments.py names segments, so its clean-up after a crash finds them
    const std::string name = "/dpcore-" + std::to_string(getpid()) + "-emulated-" +
                             std::to_string(made++);
    if (name.size() >= sizeof(handle->bytes)) throw std::length_error("dpcore: handle too long");
    auto segment = std::make_unique<ShmSegment>(name, bytes, true);
    const int fd = shm_open(name.c_str(), O_RDWR, 0600);  // kept, to truncate at our exit
    if (fd < 0) throw std::runtime_error("dpcore: cannot reopen " + name);
    owned_.push_back(std::move(segment));
    fds_.push_back(fd);
    unmapAtExit(fd);
    std::memset(handle->bytes, 0, sizeof(handle->bytes));
    std::memcpy(handle->bytes, name.data(), name.size());
    // cudaMalloc's memory holds what it held; cudaMemset's zeros land later, on the stream
    char* p = owned_.back()->data();
    std::memset(p, kGarbage, bytes);
    stream_->wait(stream_->enqueue([p, bytes] { std::memset(p, 0, bytes); }));
    return p;
  }

  void* openShared(const IpcHandle& handle, size_t bytes) override {
    if (emulated::isHandle(handle)) {  // a peer's ordinary allocation (exportMemory)
      void* base = emulated::importMemory(handle);
      imported_.push_back(base);
      return base;
    }
    const std::string name(handle.bytes, strnlen(handle.bytes, sizeof(handle.bytes)));
    opened_.push_back(std::make_unique<ShmSegment>(name, bytes, false));
    return opened_.back()->data();
  }

  void unlinkShared() override {
    for (auto& segment : owned_) segment->unlink();
    if (events_) events_->unlink();
  }

  void freeShared(void* p) override {
    stream_->wait(stream_->tail());
    for (size_t k = 0; k < owned_.size(); ++k) {
      if (owned_[k]->data() != p) continue;
      exitUnmap(fds_[k]);
      fds_.erase(fds_.begin() + k);
      owned_.erase(owned_.begin() + k);
      return;
    }
  }

  void closeShared(void* p) override {
    const auto imported = std::find(imported_.begin(), imported_.end(), p);
    if (imported != imported_.end()) {
      imported_.erase(imported);
      emulated::closeImport(p);
      return;
    }
    for (size_t k = 0; k < opened_.size(); ++k) {
      if (opened_[k]->data() == p) {
        opened_.erase(opened_.begin() + k);
        return;
      }
    }
  }

  IpcHandle exportMemory(const void* p, size_t bytes, uint64_t* offset) override {
    return emulated::exportMemory(p, bytes, offset);
  }

  bool capturing(uintptr_t stream) override { return callerStream(stream)->capturing(); }
  uint64_t mark(uintptr_t stream) override {
    auto caller = callerStream(stream);
    return marks_.add(Mark{caller, caller->tail()});
  }
  bool passed(uint64_t mark) override {
    const Mark m = marks_.get(mark);
    return m.stream->reached(m.ticket);
  }
  void follow(uint64_t mark) override {
    const Mark m = marks_.take(mark).back();
    stream_->enqueue([m] { m.stream->wait(m.ticket); });
  }

  uint64_t launch(DType dtype, ReduceOp op, ReduceCopyArgs args) override {
    args.arrivals = &arrivals_;
    args.done = &kernelsDone_;
    args.ticket = ++launched_;
    ThreadGrid::Body body;
    if (copiesOnly(args)) {  // the kernel the GPU runs for it (cuda_device.cu)
      const size_t elemSize = dtypeSize(dtype);
      body = [args, elemSize](const KernelThread& me) { copyPacked(me, args, elemSize); };
    } else {
      dispatchReduceCopy(dtype, op, [&](auto element, auto reduceOp) {
        using E = decltype(element);
        using Op = decltype(reduceOp);
        body = [args](const KernelThread& me) { reduceCopy<E, Op>(me, args); };
      });
    }
    stream_->enqueue([this, body] {
      if (!abandoned_.load()) grid_.run(body);
      std::lock_guard<std::mutex> lock(endedMutex_);  // idle() looks at done() under it
      ended_.notify_all();
    });
    return args.ticket;
  }

  bool done(uint64_t ticket) override { return acquireLoad(&kernelsDone_) >= ticket; }
  bool onHostCores() const override { return true; }
  void idle(uint64_t ticket) override {  // back within 200 us, to watch the deadline and peers
    std::unique_lock<std::mutex> lock(endedMutex_);
    ended_.wait_for(lock, std::chrono::microseconds(200), [&] { return done(ticket); });
  }

  std::string makeEvents(int count) override {
    static std::atomic<unsigned> made{0};
    const std::string name = "/dpcore-" + std::to_string(getpid()) + "-emulated-events-" +
                             std::to_string(made++);
    events_ = std::make_unique<ShmSegment>(name, count * sizeof(Event), true);  // zeros
    std::string handles(kNameBytes + sizeof(int), '\0');
    name.copy(&handles[0], kNameBytes - 1);
    std::memcpy(&handles[kNameBytes], &count, sizeof(int));
    return handles;
  }
  void openEvents(int peer, const std::string& handles) override {
    if (handles.size() != kNameBytes + sizeof(int)) {
      throw std::invalid_argument("dpcore: bad event handles");
    }
    int count = 0;
    std::memcpy(&count, &handles[kNameBytes], sizeof(int));
    peerEvents_[peer] = std::make_unique<ShmSegment>(handles.substr(0, handles.find('\0')),
                                                     count * sizeof(Event), false);
  }
  void record(int event) override {
    Event* e = eventAt(events_.get(), event);
    const uint64_t made = acquireLoad(&e->recorded) + 1;  // this host alone writes it
    releaseStore(&e->recorded, made);
    stream_->enqueue([e, made] { releaseStore(&e->reached, made); });
  }
  void await(int peer, int event) override {
    const auto it = peerEvents_.find(peer);
    if (it == peerEvents_.end()) throw std::logic_error("dpcore: a peer's events, never opened");
    Event* e = eventAt(it->second.get(), event);
    const uint64_t recorded = acquireLoad(&e->recorded);
    // the GPU holds the stream here without running anything; the emulation's stream thread
    // polls, and gives up once the device is abandoned (a peer that died never records)
    stream_->enqueue([this, e, recorded] {
      while (acquireLoad(&e->reached) < recorded && !abandoned_.load()) {
        std::this_thread::sleep_for(std::chrono::microseconds(2));
      }
    });
  }
  void abandon() override { abandoned_.store(true); }

 private:
  static constexpr int kGarbage = 0xA5;
  static constexpr size_t kNameBytes = sizeof(IpcHandle::bytes);
  struct Event {
    uint64_t recorded;  // by its owner's host: how many records were asked for
    uint64_t reached;   // by its owner's stream: how many of them it has run
  };
  static Event* eventAt(ShmSegment* events, int event) {
    if (!events || (event + 1) * sizeof(Event) > events->size()) {
      throw std::out_of_range("dpcore: no such event");
    }
    return reinterpret_cast<Event*>(events->data()) + event;
  }
  struct Mark {
    std::shared_ptr<EmulatedStream> stream;
    uint64_t ticket;  // the work queued there when the mark was made
  };

  static unsigned checked(unsigned blocks, unsigned threads) {
    if (blocks == 0 || threads == 0) {
      throw std::invalid_argument("dpcore: an emulated kernel needs at least one thread");
    }
    return blocks;
  }

  uint64_t arrivals_ = 0;     // the blocks of the running kernel that ended ("device" memory)
  std::mutex endedMutex_;          // with ended_: a kernel has ended, for idle()
  std::condition_variable ended_;
  uint64_t kernelsDone_ = 0;  // the ticket of the last kernel that ended (releaseStore)
  uint64_t launched_ = 0;     // kernels launched: the last one's ticket
  std::vector<std::unique_ptr<ShmSegment>> owned_, opened_;
  std::vector<int> fds_;     // owned_'s, one each, truncated when this device goes
  std::vector<void*> imported_;  // the peers' ordinary allocations mapped here
  Marks<Mark> marks_;
  std::unique_ptr<ShmSegment> events_;                      // this rank's events
  std::map<int, std::unique_ptr<ShmSegment>> peerEvents_;  // by peer rank
  std::atomic<bool> abandoned_{false};
  ThreadGrid grid_;          // its threads stop before the memory they may write goes
  std::unique_ptr<EmulatedStream> stream_;  // last: stops before the grid it drives
};

}  // namespace

std::unique_ptr<Device> makeEmulatedDevice(unsigned blocks, unsigned threads) {
  return std::make_unique<EmulatedDevice>(blocks, threads);
}

}  // namespace dpcore
