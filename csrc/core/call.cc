// Call matching (call.h): a rank's header, the checks every rank makes of all of them, and
// the messages that name the calls.
#include "core/call.h"

#include <sstream>

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
  const size_t elem = dtypeSize(task.dtype);
  auto in = reinterpret_cast<uintptr_t>(task.in), out = reinterpret_cast<uintptr_t>(task.out);
  const bool gathers = task.coll == Coll::kAllGather || task.coll == Coll::kGather;
  if (gathers && task.count && in >= out && in < out + task.total * elem) {
    h.inAt = (in - out) / elem;  // dpcore/comm/ let it in only whole and on an element
  }
  return h;
}

// Shards and outputs may differ by rank where shards do (all_gather, gather, scatter,
// all_to_all); misfit and exchangeMisfit check that they fit together.
std::string mismatch(const std::vector<CollHeader>& headers, const CollHeader& mine, int rank) {
  const Coll coll = static_cast<Coll>(mine.coll);
  const bool gather = coll == Coll::kAllGather || coll == Coll::kGather ||
                      coll == Coll::kScatter || coll == Coll::kAllToAll;
  for (size_t r = 0; r < headers.size(); ++r) {
    const CollHeader& h = headers[r];
    bool same = h.seq == mine.seq && h.coll == mine.coll && h.dtype == mine.dtype &&
                h.op == mine.op && h.root == mine.root && h.algo == mine.algo &&
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
  if (first.coll != static_cast<int32_t>(Coll::kAllGather) ||
      first.algo == static_cast<int32_t>(Algo::kCountsOnly)) {
    return "";
  }
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
  std::string wrong;
  if (task.coll == Coll::kAllToAll && task.splits) {
    // dpcore/comm/ exchanged the splits and checked that they agree; an out learned from them
    // must hold what comes
    for (int q = 0; q < n; ++q) {
      uint64_t takes = 0;
      for (int p = 0; p < n; ++p) takes += task.splits[p * n + q];
      if (headers[q].total == takes) continue;
      culprits.push_back(q);
      wrong += (wrong.empty() ? "" : "; ") + std::string("rank ") + std::to_string(q) +
               "'s out holds " + std::to_string(headers[q].total) + " elements, but it takes " +
               std::to_string(takes);
    }
    return wrong.empty() ? "" : "refused: " + wrong +
                                    " (nothing was sent; the communicator stays usable)";
  }
  if (task.coll == Coll::kAllToAll) {
    // count / n each way: every rank must send as many as it takes, and as every other rank
    const uint64_t count = headers[0].count;
    for (int r = 0; r < n; ++r) {
      if (headers[r].count == count && headers[r].total == count) continue;
      culprits.push_back(r);
      wrong += (wrong.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) +
               " sends " + std::to_string(headers[r].count) + " elements and takes " +
               std::to_string(headers[r].total);
    }
    if (wrong.empty()) return "";
    return "refused: without splits every rank sends and takes as many elements as rank 0 (" +
           std::to_string(count) + "), but " + wrong +
           " (nothing was sent; the communicator stays usable)";
  }
  // The root's buffer holds every rank's shard: gather's out, scatter's x.
  const bool gather = task.coll == Coll::kGather;
  const int root = task.root;
  uint64_t shards = 0, place = 0;
  for (int r = 0; r < n; ++r) {
    if (r == root) place = shards;
    shards += gather ? headers[r].count : headers[r].total;
  }
  const CollHeader& h = headers[root];
  const uint64_t holds = gather ? h.total : h.count;
  const std::string who = "the root, rank " + std::to_string(root) + "'s ";
  if (holds != shards) {
    wrong = who + (gather ? "out" : "x") + " holds " + std::to_string(holds) +
            " elements, but the shards add up to " + std::to_string(shards);
  } else if (gather && h.inAt != kNotInOutput && h.inAt != place) {
    wrong = who + "shard lies at element " + std::to_string(h.inAt) +
            " of its out, but its place there is element " + std::to_string(place);
  }
  if (wrong.empty()) return "";
  culprits.push_back(root);
  return "refused: " + wrong + " (nothing was sent; the communicator stays usable)";
}

std::string CallContext::timedOut(const std::string& waitingFor) const {
  std::ostringstream why;
  why << "timed out after " << timeout << " s waiting for " << waitingFor;
  return why.str();
}

}  // namespace dpcore
