// Call matching, the same for every transport: each rank publishes a header of the collective it
// entered and checks every peer's before any data moves, so a mismatched call becomes a CommError
// on every rank instead of silent corruption. A transport only carries the headers.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "core/limits.h"
#include "core/task.h"
#include "core/trace.h"
#include "dpcore/error.h"

namespace dpcore {

// What one rank asked for. For all_gather, count is this rank's own shard (shards may differ),
// so peers learn every shard length from the headers, and total is the output's length; for the
// others total equals count. The last fields are the transport's (ShmTransport::annotate).
struct CollHeader {
  uint64_t seq;
  int32_t coll;
  int32_t dtype;
  int32_t op;
  int32_t root;
  int32_t algo;
  int32_t chosen;  // algo kAuto: the algorithm rank 0 chose (rank 0's header is everyone's)
  uint64_t count;
  uint64_t total;
  uint64_t inAt;  // all_gather: where the shard lies inside the output (in place), or kNotInOutput
  // shared memory only:
  uint32_t align;      // where this rank's data sits in its slots (ShmLayout::kAlignSpan)
  uint32_t inRegion;   // the shared buffer (cpu/shared_buffers.h) that holds addr's data, or 0;
  uint32_t outRegion;  // and outAddr's (all_reduce)
  uint64_t addr;     // direct algorithm: this rank's input (broadcast: its buffer), as an
  uint64_t outAddr;  // address in its own process, and its output; peers read both
};

constexpr uint64_t kNotInOutput = ~uint64_t{0};  // CollHeader::inAt: the shard lies elsewhere

CollHeader headerOf(const Task& task, uint64_t seq);

// Every rank sees every header, so every rank finds a mismatch: "" if all agree, else why not.
std::string mismatch(const std::vector<CollHeader>& headers, const CollHeader& mine, int rank);

// Calls that match but cannot work, which no rank could see alone: an all_gather output that
// does not hold the shards, or a shard inside the output but not at its rank's place there. ""
// if none, else why, with the ranks at fault added to `culprits`. Every rank finds the same, so
// all refuse the call before any data moves (InvalidCall, Refused) and none breaks.
std::string misfit(const std::vector<CollHeader>& headers, std::vector<int>& culprits);

// Once a call has failed, peers may be anywhere in its schedule, so no later call could match:
// a communicator refuses every one at once.
class Broken {
 public:
  void check() const {
    if (!reason_.empty()) {
      throw CommError("dpcore: communicator unusable after an earlier failure: " + reason_);
    }
  }
  void set(const std::string& reason) { reason_ = reason; }

 private:
  std::string reason_;
};

// The collective in flight on one rank, for deadlines and messages: "dpcore all_reduce #3 on
// rank 1: why".
struct CallContext {
  const char* name = "";
  uint64_t seq = 0;
  int rank = 0;
  double timeout = 0;
  std::chrono::steady_clock::time_point deadline;
  Tracer* tracer = nullptr;

  std::string message(const std::string& why) const {
    return std::string("dpcore ") + name + " #" + std::to_string(seq) + " on rank " +
           std::to_string(rank) + ": " + why;
  }
  [[noreturn]] void fail(const std::string& why) const { throw CommError(message(why)); }
  bool expired(std::chrono::steady_clock::time_point now) const { return now > deadline; }
  std::string timedOut(const std::string& waitingFor) const;  // "timed out after 2 s waiting..."
};

}  // namespace dpcore
