// Chunk math shared by the CPU and CUDA code: how a buffer splits into chunks (one per rank) and
// segments (the pipelining unit), and which chunk a rank touches at which step of the ring.
//
// Ring: rank r sends to r+1 and receives from r-1. Reduce-scatter step k (k = 0 .. n-2): rank r
// sends chunk r-k-1 and receives chunk r-k-2, so at step n-2 it receives and finishes chunk r.
// All-gather step k: rank r sends chunk r-k and receives chunk r-k-1.
#pragma once

#include <cstddef>

#include "dpcore/types.h"

namespace dpcore {

DP_HOST_DEVICE inline int ringMod(long long x, int n) {
  long long m = x % n;
  return static_cast<int>(m < 0 ? m + n : m);
}

// numpy.array_split convention: the first (count % parts) pieces are one element longer.
struct Range {
  size_t start;
  size_t stop;
  DP_HOST_DEVICE size_t size() const { return stop - start; }
};

DP_HOST_DEVICE inline Range shardRange(size_t count, int parts, int index) {
  size_t base = count / parts, extra = count % parts, i = static_cast<size_t>(index);
  size_t start = i * base + (i < extra ? i : extra);
  return Range{start, start + base + (i < extra ? 1 : 0)};
}

DP_HOST_DEVICE inline int reduceScatterSendChunk(int rank, int step, int n) {
  return ringMod(static_cast<long long>(rank) - step - 1, n);
}
DP_HOST_DEVICE inline int reduceScatterRecvChunk(int rank, int step, int n) {
  return ringMod(static_cast<long long>(rank) - step - 2, n);
}
DP_HOST_DEVICE inline int allGatherSendChunk(int rank, int step, int n) {
  return ringMod(static_cast<long long>(rank) - step, n);
}
DP_HOST_DEVICE inline int allGatherRecvChunk(int rank, int step, int n) {
  return ringMod(static_cast<long long>(rank) - step - 1, n);
}

// Where chunk c lives in the buffer, in elements: shardRange's even split (the reductions), or
// the concatenation of per-rank shards of any length (all-gather), given as n + 1 prefix sums
// that the caller owns (host or device memory, wherever the schedule runs).
struct ChunkLayout {
  size_t count;           // elements in the buffer
  int n;                  // chunks: one per rank
  const size_t* offsets;  // null: the even split; else chunk c is [offsets[c], offsets[c + 1])

  DP_HOST_DEVICE static ChunkLayout even(size_t count, int n) { return {count, n, nullptr}; }
  DP_HOST_DEVICE static ChunkLayout shards(const size_t* offsets, int n) {
    return {offsets[n], n, offsets};
  }
  DP_HOST_DEVICE Range chunk(int c) const {
    return offsets ? Range{offsets[c], offsets[c + 1]} : shardRange(count, n, c);
  }
  DP_HOST_DEVICE size_t maxChunk() const {
    size_t m = 0;
    for (int c = 0; c < n; ++c) m = chunk(c).size() > m ? chunk(c).size() : m;
    return m;
  }
};

// Every chunk splits into the same number of segments, so that round i moves segment i of every
// chunk and all ranks agree on it even when chunk lengths differ by one element.
DP_HOST_DEVICE inline size_t numSegments(size_t maxChunkCount, size_t segmentCount) {
  if (maxChunkCount == 0) return 1;
  return (maxChunkCount + segmentCount - 1) / segmentCount;
}

// Segment `round` of every chunk, as element ranges of the whole buffer.
struct RoundSegments {
  ChunkLayout layout;
  size_t round, rounds;
  DP_HOST_DEVICE Range operator()(int c) const {
    Range chunk = layout.chunk(c);
    Range s = shardRange(chunk.size(), static_cast<int>(rounds), static_cast<int>(round));
    return Range{chunk.start + s.start, chunk.start + s.stop};
  }
};

}  // namespace dpcore
