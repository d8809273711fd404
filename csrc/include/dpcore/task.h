// One collective as one rank asked for it. dpcore/comm/ has checked the arguments; every
// transport and algorithm reads this and nothing else of the call.
#pragma once

#include <cstddef>
#include <cstdint>

#include "dpcore/types.h"

namespace dpcore {

struct Task {
  Coll coll = Coll::kBarrier;
  DType dtype = DType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
  Algo algo = Algo::kOneShot;
  const void* in = nullptr;
  void* out = nullptr;
  // Elements of in and of out. They differ where shards do: all_gather and gather take this
  // rank's shard (total: the output, gather's 0 off the root), scatter gives it (count: the
  // root's input, 0 elsewhere), all_to_all may receive other than it sends; count == total
  // otherwise.
  size_t count = 0;
  size_t total = 0;
  // avg divides by this where a chunk's reduction completes; 0: by the communicator's size. The
  // between-node all_reduce sets the world's size for its step across nodes.
  int avgDivisor = 0;
  // Device buffers: the caller's stream as it stood when the call was made (a mark the device
  // recorded on the caller's thread, cuda/device.h), whose work the call follows.
  uint64_t ready = 0;
  // all_to_all: every rank's splits, n x n row-major: splits[p * n + q] elements go from rank p
  // to rank q (dpcore/comm/ has exchanged them and checked that the ranks agree); nullptr: count
  // / n each way.
  const uint64_t* splits = nullptr;
  // The communicator's number for this call, counted across its host and device backends in
  // the order the caller issued them (core/backend.h: CallOrder), for messages and for telling
  // a peer that made this call on the other side; 0: the transport's own count.
  uint64_t number = 0;
};

// A task from the bindings' codes and pointers (dpcore/comm/ has checked them).
inline Task taskOf(int coll, int dtype, int op, int root, int algo, const void* in, void* out,
                   size_t count, size_t total, uint64_t ready = 0) {
  Task t;
  t.coll = static_cast<Coll>(coll);
  t.dtype = static_cast<DType>(dtype);
  t.op = static_cast<ReduceOp>(op);
  t.root = root;
  t.algo = static_cast<Algo>(algo);
  t.in = in;
  t.out = out;
  t.count = count;
  t.total = total;
  t.ready = ready;
  return t;
}

// What the last reduction of a chunk divides by (0: nothing), among n ranks.
DP_HOST_DEVICE inline int avgDivisor(const Task& task, int n) {
  if (task.op != ReduceOp::kAvg) return 0;
  return task.avgDivisor > 0 ? task.avgDivisor : n;
}

}  // namespace dpcore
