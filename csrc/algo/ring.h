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
// Vocabulary: a chunk is one rank's share of the buffer (shardRange), a segment is the
// pipelining unit inside a chunk (one FIFO slot), a step is one hop around the ring. The buffer
// is moved in rounds: round i carries segment i of every chunk through all the steps, so a FIFO
// of a few slots suffices however large the buffer is.
//
//   all-reduce, n ranks, S bytes: n-1 reduce-scatter steps then n-1 all-gather steps;
//   each rank sends 2(n-1)/n * S.
//   reduce-scatter: n-1 steps, (n-1)/n * S.  all-gather: n-1 steps, (n-1)/n * S (S = output).
//   broadcast: a pipelined chain from the root, S per link.
#pragma once

#include <cstddef>
#include <vector>

#include "dpcore/ring.h"

namespace dpcore {

// Where chunk c lives in the buffer, in elements.
struct ChunkLayout {
  std::vector<Range> chunks;

  static ChunkLayout even(size_t count, int n) {  // shard_range split, for reductions
    ChunkLayout l;
    for (int c = 0; c < n; ++c) l.chunks.push_back(shardRange(count, n, c));
    return l;
  }
  static ChunkLayout fromCounts(const std::vector<size_t>& counts) {  // all-gather shards
    ChunkLayout l;
    size_t start = 0;
    for (size_t c : counts) { l.chunks.push_back(Range{start, start + c}); start += c; }
    return l;
  }
  size_t maxChunk() const {
    size_t m = 0;
    for (const Range& r : chunks) m = r.size() > m ? r.size() : m;
    return m;
  }
  // Segment `round` of chunk c, as an element range of the whole buffer.
  Range segment(int c, size_t round, size_t rounds) const {
    Range s = shardRange(chunks[c].size(), static_cast<int>(rounds), static_cast<int>(round));
    return Range{chunks[c].start + s.start, chunks[c].start + s.stop};
  }
};

// The reduce-scatter half of a round, up to its last step: push our data of chunk r-1 (step 0),
// then add our data to each partial sum that arrives and pass it on (steps 1 .. n-2). What
// arrives next is chunk r, which only our data is missing.
template <class Prims, class Segment>
void reduceScatterSteps(Prims& p, const char* in, size_t elemSize, int rank, int n,
                        Segment seg) {
  Range s = seg(reduceScatterSendChunk(rank, 0, n));
  p.send(in + s.start * elemSize, s.size());
  for (int step = 1; step < n - 1; ++step) {
    s = seg(reduceScatterSendChunk(rank, step, n));
    p.recvReduceSend(in + s.start * elemSize, s.size());
  }
}

// in and out are whole buffers (byte pointers, elemSize bytes per element); in == out is in place.
template <class Prims>
void ringAllReduce(Prims& p, const char* in, char* out, size_t count, size_t elemSize,
                   int rank, int n, size_t segmentCount) {
  ChunkLayout layout = ChunkLayout::even(count, n);
  size_t rounds = numSegments(layout.maxChunk(), segmentCount);
  for (size_t round = 0; round < rounds; ++round) {
    auto seg = [&](int chunk) { return layout.segment(chunk, round, rounds); };
    reduceScatterSteps(p, in, elemSize, rank, n, seg);
    // step n-1: chunk r is complete here; keep it and start its trip around the ring
    Range s = seg(rank);
    p.recvReduceCopySend(in + s.start * elemSize, out + s.start * elemSize, s.size());
    // n-2 steps: keep each finished chunk that arrives and forward it
    for (int step = 1; step < n - 1; ++step) {
      s = seg(allGatherRecvChunk(rank, step - 1, n));
      p.recvCopySend(out + s.start * elemSize, s.size());
    }
    // last step: chunk r+1 ends its trip here
    s = seg(allGatherRecvChunk(rank, n - 2, n));
    p.recv(out + s.start * elemSize, s.size());
  }
}

// out holds chunk `rank` only (shardRange(count, n, rank)); in is the whole input.
template <class Prims>
void ringReduceScatter(Prims& p, const char* in, char* out, size_t count, size_t elemSize,
                       int rank, int n, size_t segmentCount) {
  ChunkLayout layout = ChunkLayout::even(count, n);
  size_t rounds = numSegments(layout.maxChunk(), segmentCount);
  size_t outStart = layout.chunks[rank].start;
  for (size_t round = 0; round < rounds; ++round) {
    auto seg = [&](int chunk) { return layout.segment(chunk, round, rounds); };
    reduceScatterSteps(p, in, elemSize, rank, n, seg);
    // last step: chunk r is complete and stays here
    Range s = seg(rank);
    p.recvReduceCopy(in + s.start * elemSize, out + (s.start - outStart) * elemSize, s.size());
  }
}

// in is this rank's shard (counts[rank] elements), out the concatenation of all shards.
template <class Prims>
void ringAllGather(Prims& p, const char* in, char* out, const std::vector<size_t>& counts,
                   size_t elemSize, int rank, int n, size_t segmentCount) {
  ChunkLayout layout = ChunkLayout::fromCounts(counts);
  size_t rounds = numSegments(layout.maxChunk(), segmentCount);
  size_t inStart = layout.chunks[rank].start;
  for (size_t round = 0; round < rounds; ++round) {
    auto seg = [&](int chunk) { return layout.segment(chunk, round, rounds); };
    // step 0: place our shard and push it to the next rank
    Range s = seg(rank);
    p.copySend(in + (s.start - inStart) * elemSize, out + s.start * elemSize, s.size());
    for (int step = 1; step < n - 1; ++step) {
      s = seg(allGatherRecvChunk(rank, step - 1, n));
      p.recvCopySend(out + s.start * elemSize, s.size());
    }
    s = seg(allGatherRecvChunk(rank, n - 2, n));
    p.recv(out + s.start * elemSize, s.size());
  }
}

// A chain root -> root+1 -> ... -> root-1, pipelined by segments; buf is in place everywhere.
template <class Prims>
void ringBroadcast(Prims& p, char* buf, size_t count, size_t elemSize, int rank, int n, int root,
                   size_t segmentCount) {
  int position = ringMod(static_cast<long long>(rank) - root, n);
  size_t rounds = numSegments(count, segmentCount);
  for (size_t round = 0; round < rounds; ++round) {
    Range s = shardRange(count, static_cast<int>(rounds), static_cast<int>(round));
    char* seg = buf + s.start * elemSize;
    if (position == 0) p.send(seg, s.size());
    else if (position == n - 1) p.recv(seg, s.size());
    else p.recvCopySend(seg, s.size());
  }
}

}  // namespace dpcore
