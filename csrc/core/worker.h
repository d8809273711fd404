// Runs a communicator's collectives one at a time, in the order they were issued, whatever its
// transport. Async calls queue a Job for a background thread, so they progress while the caller
// computes; a blocking call runs on the caller's thread when nothing is queued (no hand-off,
// lowest latency) and otherwise waits its turn behind the queue.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace dpcore {

class Job {
 public:
  explicit Job(std::function<void()> fn) : fn_(std::move(fn)) {}
  void execute();
  bool done();
  bool failed();                 // done, with an error
  bool waitFor(double seconds);  // negative or inf: no limit; false when time ran out
  void rethrow();                // the collective's error, if it failed

 private:
  std::function<void()> fn_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

// Whether this thread is a Worker's background thread, which runs async calls while the thread
// that queued them computes: a wait there should leave the core to that computation.
bool onWorkerThread();

class Worker {
 public:
  // threaded=false runs async calls at once on the caller's thread: for an MPI that may be
  // called from one thread only (not MPI_THREAD_MULTIPLE).
  explicit Worker(bool threaded = true) : threaded_(threaded) {}
  ~Worker();
  std::shared_ptr<Job> submit(std::function<void()> fn);
  void runNow(const std::function<void()>& fn);
  void drain();  // waits until the queue is empty and nothing runs

 private:
  void loop();
  void release();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool threaded_;
  bool busy_ = false;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace dpcore
