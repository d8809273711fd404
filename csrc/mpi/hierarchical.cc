// Shared memory inside the nodes, MPI between them (hierarchical.h): the call matched on the
// world, then the all_reduce's three steps, and a failure told to every step's peers.
#include "mpi/hierarchical.h"

#include <cstring>

#include "core/contracts.h"

namespace dpcore {

// Not a transport: an engine of two (shared memory inside a node, MPI across), as Collectives<T>
// is an engine of one.
static_assert(contract::isEngine<Hierarchical>());

namespace {

// "dpcore all_reduce #3 on rank 0: inside the node: dpcore reduce_scatter #5 on rank 0: rank 1
// (pid 7) died" -> "rank 1 (pid 7) died": what a failure is, without where it passed.
std::string rootCause(std::string what) {
  for (bool stripped = true; stripped;) {
    stripped = false;
    for (const char* lead : {"inside the node: ", "between the nodes: ", "aborted: "}) {
      if (what.rfind(lead, 0) == 0) {
        what.erase(0, std::strlen(lead));
        stripped = true;
      }
    }
    const size_t on = what.find(" on rank ");
    const size_t colon = what.find(": ", on == std::string::npos ? 0 : on);
    if (what.rfind("dpcore ", 0) == 0 && on != std::string::npos && colon != std::string::npos) {
      what.erase(0, colon + 2);
      stripped = true;
    }
  }
  return what;
}

}  // namespace

Hierarchical::Hierarchical(double timeout, const std::string& name, bool create, int localRank,
                           const ShmConfig& node, double spinUs, MpiEndpoint world,
                           std::unique_ptr<MpiEndpoint> cross, size_t mpiSlots,
                           size_t mpiSegmentBytes)
    : world_(true, timeout, std::move(world), mpiSlots, mpiSegmentBytes),
      node_(true, timeout, name, create, localRank, node, spinUs), nodeSize_(node.size) {
  if (cross) {
    cross_ = std::make_unique<Collectives<MpiTransport>>(true, timeout, *cross, mpiSlots,
                                                         mpiSegmentBytes);
  }
}

void Hierarchical::setTimeout(double seconds) {
  world_.setTimeout(seconds);
  node_.setTimeout(seconds);
  if (cross_) cross_->setTimeout(seconds);
}

void Hierarchical::leave(const std::string& why) {
  world_.leave(why);
  node_.leave(why);
  if (cross_) cross_->leave(why);
}

void Hierarchical::passOn(const std::string& news) {
  broken_.set(news);
  world_.passOn(news);
  node_.passOn(news);
  if (cross_) cross_->passOn(news);
}

std::vector<CollHeader> Hierarchical::run(const Task& task) {
  broken_.check();
  if (!cross_ || task.coll != Coll::kAllReduce) return world_.run(task);
  std::vector<CollHeader> headers = world_.match(task);
  try {
    allReduce(task);
  } catch (const std::exception& e) {
    // The failed step told its own peers; the ranks waiting in the other steps hear it too,
    // naming where it began.
    broken_.set(e.what());
    node_.transport().abort(e.what());
    world_.transport().passOn(rootCause(e.what()));
    cross_->transport().passOn(rootCause(e.what()));
    throw;
  }
  return headers;
}

void Hierarchical::allReduce(const Task& task) {
  const size_t elem = dtypeSize(task.dtype);
  const Range shard = shardRange(task.count, nodeSize_, node_.transport().rank());
  char* mine = static_cast<char*>(task.out) + shard.start * elem;
  Task rs = task;  // inside the node, avg is a sum: the division happens once, across nodes
  rs.coll = Coll::kReduceScatter;
  rs.op = task.op == ReduceOp::kAvg ? ReduceOp::kSum : task.op;
  rs.out = mine;
  step("inside the node", node_, rs);
  Task ar = task;
  ar.in = ar.out = mine;
  ar.count = ar.total = shard.size();
  ar.avgDivisor = world_.transport().size();
  step("between the nodes", *cross_, ar);
  Task ag = task;
  ag.coll = Coll::kAllGather;
  ag.op = ReduceOp::kSum;
  ag.in = mine;
  ag.count = shard.size();
  step("inside the node", node_, ag);
}

// A failed step names the collective the user called, then the step's own error.
template <class Transport>
void Hierarchical::step(const char* where, Collectives<Transport>& on, const Task& task) {
  try {
    on.run(task);
  } catch (const CommError& e) {
    world_.current().fail(std::string(where) + ": " + e.what());
  }
}

}  // namespace dpcore
