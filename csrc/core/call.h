// Call matching, the same for every transport: each rank publishes a header of the collective it
// entered and checks every peer's before any data moves, so a mismatched call becomes a CommError
// on every rank instead of silent corruption. A transport only carries the headers.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "core/trace.h"
#include "dpcore/error.h"
#include "dpcore/header.h"
#include "dpcore/task.h"

namespace dpcore {

// This rank's header for `task`, the seq-th call; the transport adds its Meta (annotate).
CollHeader headerOf(const Task& task, uint64_t seq);

// Whether only the headers travel in this call (Algo::kCountsOnly): all_gather's round of shard
// lengths, or gather's, made by a root that sizes its out (rank `root`'s header says so; the
// non-roots meet it with their gather, which they then make again: Collectives::run).
bool countsOnly(const std::vector<CollHeader>& headers, int root);

// Every rank sees every header, so every rank finds a mismatch: "" if all agree, else why not.
std::string mismatch(const std::vector<CollHeader>& headers, const CollHeader& mine, int rank);

// Calls that match but cannot work, which no rank could see alone: an all_gather output that
// does not hold the shards, or a shard inside the output but not at its rank's place there. ""
// if none, else why, with the ranks at fault added to `culprits`. Every rank finds the same, so
// all refuse the call before any data moves (InvalidCall, Refused) and none breaks.
std::string misfit(const std::vector<CollHeader>& headers, std::vector<int>& culprits);
// The same for gather, scatter and all_to_all: the root's buffer holds the sum of the shards (in
// place, gather's root's shard at its place); all_to_all without splits sends count / n each
// way, so every rank's count must be rank 0's.
std::string exchangeMisfit(const Task& task, const std::vector<CollHeader>& headers,
                           std::vector<int>& culprits);

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
// rank 1: why", #3 the communicator's number (number), which seq, the transport's own count,
// equals until the communicator has a device side.
struct CallContext {
  const char* name = "";
  uint64_t seq = 0;  // the transport's: its calls, one after another (slots go by its parity)
  int rank = 0;
  double timeout = 0;
  std::chrono::steady_clock::time_point deadline;
  Tracer* tracer = nullptr;
  uint64_t number = 0;  // the communicator's (Task::number)

  std::string message(const std::string& why) const {
    return std::string("dpcore ") + name + " #" + std::to_string(number) + " on rank " +
           std::to_string(rank) + ": " + why;
  }
  [[noreturn]] void fail(const std::string& why) const { throw CommError(message(why)); }
  bool expired(std::chrono::steady_clock::time_point now) const { return now > deadline; }
  std::string timedOut(const std::string& waitingFor) const;  // "timed out after 2 s waiting..."
};

}  // namespace dpcore
