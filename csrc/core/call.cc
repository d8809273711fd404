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
  if (task.coll == Coll::kAllGather && task.count && in >= out && in < out + task.total * elem) {
    h.inAt = (in - out) / elem;  // dpcore/comm/ let it in only whole and on an element
  }
  return h;
}

// all_gather's shards and outputs may differ by rank; misfit checks that they fit together.
std::string mismatch(const std::vector<CollHeader>& headers, const CollHeader& mine, int rank) {
  const bool gather = mine.coll == static_cast<int32_t>(Coll::kAllGather);
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

std::string CallContext::timedOut(const std::string& waitingFor) const {
  std::ostringstream why;
  why << "timed out after " << timeout << " s waiting for " << waitingFor;
  return why.str();
}

}  // namespace dpcore
