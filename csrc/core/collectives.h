// Collectives over one transport, the same for every transport: one call at a time, each
//   1. numbered, with a deadline (CallContext), and refused once an earlier one failed;
//   2. matched: the transport carries every rank's header, and all ranks check them (call.h);
//      a call that matches but cannot work is refused by all alike, and breaks nothing;
//   3. run by the algorithm the call asked for, or for kAuto the one rank 0 picked (tuner.h);
//   4. on failure, told to the peers where the transport can, and the communicator broken:
//      peers may be anywhere in the schedule, so nothing further could match.
//
// What a Transport provides is core/contracts.h's, checked when Collectives<T> is made.
// cpu/shm_transport.h, mpi/mpi_transport.h and cuda/device_transport.h are the three; a next
// transport writes one and reuses everything here.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "algo/direct.h"
#include "algo/exchange.h"
#include "algo/one_shot.h"
#include "algo/ring.h"
#include "core/call.h"
#include "core/contracts.h"
#include "core/trace.h"
#include "core/tuner.h"
#include "dpcore/coll_table.h"
#include "dpcore/error.h"
#include "dpcore/limits.h"

namespace dpcore {

// Whether the input lies inside the output (all_gather), the output inside the input
// (reduce_scatter) or both are one buffer; broadcast is always in place.
inline bool inPlace(const Task& task) {
  const size_t elem = dtypeSize(task.dtype);
  auto in = reinterpret_cast<uintptr_t>(task.in), out = reinterpret_cast<uintptr_t>(task.out);
  switch (task.coll) {
    case Coll::kAllGather:
      return in >= out && in < out + task.total * elem;
    case Coll::kReduceScatter:
      return out >= in && out < in + task.count * elem;
    default:
      return in == out || task.coll == Coll::kBroadcast;
  }
}

template <class Transport>
class Collectives {
  static_assert(contract::isTransport<Transport>());

 public:
  // tune: kAuto picks by the tuner's timings; false: by its fixed thresholds (DPCORE_TUNE=0).
  template <class... Args>
  Collectives(bool tune, double timeoutSeconds, Args&&... transportArgs)
      : transport_(std::forward<Args>(transportArgs)...), tune_(tune),
        timeout_(timeoutSeconds) {}

  // Runs one collective; returns every rank's header (its call, as that rank made it). A gather
  // whose root sizes its out meets the root's round of lengths first (exchangeCounts), and then
  // the root's gather: two calls here, one for the caller.
  std::vector<CollHeader> run(const Task& task) {
    std::vector<CollHeader> headers = call(task, true);
    const bool metCounts = task.coll == Coll::kGather && task.algo != Algo::kCountsOnly &&
                           countsOnly(headers, task.root);
    return metCounts ? call(task, true) : headers;
  }
  // Matches the call without moving its data (the between-node all_reduce matches on the world,
  // then moves the data inside the nodes and across them).
  std::vector<CollHeader> match(const Task& task) { return call(task, false); }
  const CallContext& current() const { return call_; }  // the last call, for messages

  // Refuses bad input that this rank alone can see (InvalidCall), before anything is sent; on
  // the caller's thread too, before the call takes its number (Queued), so a call refused on one
  // rank leaves the ranks' counts alike.
  void validate(const Task& task) const {
    if (collInfo(task.coll).reduces && !dtypeReduces(task.dtype)) {  // dpcore/comm/ refuses it
      throw InvalidCall(std::string("dpcore: ") + dtypeName(task.dtype) +
                        " is moved, not reduced");
    }
    transport_.validate(exchangeTask(task));
  }

  // Every rank's count in `task` (all_gather's shards; gather's, on its root), through a
  // header-only collective: the task's coll, root, dtype, count and number, run as kCountsOnly.
  std::vector<size_t> exchangeCounts(Task task) {
    task.algo = Algo::kCountsOnly;
    std::vector<size_t> counts;
    for (const CollHeader& h : run(task)) counts.push_back(h.count);
    return counts;
  }

  // The first call on CUDA arrays, numbered `number`, meets the peers on this (the host)
  // transport before the device side is set up (Transport::meetElsewhere): as a call of its
  // own, whose failure breaks the communicator.
  void meetElsewhere(Coll coll, uint64_t number) {
    broken_.check();
    call_ = CallContext{collName(coll), seq_, transport_.name(transport_.rank()), timeout_,
                        deadlineAfter(std::chrono::steady_clock::now(), timeout_), &tracer_,
                        number};
    try {
      transport_.meetElsewhere(call_);
    } catch (const std::exception& e) {
      broken_.set(e.what());
      transport_.abort(e.what());
      throw;
    }
  }

  // This rank makes no more calls: the peers hear it rather than wait for one.
  void leave(const std::string& why) { transport_.leave(why); }
  void passOn(const std::string& news) {
    broken_.set(news);
    transport_.passOn(news);
  }
  Transport& transport() { return transport_; }
  Tracer& tracer() { return tracer_; }
  uint64_t sequence() const { return seq_; }
  void setTimeout(double seconds) { timeout_ = seconds; }
  // Collectives run by each algorithm (kAuto counted as what it ran), indexed by Algo.
  std::vector<uint64_t> algoCalls() const { return {algoCalls_, algoCalls_ + kNumAlgos}; }

 private:
  std::vector<CollHeader> call(const Task& task, bool moveData) {
    broken_.check();
    validate(task);
    ++seq_;
    const auto now = std::chrono::steady_clock::now();
    call_ = CallContext{collName(task.coll), seq_, transport_.name(transport_.rank()), timeout_,
                        deadlineAfter(now, timeout_), &tracer_,
                        task.number ? task.number : seq_};
    TraceSpan span(tracer_, call_.name, seq_, -1, task.total * dtypeSize(task.dtype));
    transport_.begin(call_);
    try {
      std::vector<CollHeader> headers = runOne(task, moveData);
      // a round of lengths is logged as one, also where a non-root's gather met it
      const int32_t ran = countsOnly(headers, task.root) ? static_cast<int32_t>(Algo::kCountsOnly)
                                                         : headers[0].chosen;
      span.describe(ran, static_cast<int>(task.dtype), static_cast<int>(task.op));
      return headers;
    } catch (const Refused&) {  // every rank refused it alike, before any data moved
      throw;
    } catch (const InvalidCall&) {
      throw;
    } catch (const std::exception& e) {
      broken_.set(e.what());
      transport_.abort(e.what());
      throw;
    }
  }

  std::vector<CollHeader> runOne(const Task& task, bool moveData) {
    const int rank = transport_.rank(), n = transport_.size();
    const size_t bytes = task.total * dtypeSize(task.dtype);
    CollHeader mine = headerOf(task, seq_);
    const typename Transport::Meta meta = transport_.annotate(task);
    mine.setMeta(meta);
    // kAuto: rank 0 picks, and its header carries the pick, so every rank runs the same
    // algorithm whatever buffers it passed.
    const bool timed = task.algo == Algo::kAuto && tune_ && !isExchange(task.coll);
    const BufferKind kind{transport_.sharedInput(meta), inPlace(task)};
    const Task sent = exchangeTask(task);
    if (sent.algo != task.algo) {
      mine.chosen = static_cast<int32_t>(sent.algo);  // this rank's own, as its peers see it
    } else if (task.algo == Algo::kAuto) {
      const bool direct = rank == 0 && (timed ? tuner_.pickDirect(task.coll, bytes, kind)
                                               : Tuner::fixedPick(task.coll, bytes, kind));
      mine.chosen = static_cast<int32_t>(direct ? Algo::kDirect : Algo::kRing);
    }
    std::vector<CollHeader> headers = transport_.exchange(sent, mine);
    const std::string wrong = mismatch(headers, mine, rank);
    if (!wrong.empty()) call_.fail(wrong);
    if (task.coll == Coll::kBarrier || countsOnly(headers, task.root)) return headers;
    std::vector<int> culprits;
    const std::string refused = isExchange(task.coll) ? exchangeMisfit(task, headers, culprits)
                                                      : misfit(headers, culprits);
    if (!refused.empty()) {
      if (std::find(culprits.begin(), culprits.end(), rank) != culprits.end()) {
        throw InvalidCall(call_.message(refused));
      }
      throw Refused(call_.message(refused));
    }
    const Algo algo = isExchange(task.coll) ? exchangeAlgo(headers)
                                            : static_cast<Algo>(headers[0].chosen);
    ++algoCalls_[static_cast<int>(algo)];
    if (!moveData) return headers;
    offsets_.assign(1, 0);  // the all-gather's shards, from every rank's header
    for (const CollHeader& h : headers) offsets_.push_back(offsets_.back() + h.count);
    using Clock = std::chrono::steady_clock;
    const Clock::time_point start = timed ? Clock::now() : Clock::time_point{};
    if (n == 1) {
      // Alone, every collective is a copy (avg divides by 1); broadcast is in place.
      if (task.coll != Coll::kBroadcast && task.in != task.out && task.count) {
        transport_.copyAlone(task.out, task.in, task.count * dtypeSize(task.dtype));
      }
    } else if (isExchange(task.coll)) {
      runExchange(task, headers);
    } else if (algo == Algo::kRing) {
      const RingCall ring{task, rank, n, offsets_.data(),
                          transport_.segmentBytes() / dtypeSize(task.dtype)};
      auto prims = transport_.prims(ring, headers);
      ringCollective(prims, ring);
      prims.finish();
    } else if (algo == Algo::kOneShot) {
      auto payloads = transport_.payloads(task, headers);
      oneShot(payloads, task, rank, n, offsets_.data());
    } else if constexpr (Transport::kPeerMemory) {
      auto peers = transport_.peerMemory(headers);
      direct(peers, task, rank, n, offsets_.data());
    } else {
      call_.fail(std::string("algorithm ") + algoName(algo) + " does not run on this transport");
    }
    if (timed && rank == 0) {
      std::chrono::duration<double> took = Clock::now() - start;
      tuner_.record(task.coll, bytes, kind, algo == Algo::kDirect, took.count());
    }
    return headers;
  }

  // gather, scatter, all_to_all (algo/exchange.h): kAuto is each rank's own pick, one_shot
  // where its input is small, else direct; the header carries it (chosen) for the readers.
  Task exchangeTask(const Task& task) const {
    Task sent = task;
    if constexpr (Transport::kPeerMemory) {
      if (isExchange(task.coll) && task.algo == Algo::kAuto) {
        using Peers = decltype(std::declval<Transport&>().peerMemory(
            std::declval<const std::vector<CollHeader>&>()));
        sent.algo = exchangePick(task, transport_.oneShotBytes(),
                                 Transport::sharedInput(transport_.annotate(task)),
                                 !Peers::kMapped);  // unmapped: read by a copy from anywhere
      }
    }
    return sent;
  }
  // What the call ran, alike on every rank: one_shot where every rank published its input.
  static Algo exchangeAlgo(const std::vector<CollHeader>& headers) {
    for (const CollHeader& h : headers) {
      if (h.chosen != static_cast<int32_t>(Algo::kOneShot)) return Algo::kDirect;
    }
    return Algo::kOneShot;
  }
  void runExchange(const Task& task, const std::vector<CollHeader>& headers) {
    const ExchangePlan plan(task, headers);
    const int rank = transport_.rank();
    if constexpr (Transport::kPeerMemory) {
      auto payloads = transport_.payloads(task, headers);
      auto peers = transport_.peerMemory(headers);
      if constexpr (!decltype(peers)::kMapped) {  // read by a copy, which may be refused
        if (!transport_.peerReads() && exchangeAlgo(headers) != Algo::kOneShot) {
          size_t largest = 0;
          for (const CollHeader& h : headers) largest = std::max<size_t>(largest, h.count);
          auto rounds = transport_.rounds();
          exchangeInRounds(rounds, plan, task, rank, largest * dtypeSize(task.dtype));
          return;
        }
      }
      exchangeOverMemory(payloads, peers, plan, task, rank, [&](int r) {
        return headers[r].chosen == static_cast<int32_t>(Algo::kOneShot);
      });
    } else {  // every algorithm: a message per transfer
      auto messages = transport_.messages(plan);
      exchangeOverMessages(messages, plan, task, rank);
    }
  }

  Transport transport_;
  bool tune_;
  double timeout_;
  uint64_t seq_ = 0;
  CallContext call_;
  Tracer tracer_;
  Tuner tuner_;  // rank 0's; the others follow its pick
  uint64_t algoCalls_[kNumAlgos] = {};
  std::vector<size_t> offsets_;
  Broken broken_;
};

}  // namespace dpcore
