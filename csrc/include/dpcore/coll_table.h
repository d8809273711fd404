// One table of collectives: for each, what it takes, what it returns and what it costs a rank
// under each algorithm, one row per code of types.h's Coll. dpcore/collectives.py reads it
// (bound as _C.COLLECTIVE_TABLE), and the ledger, the bench, the cost model and explain take
// their numbers from there; tests/test_coll_table.py counts what the ring really moves
// (_C.ring_trace) and what one-shot and direct move (dpcore.explain) against it.
//
// An Amount, for n ranks and a buffer of S bytes (nccl-tests' size: the input of all_reduce and
// reduce_scatter, the output of all_gather, the payload of broadcast), is
//     whole * S  +  peers * (n-1) S  +  chunks * (n-1)/n S
// where (n-1)/n S is a chunk (S/n) from or for every peer: the part of the buffer that is not
// the rank's own. Steps and the bus factor are Amounts of 1 instead of S.
#pragma once

#include <cstdint>

#include "dpcore/types.h"

namespace dpcore {

struct Amount {
  int whole = 0, peers = 0, chunks = 0;
};
constexpr Amount operator+(Amount a, Amount b) {
  return {a.whole + b.whole, a.peers + b.peers, a.chunks + b.chunks};
}

// What one algorithm costs a rank, as the cost model charges it (dpcore/cost/formulas.py):
// bytes moved on the critical path (beta each), bytes reduced (gamma each), steps: messages or
// waits on the critical path (alpha each). The ring's bytes are what each rank sends. A chain
// (the ring's broadcast) passes segments from the root down n-1 links that carry S each:
// (n-1)/n S per rank on average, and pipelined, each segment after the first adds a step.
struct AlgoCost {
  Amount bytes, reduced, steps;
  bool chain = false;
  bool runs = false;  // whether the algorithm runs this collective at all
};

// How many elements the output holds, given the input's count.
enum class Output : int32_t { kNone = 0, kSameAsInput = 1, kOwnShard = 2, kSumOfShards = 3 };

inline const char* outputName(Output o) {
  static const char* names[] = {"none", "same_as_input", "own_shard", "sum_of_shards"};
  return names[static_cast<int>(o)];
}

struct CollInfo {
  Coll coll;
  const char* name;
  bool reduces;  // takes an op
  bool rooted;   // takes a root
  Output output;
  AlgoCost ring, oneShot, direct;
  Amount busFactor;  // nccl-tests' busbw / algbw (its doc/PERFORMANCE.md)
};

// The table's own words, kept out of namespace dpcore's way.
namespace coll_table {

constexpr Amount whole(int k) { return {k, 0, 0}; }
constexpr Amount peers(int k) { return {0, k, 0}; }
constexpr Amount chunks(int k) { return {0, 0, k}; }
constexpr bool kChain = true;
constexpr AlgoCost cost(Amount bytes, Amount reduced, Amount steps, bool chain = false) {
  return {bytes, reduced, steps, chain, true};
}
constexpr AlgoCost kDoesNotRun{};

// ring:     all_reduce is reduce_scatter then all_gather, n-1 steps each, a chunk per step.
// one_shot: every rank writes its payload, waits once, reads what it needs from every slot
//           (all_reduce: write S, read n S; reduce_scatter: write S, read n S/n = S;
//           all_gather: write S/n, read (n-1)/n S; broadcast: the root writes S, the rest read).
// direct:   a rank reads straight from the peers' buffers; the root's serves n-1 readers (a
//           gather's senders write the root's output instead, where they may).
//           gather, scatter and all_to_all run it on every transport: where the peers' memory
//           is not mapped (MPI), each chunk is one message from the rank that has it.
// kDoesNotRun: no such algorithm for the collective (gather, scatter, all_to_all: no ring).
constexpr CollInfo kCollTable[kNumColls] = {
    // {code, name, reduces, rooted, output,
    //  ring, one_shot, direct: each cost(bytes, reduced, steps[, chain]), bus factor}
    {Coll::kBarrier, "barrier", false, false, Output::kNone, kDoesNotRun, kDoesNotRun,
     kDoesNotRun, {}},
    {Coll::kAllReduce, "all_reduce", /*reduces*/ true, /*rooted*/ false, Output::kSameAsInput,
     /*ring*/ cost(chunks(2), chunks(1), peers(2)),
     /*one_shot*/ cost(whole(2) + peers(1), peers(1), whole(1)),
     /*direct*/ cost(chunks(2), chunks(1), whole(2)), /*bus factor*/ chunks(2)},
    {Coll::kReduceScatter, "reduce_scatter", true, false, Output::kOwnShard,
     /*ring*/ cost(chunks(1), chunks(1), peers(1)),
     /*one_shot*/ cost(whole(2), chunks(1), whole(1)),
     /*direct*/ cost(chunks(1), chunks(1), whole(1)), /*bus factor*/ chunks(1)},
    {Coll::kAllGather, "all_gather", false, false, Output::kSumOfShards,
     /*ring*/ cost(chunks(1), {}, peers(1)),
     /*one_shot*/ cost(whole(1), {}, whole(1)),
     /*direct*/ cost(chunks(1), {}, whole(1)), /*bus factor*/ chunks(1)},
    {Coll::kBroadcast, "broadcast", false, true, Output::kSameAsInput,
     /*ring*/ cost(chunks(1), {}, peers(1), kChain),
     /*one_shot*/ cost(whole(2), {}, whole(1)),
     /*direct*/ cost(peers(1), {}, whole(1)), /*bus factor*/ whole(1)},
    // The root's: a chain root+1 -> ... -> root, S per link and reduced at every hop but the
    // first; one_shot and direct: the root reads every peer's S and reduces it.
    {Coll::kReduce, "reduce", true, true, Output::kSameAsInput,
     /*ring*/ cost(chunks(1), chunks(1), peers(1), kChain),
     /*one_shot*/ cost(whole(2) + peers(1), peers(1), whole(1)),
     /*direct*/ cost(peers(1), peers(1), whole(1)), /*bus factor*/ whole(1)},
    // S is the root's whole buffer (gather's output, scatter's input): the root takes in (the
    // peers write it) or serves (n-1)/n S, one chunk a peer. one_shot: S written and read once
    // between them.
    {Coll::kGather, "gather", false, true, Output::kSumOfShards, kDoesNotRun,
     /*one_shot*/ cost(whole(1), {}, whole(1)),
     /*direct*/ cost(chunks(1), {}, whole(1)), /*bus factor*/ chunks(1)},
    {Coll::kScatter, "scatter", false, true, Output::kOwnShard, kDoesNotRun,
     /*one_shot*/ cost(whole(1), {}, whole(1)),
     /*direct*/ cost(chunks(1), {}, whole(1)), /*bus factor*/ chunks(1)},
    // S is every rank's input (and output): a chunk to and from every peer.
    {Coll::kAllToAll, "all_to_all", false, false, Output::kSameAsInput, kDoesNotRun,
     /*one_shot*/ cost(whole(2), {}, whole(1)),
     /*direct*/ cost(chunks(1), {}, whole(1)), /*bus factor*/ chunks(1)},
};

}  // namespace coll_table
using coll_table::kCollTable;

constexpr bool rowsInCodeOrder() {
  for (int i = 0; i < kNumColls; ++i) {
    if (static_cast<int>(kCollTable[i].coll) != i) return false;
  }
  return true;
}
static_assert(rowsInCodeOrder(), "kCollTable's row i must be the collective of code i");

constexpr const CollInfo& collInfo(Coll c) { return kCollTable[static_cast<int>(c)]; }

inline const char* collName(Coll c) { return collInfo(c).name; }

}  // namespace dpcore
