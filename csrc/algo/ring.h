// Ring collectives, written once against a transport's primitive verbs (NCCL's names, in the
// order data flows):
//   send(src)                        push a segment to the next rank
//   recv(dst)                        take a segment from the previous rank
//   recvReduceSend(src)              take, reduce with src, push on
//   recvReduceCopySend(src, dst)     take, reduce with src, keep in dst, push on
//   recvReduceCopy(src, dst)         take, reduce with src, keep in dst
//   recvCopySend(dst)                take, keep in dst, push on
//   copySend(src, dst)               keep src in dst, push on
//
// Vocabulary: a chunk is one rank's share of the buffer (ChunkLayout), a segment is the
// pipelining unit inside a chunk (one slot of the transport), a step is one hop around the ring.
// The buffer is moved in rounds: round i carries segment i of every chunk through all the
// steps, so a few slots suffice however large the buffer is.
//
//   all-reduce, n ranks, S bytes: the n-1 reduce-scatter steps, then the n-1 all-gather steps
//   (the first of them fused with the last reduction); each rank sends 2(n-1)/n * S.
//   reduce-scatter: n-1 steps, (n-1)/n * S.  all-gather: n-1 steps, (n-1)/n * S (S = output).
//   broadcast: a pipelined chain from the root, S per link.
//   reduce: a pipelined chain to the root, S per link, reduced at every hop but the first.
//
// Pointers are bytes (elemSize per element); in == out is in place. Host and device code alike:
// no allocation, no standard library on these paths.
#pragma once

#include <cstddef>

#include "dpcore/chunks.h"
#include "dpcore/task.h"

namespace dpcore {

// The reduce-scatter half of a round, up to its last step: push our data of chunk r-1 (step 0),
// then add our data to each partial sum that arrives and pass it on (steps 1 .. n-2). What
// arrives next is chunk r, which only our data is missing.
template <class Prims>
DP_HOST_DEVICE void reduceScatterSteps(Prims& p, const char* in, size_t elemSize, int rank, int n,
                                       const RoundSegments& seg) {
  Range s = seg(reduceScatterSendChunk(rank, 0, n));
  p.send(in + s.start * elemSize, s.size());
  for (int step = 1; step < n - 1; ++step) {
    s = seg(reduceScatterSendChunk(rank, step, n));
    p.recvReduceSend(in + s.start * elemSize, s.size());
  }
}

// The all-gather half of a round after its first step (which pushed chunk r on): keep each
// finished chunk that arrives and forward it (n-2 steps); chunk r+1 ends its trip here.
template <class Prims>
DP_HOST_DEVICE void allGatherSteps(Prims& p, char* out, size_t elemSize, int rank, int n,
                                   const RoundSegments& seg) {
  for (int step = 1; step < n - 1; ++step) {
    Range s = seg(allGatherRecvChunk(rank, step - 1, n));
    p.recvCopySend(out + s.start * elemSize, s.size());
  }
  Range s = seg(allGatherRecvChunk(rank, n - 2, n));
  p.recv(out + s.start * elemSize, s.size());
}

template <class Prims>
DP_HOST_DEVICE void ringAllReduce(Prims& p, const char* in, char* out, size_t count,
                                  size_t elemSize, int rank, int n, size_t segmentCount) {
  const ChunkLayout layout = ChunkLayout::even(count, n);
  const size_t rounds = numSegments(layout.maxChunk(), segmentCount);
  for (size_t round = 0; round < rounds; ++round) {
    const RoundSegments seg{layout, round, rounds};
    reduceScatterSteps(p, in, elemSize, rank, n, seg);
    // chunk r is complete here: keep it and start its trip around the ring
    Range s = seg(rank);
    p.recvReduceCopySend(in + s.start * elemSize, out + s.start * elemSize, s.size());
    allGatherSteps(p, out, elemSize, rank, n, seg);
  }
}

// out holds chunk `rank` only (shardRange(count, n, rank)); in is the whole input.
template <class Prims>
DP_HOST_DEVICE void ringReduceScatter(Prims& p, const char* in, char* out, size_t count,
                                      size_t elemSize, int rank, int n, size_t segmentCount) {
  const ChunkLayout layout = ChunkLayout::even(count, n);
  const size_t rounds = numSegments(layout.maxChunk(), segmentCount);
  const size_t outStart = layout.chunk(rank).start;
  for (size_t round = 0; round < rounds; ++round) {
    const RoundSegments seg{layout, round, rounds};
    reduceScatterSteps(p, in, elemSize, rank, n, seg);
    // last step: chunk r is complete and stays here
    Range s = seg(rank);
    p.recvReduceCopy(in + s.start * elemSize, out + (s.start - outStart) * elemSize, s.size());
  }
}

// in is this rank's shard, out the concatenation of all shards: offsets[c] .. offsets[c + 1].
template <class Prims>
DP_HOST_DEVICE void ringAllGather(Prims& p, const char* in, char* out, const size_t* offsets,
                                  size_t elemSize, int rank, int n, size_t segmentCount) {
  const ChunkLayout layout = ChunkLayout::shards(offsets, n);
  const size_t rounds = numSegments(layout.maxChunk(), segmentCount);
  const size_t inStart = layout.chunk(rank).start;
  for (size_t round = 0; round < rounds; ++round) {
    const RoundSegments seg{layout, round, rounds};
    // step 0: place our shard and push it to the next rank
    Range s = seg(rank);
    p.copySend(in + (s.start - inStart) * elemSize, out + s.start * elemSize, s.size());
    allGatherSteps(p, out, elemSize, rank, n, seg);
  }
}

// A chain root -> root+1 -> ... -> root-1, pipelined by segments; buf is in place everywhere.
template <class Prims>
DP_HOST_DEVICE void ringBroadcast(Prims& p, char* buf, size_t count, size_t elemSize, int rank,
                                  int n, int root, size_t segmentCount) {
  const int position = ringMod(static_cast<long long>(rank) - root, n);
  const size_t rounds = numSegments(count, segmentCount);
  for (size_t round = 0; round < rounds; ++round) {
    Range s = shardRange(count, static_cast<int>(rounds), static_cast<int>(round));
    char* seg = buf + s.start * elemSize;
    if (position == 0) p.send(seg, s.size());
    else if (position == n - 1) p.recv(seg, s.size());
    else p.recvCopySend(seg, s.size());
  }
}

// A chain root+1 -> ... -> root-1 -> root, pipelined by segments: the chain's first rank sends
// its input, every later one applies op(partial, its input) and passes the partial on, and the
// root keeps op(partial, its input) in out. That is reduceInRingOrder's order for rank = root
// (algo/direct.h), so ring and direct give the same bits. out is the root's alone (nullptr
// elsewhere); out == in is in place, as each element is read before it is written.
template <class Prims>
DP_HOST_DEVICE void ringReduce(Prims& p, const char* in, char* out, size_t count,
                               size_t elemSize, int rank, int n, int root, size_t segmentCount) {
  const int position = ringMod(static_cast<long long>(rank) - root - 1, n);  // root: n - 1
  const size_t rounds = numSegments(count, segmentCount);
  for (size_t round = 0; round < rounds; ++round) {
    Range s = shardRange(count, static_cast<int>(rounds), static_cast<int>(round));
    const size_t at = s.start * elemSize;
    if (position == 0) p.send(in + at, s.size());
    else if (position == n - 1) p.recvReduceCopy(in + at, out + at, s.size());
    else p.recvReduceSend(in + at, s.size());
  }
}

// One ring collective as a rank runs it: the task, where the rank sits, the all-gather's shards
// (offsets[c] .. offsets[c + 1] of the output) and the elements of a segment.
struct RingCall {
  Task task;
  int rank;
  int n;  // >= 2
  const size_t* offsets;
  size_t segmentCount;
};

template <class Prims>
DP_HOST_DEVICE void ringCollective(Prims& p, const RingCall& call) {
  const Task& task = call.task;
  const size_t elem = dtypeSize(task.dtype);
  auto in = static_cast<const char*>(task.in);
  auto out = static_cast<char*>(task.out);
  const int rank = call.rank, n = call.n;
  switch (task.coll) {
    case Coll::kAllReduce:
      return ringAllReduce(p, in, out, task.count, elem, rank, n, call.segmentCount);
    case Coll::kReduceScatter:
      return ringReduceScatter(p, in, out, task.count, elem, rank, n, call.segmentCount);
    case Coll::kAllGather:
      return ringAllGather(p, in, out, call.offsets, elem, rank, n, call.segmentCount);
    case Coll::kBroadcast:
      return ringBroadcast(p, out, task.count, elem, rank, n, task.root, call.segmentCount);
    case Coll::kReduce:
      return ringReduce(p, in, out, task.count, elem, rank, n, task.root, call.segmentCount);
    case Coll::kBarrier:
    case Coll::kGather: case Coll::kScatter: case Coll::kAllToAll:  // no ring runs them
      return;
  }
}

// Verbs per round, for the trace's step labels: the 2(n-1) hops of an all-reduce take 2n-1
// verbs (the first only sends, the last only receives), reduce-scatter and all-gather n, a
// chain (broadcast, reduce) 1.
DP_HOST_DEVICE inline int ringVerbsPerRound(Coll coll, int n) {
  if (coll == Coll::kBroadcast || coll == Coll::kReduce) return 1;
  return coll == Coll::kAllReduce ? 2 * n - 1 : n;
}

}  // namespace dpcore
