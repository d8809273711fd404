// Ranks on several nodes (or DPCORE_NODE_SIZE virtual nodes): shared memory inside each node,
// MPI between them.
//
// all_reduce, N nodes of L ranks each, S bytes (local rank l, shard l = shardRange(count, L, l)):
//   0. match the call on the whole world     a mismatch fails every rank at once
//   1. node reduce-scatter                    local rank l holds its node's reduction of shard l
//   2. cross all-reduce of shard l            among the N ranks with local rank l, one per node
//   3. node all-gather                        every rank gets every shard
// Between nodes each rank sends 2(N-1)/N * S/L bytes, a node 2(N-1)/N * S: about what the one
// node-crossing link of a flat ring carries, but in 2(N-1) steps instead of 2(NL-1), with the L
// ranks of a node sending at once. Every chunk is finished by one rank and then only copied, so
// every rank gets identical bits. avg sums inside the node and divides once, where the cross
// all-reduce finishes a chunk, by N*L.
//
// Nodes that differ in size run the flat algorithms over MPI on all ranks, as do the other
// collectives: correct, but not node-aware (every byte crosses MPI, also inside a node).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/collectives.h"
#include "cpu/shm_transport.h"
#include "mpi/mpi_transport.h"

namespace dpcore {

class Hierarchical {
 public:
  // The node's segment (and spinUs) as ShmTransport takes them; world and cross as MpiTransport
  // takes them (cross: the communicator of this rank's local rank across the nodes, or null
  // where the path is flat: nodes differ in size, one rank per node, one node).
  Hierarchical(double timeout, const std::string& name, bool create, int localRank,
               const ShmConfig& node, double spinUs, MpiEndpoint world,
               std::unique_ptr<MpiEndpoint> cross, size_t mpiSlots, size_t mpiSegmentBytes);

  std::vector<CollHeader> run(const Task& task);
  void validate(const Task& task) const { world_.validate(task); }
  std::vector<size_t> exchangeCounts(const Task& task) {
    broken_.check();
    return world_.exchangeCounts(task);
  }
  uint64_t sequence() const { return world_.sequence(); }
  std::vector<uint64_t> algoCalls() const { return world_.algoCalls(); }
  Tracer& tracer() { return world_.tracer(); }
  void setTimeout(double seconds);
  void leave(const std::string& why);
  void passOn(const std::string& news);

  ShmTransport& node() { return node_.transport(); }
  bool hierarchical() const { return cross_ != nullptr; }
  uint64_t nodeSequence() const { return node_.sequence(); }

 private:
  void allReduce(const Task& task);
  template <class Transport>
  void step(const char* where, Collectives<Transport>& on, const Task& task);

  Collectives<MpiTransport> world_;
  Collectives<ShmTransport> node_;
  std::unique_ptr<Collectives<MpiTransport>> cross_;
  int nodeSize_;
  Broken broken_;  // by a failure inside the node or across the nodes
};

}  // namespace dpcore
