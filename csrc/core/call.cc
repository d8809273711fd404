// Call matching (call.h): a rank's header, the checks every rank makes of all of them, and
// the messages that name the calls.
#include "core/call.h"

#include <sstream>

#include "algo/exchange.h"
#include "dpcore/coll_table.h"

namespace dpcore {
namespace {

std::string describe(const CollHeader& h) {
  if (h.coll < 0 || h.coll >= kNumColls || h.algo < 0 || h.algo >= kNumAlgos ||
      h.dtype < 0 || h.dtype >= kNumDTypes || h.op < 0 || h.op >= kNumOps) {
    return "an unknown call (coll " + std::to_string(h.coll) + ")";
  }
  const CollInfo& coll = collInfo(static_cast<Coll>(h.coll));
  std::string s = std::string(coll.name) + "(count=" + std::to_string(h.count);
  if (coll.output == Output::kSumOfShards) s += ", total=" + std::to_string(h.total);
  if (coll.output != Output::kNone) {
    s += std::string(", dtype=") + dtypeName(static_cast<DType>(h.dtype));
  }
  if (coll.reduces) s += std::string(", op=") + opName(static_cast<ReduceOp>(h.op));
  if (coll.rooted) s += ", root=" + std::to_string(h.root);
  return s + ", algo=" + algoName(static_cast<Algo>(h.algo)) + ")";
}

}  // namespace

CollHeader headerOf(const Task& task, uint64_t seq) {
  CollHeader h{};
  h.seq = seq;
  h.coll = static_cast<int32_t>(task.coll);
  h.dtype = static_cast<int32_t>(task.dtype);
  h.op = static_cast<int32_t>(task.op);
  h.root = task.root;
  h.algo = static_cast<int32_t>(task.algo);
  h.chosen = h.algo;
  h.count = task.count;
  h.total = task.total;
  h.inAt = kNotInOutput;
  h.pieceElems = task.pieces.at ? task.pieces.elems : kNotInPieces;
  const size_t elem = dtypeSize(task.dtype);
  auto in = reinterpret_cast<uintptr_t>(task.in), out = reinterpret_cast<uintptr_t>(task.out);
  const bool gathers = task.coll == Coll::kAllGather || task.coll == Coll::kGather;
  if (gathers && task.count && in >= out && in < out + task.total * elem) {
    h.inAt = (in - out) / elem;  // dpcore/comm/ let it in only whole and on an element
  }
  return h;
}

bool countsOnly(const std::vector<CollHeader>& headers, int root) {
  return root >= 0 && static_cast<size_t>(root) < headers.size() &&
         headers[root].algo == static_cast<int32_t>(Algo::kCountsOnly);
}

// Shards and outputs may differ by rank where shards do (all_gather, gather, scatter,
// all_to_all); misfit and exchangeMisfit check that they fit together. A gather's algo may
// differ where one side is its root's round of lengths (countsOnly), which every gather meets.
std::string mismatch(const std::vector<CollHeader>& headers, const CollHeader& mine, int rank) {
  const Coll coll = static_cast<Coll>(mine.coll);
  const bool gather = coll == Coll::kAllGather || isExchange(coll);
  const int32_t counts = static_cast<int32_t>(Algo::kCountsOnly);
  for (size_t r = 0; r < headers.size(); ++r) {
    const CollHeader& h = headers[r];
    const bool algoAlike = h.algo == mine.algo ||
                           (coll == Coll::kGather && (h.algo == counts || mine.algo == counts));
    bool same = h.seq == mine.seq && h.coll == mine.coll && h.dtype == mine.dtype &&
                h.op == mine.op && h.root == mine.root && algoAlike &&
                (gather || (h.count == mine.count && h.total == mine.total));
    if (!same) {
      return "mismatch: rank " + std::to_string(rank) + " called " + describe(mine) +
             " but rank " + std::to_string(r) + " called " + describe(h);
    }
  }
  return "";
}

std::string misfit(const std::vector<CollHeader>& headers, std::vector<int>& culprits) {
  const CollHeader& first = headers[0];
  if (first.coll != static_cast<int32_t>(Coll::kAllGather)) return "";
  uint64_t shardTotal = 0;
  for (const CollHeader& h : headers) shardTotal += h.count;
  std::string why;
  uint64_t place = 0;  // of rank r's shard in the output
  for (size_t r = 0; r < headers.size(); ++r) {
    const CollHeader& h = headers[r];
    const std::string who = "rank " + std::to_string(r) + "'s ";
    std::string wrong;
    if (h.total != shardTotal) {
      wrong = who + "out holds " + std::to_string(h.total) +
              " elements, but the shards add up to " + std::to_string(shardTotal);
    } else if (h.inAt != kNotInOutput && h.inAt != place) {
      wrong = who + "shard lies at element " + std::to_string(h.inAt) +
              " of its out, but its place there is element " + std::to_string(place);
    }
    place += h.count;
    if (wrong.empty()) continue;
    culprits.push_back(static_cast<int>(r));
    why += (why.empty() ? "" : "; ") + wrong;
  }
  if (why.empty()) return "";
  return "refused: " + why + " (nothing was sent; the communicator stays usable)";
}

std::string exchangeMisfit(const Task& task, const std::vector<CollHeader>& headers,
                           std::vector<int>& culprits) {
  const int n = static_cast<int>(headers.size());
  std::string why;
  auto wrong = [&](int r, const std::string& what) {
    culprits.push_back(r);
    why += (why.empty() ? "rank " : "; rank ") + std::to_string(r) + what;
  };
  if (task.coll == Coll::kAllToAll) {
    // With splits, dpcore/comm/ has checked that they agree, and an out learned from them must
    // hold what comes; without, count / n goes each way, so every count must be rank 0's.
    for (int q = 0; q < n; ++q) {
      uint64_t takes = task.splits ? 0 : headers[0].count;
      for (int p = 0; task.splits && p < n; ++p) takes += task.splits[p * n + q];
      const bool fits = headers[q].total == takes && (task.splits || headers[q].count == takes);
      if (!fits) {
        wrong(q, " sends " + std::to_string(headers[q].count) + " elements and its out holds " +
                     std::to_string(headers[q].total) + ", but it takes " +
                     std::to_string(takes) + (task.splits ? "" : " (rank 0's count)"));
      }
    }
  } else {  // the root's buffer holds every rank's shard: gather's out, scatter's x
    const bool gather = task.coll == Coll::kGather;
    uint64_t shards = 0, place = 0;
    for (int r = 0; r < n; ++r) {
      if (r == task.root) place = shards;
      shards += gather ? headers[r].count : headers[r].total;
    }
    const CollHeader& h = headers[task.root];
    const uint64_t holds = gather ? h.total : h.count;
    if (!gather && h.pieceElems != kNotInPieces) {  // each rank's out takes its piece whole
      for (int r = 0; r < n; ++r) {
        if (headers[r].total != h.pieceElems) {
          wrong(r, "'s out holds " + std::to_string(headers[r].total) + " elements, but its "
                   "piece of the root's x has " + std::to_string(h.pieceElems));
        }
      }
    } else if (holds != shards) {
      wrong(task.root, " (the root)'s " + std::string(gather ? "out" : "x") + " holds " +
                           std::to_string(holds) + " elements, but the shards add up to " +
                           std::to_string(shards));
    } else if (gather && h.inAt != kNotInOutput && h.inAt != place) {
      wrong(task.root, " (the root)'s shard lies at element " + std::to_string(h.inAt) +
                           " of its out, but its place there is element " +
                           std::to_string(place));
    }
  }
  if (why.empty()) return "";
  return "refused: " + why + " (nothing was sent; the communicator stays usable)";
}

std::string CallContext::timedOut(const std::string& waitingFor) const {
  std::ostringstream why;
  why << "timed out after " << timeout << " s waiting for " << waitingFor;
  return why.str();
}

}  // namespace dpcore
