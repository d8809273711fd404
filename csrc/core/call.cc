#include "core/call.h"

#include <sstream>

namespace dpcore {
namespace {

std::string describe(const CollHeader& h) {
  if (h.coll < 0 || h.coll >= kNumColls || h.algo < 0 || h.algo >= kNumAlgos ||
      h.dtype < 0 || h.dtype >= kNumDTypes || h.op < 0 || h.op >= kNumOps) {
    return "an unknown call (coll " + std::to_string(h.coll) + ")";
  }
  auto coll = static_cast<Coll>(h.coll);
  std::string s = std::string(collName(coll)) + "(count=" + std::to_string(h.count);
  if (coll == Coll::kAllGather) s += ", total=" + std::to_string(h.total);
  if (coll != Coll::kBarrier) s += std::string(", dtype=") + dtypeName(static_cast<DType>(h.dtype));
  if (coll == Coll::kAllReduce || coll == Coll::kReduceScatter) {
    s += std::string(", op=") + opName(static_cast<ReduceOp>(h.op));
  }
  if (coll == Coll::kBroadcast) s += ", root=" + std::to_string(h.root);
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
  return h;
}

std::string mismatch(const std::vector<CollHeader>& headers, const CollHeader& mine, int rank) {
  const bool gather = mine.coll == static_cast<int32_t>(Coll::kAllGather);
  uint64_t shardTotal = 0;
  for (size_t r = 0; r < headers.size(); ++r) {
    const CollHeader& h = headers[r];
    shardTotal += h.count;
    bool same = h.seq == mine.seq && h.coll == mine.coll && h.dtype == mine.dtype &&
                h.op == mine.op && h.root == mine.root && h.algo == mine.algo &&
                h.total == mine.total && (gather || h.count == mine.count);
    if (!same) {
      return "mismatch: rank " + std::to_string(rank) + " called " + describe(mine) +
             " but rank " + std::to_string(r) + " called " + describe(h);
    }
  }
  if (gather && mine.algo != static_cast<int32_t>(Algo::kCountsOnly) &&
      shardTotal != mine.total) {
    return "mismatch: the shards add up to " + std::to_string(shardTotal) +
           " elements but the output holds " + std::to_string(mine.total);
  }
  return "";
}

std::string CallContext::timedOut(const std::string& waitingFor) const {
  std::ostringstream why;
  why << "timed out after " << timeout << " s waiting for " << waitingFor;
  return why.str();
}

}  // namespace dpcore
