// One shot, for small messages: every rank has published its whole input (its payload), and each
// reads what it needs straight out of all of them, in rank order, so every rank computes
// identical bits.
//
//   all_reduce: reduce the n payloads.      reduce_scatter: chunk r of each payload.
//   all_gather: every rank's shard.         broadcast: the root's payload (the only one).
//   reduce: the root reduces the n payloads; only it reads them (readsPayloads).
//   One step: one latency, where the ring takes 2(n-1), but every rank reads n-1 payloads.
//
// Payloads, the memory interface it needs:
//   payload(r)                rank r's published input, readable here
//   reduceMany(...), copy()   the loops of the memory's device (host/reduce.h: HostLoops)
#pragma once

#include <cstddef>
#include <vector>

#include "dpcore/chunks.h"
#include "dpcore/task.h"

namespace dpcore {

// offsets: all_gather's shards, offsets[r] .. offsets[r + 1] of the output.
template <class Payloads>
void oneShot(Payloads& peers, const Task& task, int rank, int n, const size_t* offsets) {
  const size_t elem = dtypeSize(task.dtype);
  char* out = static_cast<char*>(task.out);
  std::vector<const void*> inputs(n);
  switch (task.coll) {
    case Coll::kAllReduce:
      for (int r = 0; r < n; ++r) inputs[r] = peers.payload(r);
      peers.reduceMany(task.dtype, task.op, inputs.data(), n, out, task.count,
                       avgDivisor(task, n));
      break;
    case Coll::kReduceScatter: {
      Range mine = shardRange(task.count, n, rank);
      for (int r = 0; r < n; ++r) inputs[r] = peers.payload(r) + mine.start * elem;
      peers.reduceMany(task.dtype, task.op, inputs.data(), n, out, mine.size(),
                       avgDivisor(task, n));
      break;
    }
    case Coll::kAllGather:
      for (int r = 0; r < n; ++r) {
        char* dst = out + offsets[r] * elem;
        const size_t bytes = (offsets[r + 1] - offsets[r]) * elem;
        const void* src = r == rank ? task.in : peers.payload(r);
        if (bytes && src != dst) peers.copy(dst, src, bytes);
      }
      break;
    case Coll::kBroadcast:
      if (rank != task.root && task.count) {
        peers.copy(out, peers.payload(task.root), task.count * elem);
      }
      break;
    case Coll::kReduce:
      if (rank != task.root) break;
      for (int r = 0; r < n; ++r) inputs[r] = peers.payload(r);
      peers.reduceMany(task.dtype, task.op, inputs.data(), n, out, task.count,
                       avgDivisor(task, n));
      break;
    case Coll::kBarrier:
    case Coll::kGather: case Coll::kScatter: case Coll::kAllToAll:  // algo/exchange.h runs them
      break;
  }
}

// Whether rank r publishes a payload for this call: everyone but a broadcast's receivers.
inline bool publishesPayload(const Task& task, int r) {
  return task.coll != Coll::kBarrier && (task.coll != Coll::kBroadcast || task.root == r);
}

// Whether rank r reads the payloads: every rank but a reduce's non-roots (a transport that sends
// payloads, as MPI's, sends them only there).
inline bool readsPayloads(const Task& task, int r) {
  return task.coll != Coll::kReduce || task.root == r;
}

}  // namespace dpcore
