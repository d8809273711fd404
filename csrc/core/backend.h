// What dpcore/comm/ holds for a communicator, whatever its transport: the raw calls of the
// Backend protocol (dpcore/comm/backend.py). Queued<Engine> runs an engine's collectives in issue
// order on the caller's thread or a background one (worker.h); the engines (core/contracts.h:
// Engine) are Collectives<T> of each transport, and Hierarchical.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/contracts.h"
#include "core/trace.h"
#include "core/worker.h"
#include "dpcore/task.h"

namespace dpcore {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual void run(const Task& task) = 0;                   // blocking
  virtual std::shared_ptr<Job> submit(const Task& task) = 0;  // async
  virtual std::vector<size_t> exchangeCounts(DType dtype, size_t mine) = 0;
  virtual void drain() = 0;  // until every queued collective is done
  // After the queued collectives: this rank makes no more calls (why: "closed its
  // communicator"); peers waiting for one fail at once with why, instead of at their timeout.
  virtual void leave(const std::string& why) = 0;
  // This rank failed outside a collective (in comm.alloc) because of `news`, "rank 1 (pid 7)
  // died": the communicator refuses further calls, and the peers hear the news as it is.
  virtual void passOn(const std::string& news) = 0;
  virtual uint64_t sequence() = 0;
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
    worker_.runNow([&] { engine_.run(task); });
  }
  std::shared_ptr<Job> submit(const Task& task) override {
    return worker_.submit([this, task] { engine_.run(task); });
  }
  std::vector<size_t> exchangeCounts(DType dtype, size_t mine) override {
    std::vector<size_t> counts;
    worker_.runNow([&] { counts = engine_.exchangeCounts(dtype, mine); });
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
  std::vector<uint64_t> algoCalls() override {
    worker_.drain();
    return engine_.algoCalls();
  }
  Tracer& tracer() override { return engine_.tracer(); }
  void setTimeout(double seconds) override { engine_.setTimeout(seconds); }
  Engine& engine() { return engine_; }

 private:
  Engine engine_;
  Worker worker_;  // declared last, so it is joined before the engine it runs goes
};

}  // namespace dpcore
