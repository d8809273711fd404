// Direct: each rank copies what it needs straight out of the peers' buffers, one copy where the
// ring's slots take two. Reads start with the next rank, so that readers spread over the peers;
// at the end a rank tells the peers it is done and waits until they are, since a buffer must not
// change while a peer may still read it.
//
//   all_gather: read every peer's shard.     broadcast: read the root's buffer.
//   reduce_scatter: reduce this rank's chunk, reading that chunk of every peer's input.
//   all_reduce: the same, then, once every chunk is complete, read the other chunks from the
//   peers' outputs. In place is safe: a rank overwrites another rank's chunk of its own buffer
//   only then, after every rank has finished reading inputs. Where every peer's memory is
//   mapped (kMapped), one pass instead: the chunk, reduced from every input, is written into
//   every output at once, so a call is one kernel between the headers' exchange (every input
//   ready) and the last stage (every output written). In place is safe there too: this rank's
//   chunk is read and written by this rank alone, each element read before it is written.
//   Bytes read per rank: (n-1)/n * S (all_reduce: 2(n-1)/n * S), each in one copy.
//   reduce: the root reduces the whole buffer, reading all of every peer's input: (n-1) S.
//
// PeerMemory, the memory interface it needs:
//   readInput(peer, offset, dst, bytes, stream)    bytes of a peer's input (broadcast: buffer)
//   readOutput(peer, offset, dst, bytes, stream)   ... of a peer's output (all_reduce)
//   signal(stage), waitAll(stage)                  tell the peers / wait until all have said it
//   scratch(i)                                     two local pieces of kDirectPieceBytes
//   streams(bytes)    whether an output this large is written past the cache (stream_copy.h)
//   reduce2(...), copyToOutput(...)                the loops of the memory's device
//   kMapped           true where every peer's memory is addressable here (device memory over
//                     IPC): then input(peer, offset), output(peer, offset) and
//                     reduceInOrder(...) reduce the chunk in one pass into one output or every
//                     one, rounding after every op as the piecewise path does
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "dpcore/chunks.h"
#include "dpcore/task.h"

namespace dpcore {

enum class DirectStage { kReduced, kDone };

// The reduction moves a cache-sized piece at a time, so that partial sums stay in cache.
constexpr size_t kDirectPieceBytes = 128 << 10;

// Elements `chunk` of the reduction, written to dst, in the ring's order for a chunk that ends
// its reduction at this rank: the ring starts chunk r at rank r+1 (reduce: the chain to root r)
// and each rank after it applies op(partial, its input), so here the partial starts as rank
// r+1's input, takes every later peer's in ring order and ends with our own. Ring and direct
// therefore give the same bits, and auto may pick either. Only the last operation writes dst,
// after the peers have been read (dst may be our input). everyOutput (kMapped only): the chunk
// goes into every peer's output as well, at the same offset.
template <class Peers>
void reduceInRingOrder(Peers& peers, const Task& task, int rank, int n, Range chunk, char* dst,
                       bool everyOutput = false) {
  const size_t elem = dtypeSize(task.dtype);
  auto in = static_cast<const char*>(task.in);
  if constexpr (Peers::kMapped) {  // every peer's input is addressable here: one pass
    const size_t at = chunk.start * elem;
    std::vector<const void*> inputs;
    std::vector<void*> outputs{dst};
    for (int k = 1; k < n; ++k) {
      inputs.push_back(peers.input((rank + k) % n, at));
      if (everyOutput) outputs.push_back(peers.output((rank + k) % n, at));
    }
    inputs.push_back(in + at);
    peers.reduceInOrder(task.dtype, task.op, inputs.data(), n, outputs.data(),
                        static_cast<int>(outputs.size()), chunk.size(), avgDivisor(task, n));
  } else {
    const size_t pieceCount = kDirectPieceBytes / elem;
    char* acc = peers.scratch(0);
    char* piece = peers.scratch(1);
    for (size_t off = 0; off < chunk.size(); off += pieceCount) {
      const size_t len = std::min(pieceCount, chunk.size() - off);
      const size_t at = (chunk.start + off) * elem;  // byte offset in every rank's input
      peers.readInput((rank + 1) % n, at, acc, len * elem, false);
      for (int k = 2; k < n; ++k) {
        peers.readInput((rank + k) % n, at, piece, len * elem, false);
        peers.reduce2(task.dtype, task.op, acc, piece, acc, len, 0);
      }
      peers.reduce2(task.dtype, task.op, acc, in + at, dst + off * elem, len,
                    avgDivisor(task, n));
    }
  }
}

template <class Peers>
void direct(Peers& peers, const Task& task, int rank, int n, const size_t* offsets) {
  const size_t elem = dtypeSize(task.dtype);
  char* out = static_cast<char*>(task.out);
  const bool stream = peers.streams(task.total * elem);  // for copies into the output
  switch (task.coll) {
    case Coll::kAllGather:
      for (int k = 1; k < n; ++k) {
        const int peer = (rank + k) % n;
        peers.readInput(peer, 0, out + offsets[peer] * elem,
                        (offsets[peer + 1] - offsets[peer]) * elem, stream);
      }
      if (task.in != out + offsets[rank] * elem && task.count) {
        peers.copyToOutput(out + offsets[rank] * elem, task.in, task.count * elem, stream);
      }
      break;
    case Coll::kBroadcast:
      if (rank != task.root) peers.readInput(task.root, 0, out, task.count * elem, stream);
      break;
    case Coll::kReduceScatter:
      reduceInRingOrder(peers, task, rank, n, shardRange(task.count, n, rank), out);
      break;
    case Coll::kAllReduce: {
      const Range mine = shardRange(task.count, n, rank);
      if constexpr (Peers::kMapped) {  // into every output at once: nothing left to read
        reduceInRingOrder(peers, task, rank, n, mine, out + mine.start * elem, true);
        break;
      }
      reduceInRingOrder(peers, task, rank, n, mine, out + mine.start * elem);
      peers.signal(DirectStage::kReduced);
      peers.waitAll(DirectStage::kReduced);
      for (int k = 1; k < n; ++k) {
        const int peer = (rank + k) % n;
        const Range c = shardRange(task.count, n, peer);
        peers.readOutput(peer, c.start * elem, out + c.start * elem, c.size() * elem, stream);
      }
      break;
    }
    case Coll::kReduce:
      if (rank == task.root) reduceInRingOrder(peers, task, rank, n, Range{0, task.count}, out);
      break;
    case Coll::kBarrier:
    case Coll::kGather: case Coll::kScatter: case Coll::kAllToAll:  // algo/exchange.h runs them
      break;
  }
  peers.signal(DirectStage::kDone);
  peers.waitAll(DirectStage::kDone);
}

}  // namespace dpcore
