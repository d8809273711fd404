// One collective as one rank asked for it. dpcore/comm/ has checked the arguments; every
// transport and algorithm reads this and nothing else of the call.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "dpcore/types.h"

namespace dpcore {

// scatter's root with x given as a list (torch's scatter_list, mpi4py's list): one array per
// rank, each of `elems` elements, at[q] rank q's shard. The input is still read flat, the pieces
// back to back in rank order, so every algorithm sees one layout (inputAt, copyInput); only
// their addresses differ from one array's. No piece is copied together first.
struct Pieces {
  const void* const* at = nullptr;  // nullptr: the input is Task::in, one array
  size_t elems = 0;
};

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
  // scatter's root: its x as one array per rank (in is then the first); every rank's header
  // says so, and each rank's out must hold one piece (core/call.cc).
  Pieces pieces;
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

// Where byte `at` of the input, read flat, lies. In pieces, a range from `at` lies in one piece
// where it lies inside one rank's shard, as every transfer of a scatter does.
inline const char* inputAt(const Task& task, size_t at) {
  if (!task.pieces.at) return static_cast<const char*>(task.in) + at;
  const size_t bytes = task.pieces.elems * dtypeSize(task.dtype);
  return static_cast<const char*>(task.pieces.at[at / bytes]) + at % bytes;
}

// visit(done, len) over the bytes [at, at + bytes) of pieces of pieceBytes each, read flat: a
// run of len bytes from at + done that lies in one piece, for each piece the range spans.
template <class Visit>
void forEachPieceRun(size_t pieceBytes, size_t at, size_t bytes, Visit visit) {
  for (size_t done = 0; done < bytes;) {
    const size_t len = std::min(bytes - done, pieceBytes - (at + done) % pieceBytes);
    visit(done, len);
    done += len;
  }
}

// copy(dst, src, n) over the input's bytes [at, at + bytes), read flat: one copy, or one per
// piece it spans; memcpy where no copy is given.
template <class Copy>
void copyInput(const Task& task, size_t at, size_t bytes, char* dst, Copy copy) {
  if (!task.pieces.at) {
    if (bytes) copy(dst, inputAt(task, at), bytes);
    return;
  }
  forEachPieceRun(task.pieces.elems * dtypeSize(task.dtype), at, bytes,
                  [&](size_t done, size_t len) {
                    copy(dst + done, inputAt(task, at + done), len);
                  });
}
inline void copyInput(const Task& task, size_t at, size_t bytes, char* dst) {
  copyInput(task, at, bytes, dst, [](char* to, const char* from, size_t n) {
    std::memcpy(to, from, n);
  });
}

// What the last reduction of a chunk divides by (0: nothing), among n ranks.
DP_HOST_DEVICE inline int avgDivisor(const Task& task, int n) {
  if (task.op != ReduceOp::kAvg) return 0;
  return task.avgDivisor > 0 ? task.avgDivisor : n;
}

}  // namespace dpcore
