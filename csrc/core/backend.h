// What dpcore/comm/ holds for a communicator, whatever its transport: the raw calls of the
// Backend protocol (dpcore/comm/backend.py). Queued<Engine> runs an engine's collectives in issue
// order on the caller's thread or a background one (worker.h); the engines (core/contracts.h:
// Engine) are Collectives<T> of each transport, and Hierarchical.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/contracts.h"
#include "core/trace.h"
#include "core/worker.h"
#include "dpcore/task.h"

namespace dpcore {

// One count of a communicator's calls, shared by its host and device backends once it has both:
// each call takes its number on the caller's thread as it is issued, so every rank numbers its
// calls alike whichever backend's worker starts them first (Task::number).
class CallOrder {
 public:
  uint64_t next() { return issued_.fetch_add(1, std::memory_order_relaxed) + 1; }
  uint64_t upcoming() const { return issued_.load(std::memory_order_relaxed) + 1; }

 private:
  std::atomic<uint64_t> issued_{0};
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual void run(const Task& task) = 0;                   // blocking
  virtual std::shared_ptr<Job> submit(const Task& task) = 0;  // async
  // Every rank's count in a round of headers alone: all_gather's shards, or gather's on its root.
  virtual std::vector<size_t> exchangeCounts(Coll coll, int root, DType dtype, size_t mine) = 0;
  virtual void drain() = 0;  // until every queued collective is done
  // After the queued collectives: this rank makes no more calls (why: "closed its
  // communicator"); peers waiting for one fail at once with why, instead of at their timeout.
  virtual void leave(const std::string& why) = 0;
  // This rank failed outside a collective (in comm.alloc) because of `news`, "rank 1 (pid 7)
  // died": the communicator refuses further calls, and the peers hear the news as it is.
  virtual void passOn(const std::string& news) = 0;
  virtual uint64_t sequence() = 0;
  // From now on, number calls from `order`, as the backend of the communicator's other side
  // does (a fresh backend: before its first call).
  virtual void shareOrder(std::shared_ptr<CallOrder> order) = 0;
  virtual std::shared_ptr<CallOrder> order() = 0;
  virtual std::vector<uint64_t> algoCalls() = 0;  // by Algo, once the queue is drained
  virtual Tracer& tracer() = 0;
  virtual void setTimeout(double seconds) = 0;
};

template <class Engine>
class Queued : public Backend {
  static_assert(contract::isEngine<Engine>());

 public:
  template <class... Args>
  explicit Queued(bool threaded, Args&&... engineArgs)
      : engine_(std::forward<Args>(engineArgs)...), worker_(threaded) {}

  void run(const Task& task) override {
    const Task numbered = numberOf(task);
    worker_.runNow([&] { engine_.run(numbered); });
  }
  std::shared_ptr<Job> submit(const Task& task) override {
    return worker_.submit([this, task = numberOf(task)] { engine_.run(task); });
  }
  // gather's round takes the number of the gather that follows on its root, which the
  // non-roots meet within their one call (Collectives::run): the ranks' numbers stay alike.
  std::vector<size_t> exchangeCounts(Coll coll, int root, DType dtype, size_t mine) override {
    Task task;
    task.coll = coll;
    task.root = root;
    task.dtype = dtype;
    task.count = mine;
    task.number = coll == Coll::kGather ? order_->upcoming() : order_->next();
    std::vector<size_t> counts;
    worker_.runNow([&] { counts = engine_.exchangeCounts(task); });
    return counts;
  }
  void drain() override { worker_.drain(); }
  void leave(const std::string& why) override {
    worker_.runNow([&] { engine_.leave(why); });
  }
  void passOn(const std::string& news) override {
    worker_.runNow([&] { engine_.passOn(news); });
  }
  uint64_t sequence() override { return engine_.sequence(); }
  void shareOrder(std::shared_ptr<CallOrder> order) override { order_ = std::move(order); }
  std::shared_ptr<CallOrder> order() override { return order_; }
  std::vector<uint64_t> algoCalls() override {
    worker_.drain();
    return engine_.algoCalls();
  }
  Tracer& tracer() override { return engine_.tracer(); }
  void setTimeout(double seconds) override { engine_.setTimeout(seconds); }
  Engine& engine() { return engine_; }

 private:
  // A call refused here, on this rank alone, takes no number: the peers never see it.
  Task numberOf(Task task) {
    engine_.validate(task);
    task.number = order_->next();
    return task;
  }

  std::shared_ptr<CallOrder> order_ = std::make_shared<CallOrder>();
  Engine engine_;
  Worker worker_;  // declared last, so it is joined before the engine it runs goes
};

}  // namespace dpcore
