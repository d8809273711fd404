// The in-order worker (worker.h): Jobs, the queue, and the background thread that runs it.
#include "core/worker.h"

#include <chrono>

#include "dpcore/limits.h"

namespace dpcore {

namespace {
thread_local bool workerThread = false;
}  // namespace

bool onWorkerThread() { return workerThread; }

void Job::execute() {
  try {
    fn_();
  } catch (...) {
    error_ = std::current_exception();
  }
  std::lock_guard<std::mutex> lock(mu_);
  done_ = true;
  cv_.notify_all();
}

bool Job::done() {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

bool Job::failed() {
  std::lock_guard<std::mutex> lock(mu_);
  return done_ && error_ != nullptr;
}

bool Job::waitFor(double seconds) {
  std::unique_lock<std::mutex> lock(mu_);
  if (seconds < 0 || !(seconds < kForeverSeconds)) {
    cv_.wait(lock, [&] { return done_; });
    return true;
  }
  return cv_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return done_; });
}

void Job::rethrow() {
  if (error_) std::rethrow_exception(error_);
}

Worker::~Worker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<Job> Worker::submit(std::function<void()> fn) {
  auto job = std::make_shared<Job>(std::move(fn));
  if (!threaded_) {
    job->execute();
    return job;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  queue_.push_back(job);
  cv_.notify_all();
  return job;
}

void Worker::runNow(const std::function<void()>& fn) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!busy_ && queue_.empty()) {
    busy_ = true;
    lock.unlock();
    try {
      fn();
    } catch (...) {
      release();
      throw;
    }
    release();
    return;
  }
  lock.unlock();
  auto job = submit(fn);
  job->waitFor(-1);
  job->rethrow();
}

void Worker::drain() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !busy_ && queue_.empty(); });
}

void Worker::release() {
  std::lock_guard<std::mutex> lock(mu_);
  busy_ = false;
  cv_.notify_all();
}

void Worker::loop() {
  workerThread = true;
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return (stop_ && queue_.empty()) || (!busy_ && !queue_.empty()); });
      if (queue_.empty()) return;  // stopping
      job = queue_.front();
      queue_.pop_front();
      busy_ = true;
    }
    job->execute();
    release();
  }
}

}  // namespace dpcore
