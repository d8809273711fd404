// gather, scatter and all_to_all: one schedule of moves, run by two executors. A transfer takes
// bytes at an offset of one rank's input to an offset of another's output (or its own):
//
//   gather:     rank p's shard -> the root's output, at the sum of the shards before p
//   scatter:    the root's input, at the sum of the shards before q -> rank q's output (an
//               input in pieces, one per rank, is read flat alike: dpcore/task.h's inputAt)
//   all_to_all: rank p's splits[p][q] elements, after those p sends ranks before q -> rank q's
//               output, after those q takes from ranks before p (nullptr splits: count / n each)
//
// A rank visits its transfers in pairwise step order: at step k it sends to rank + k and takes
// from rank - k (step 0: its own part), so that at every step each rank serves one reader.
// Bytes per rank: the root takes in or serves (n-1)/n S; all_to_all sends and takes (n-1)/n S.
//
// The executors:
//   exchangeOverMemory: every transfer is one copy, out of the source's one-shot payload where
//     it published one, else out of its input in place (readInput), in which case every rank
//     waits at the end until all are done reading (DirectStage::kDone), as direct does. A
//     gather's shards that were not published are pushed instead, where the peer memory writes
//     (writeOutput): each sender writes its shard into the root's output, all at once, where
//     the root would read them one after another (its time is the call's); the same final
//     wait tells the root they have landed.
//   exchangeOverMessages: where no peer memory is mapped (MPI), each transfer is one message:
//     the receives of what comes here are posted, then the sends of what goes out, then the wait.
// Messages, the interface of the second:
//   recv(from, dst, bytes), send(to, src, bytes)   post a transfer's message
//   copy(dst, src, bytes)                            this rank's own part
//   wait()                                           until every posted message is done
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "algo/direct.h"
#include "dpcore/header.h"
#include "dpcore/task.h"

namespace dpcore {

inline bool isExchange(Coll coll) {
  return coll == Coll::kGather || coll == Coll::kScatter || coll == Coll::kAllToAll;
}

struct Transfer {
  int from, to;
  size_t fromAt, toAt, bytes;  // bytes into from's input and to's output
};

// The schedule of one call, from the task and every rank's header (gather's shards: the
// counts; scatter's: the totals).
class ExchangePlan {
 public:
  ExchangePlan(const Task& task, const std::vector<CollHeader>& headers)
      : coll_(task.coll), root_(task.root), n_(static_cast<int>(headers.size())),
        elem_(dtypeSize(task.dtype)), splits_(task.splits), shards_(n_ + 1, 0),
        even_(task.count / (n_ ? n_ : 1)) {
    for (int r = 0; r < n_; ++r) {  // where rank r's shard starts in the root's buffer
      shards_[r + 1] = shards_[r] + (coll_ == Coll::kScatter ? headers[r].total : headers[r].count);
    }
  }

  int size() const { return n_; }
  Transfer transfer(int from, int to) const {
    Transfer t{from, to, 0, 0, 0};
    switch (coll_) {
      case Coll::kGather:
        if (to == root_) t = {from, to, 0, shards_[from], shards_[from + 1] - shards_[from]};
        break;
      case Coll::kScatter:
        if (from == root_) t = {from, to, shards_[to], 0, shards_[to + 1] - shards_[to]};
        break;
      default:  // all_to_all
        if (!splits_) {
          t = {from, to, to * even_, from * even_, even_};
          break;
        }
        for (int q = 0; q < to; ++q) t.fromAt += splits_[from * n_ + q];
        for (int p = 0; p < from; ++p) t.toAt += splits_[p * n_ + to];
        t.bytes = splits_[from * n_ + to];
    }
    t.fromAt *= elem_;
    t.toAt *= elem_;
    t.bytes *= elem_;
    return t;
  }

  // visit(transfer, sends): this rank's non-empty transfers in step order, each once; sends:
  // whether this rank sends it (at step 0 it both sends and takes it).
  template <class Visit>
  void forEach(int rank, Visit visit) const {
    for (int k = 0; k < n_; ++k) {
      const Transfer out = transfer(rank, (rank + k) % n_);
      if (out.bytes) visit(out, true);
      const Transfer in = transfer((rank + n_ - k) % n_, rank);
      if (k && in.bytes) visit(in, false);
    }
  }

 private:
  Coll coll_;
  int root_, n_;
  size_t elem_;
  const uint64_t* splits_;
  std::vector<uint64_t> shards_;  // elements: shard r is shards_[r] .. shards_[r + 1]
  size_t even_;                   // all_to_all without splits: elements to each rank
};

// Whether a source publishes its input in its one-shot slot under kAuto: small inputs (one copy
// in, one out, no process_vm_readv and no final wait), unless the input already lies in memory
// the peers map (comm.alloc), which they read with one plain copy. readsAnywhere: whether the
// peers could read it where it lies otherwise (shared memory: yes; the device: only regions),
// else one_shot takes every input its slot holds.
constexpr size_t kExchangeOneShotBytes = 64 << 10;
inline Algo exchangePick(const Task& task, size_t oneShotBytes, bool sharedInput,
                         bool readsAnywhere) {
  const size_t bytes = task.count * dtypeSize(task.dtype);
  const bool fits = bytes <= oneShotBytes && (bytes <= kExchangeOneShotBytes || !readsAnywhere);
  return fits && !sharedInput ? Algo::kOneShot : Algo::kDirect;
}

// published(r): whether rank r's input is in its payload (one_shot, or its kAuto pick).
template <class Payloads, class Peers, class Published>
void exchangeOverMemory(Payloads& payloads, Peers& peers, const ExchangePlan& plan,
                        const Task& task, int rank, Published published) {
  char* out = static_cast<char*>(task.out);
  bool everyPayload = true;
  for (int r = 0; r < plan.size(); ++r) everyPayload = everyPayload && published(r);
  const bool stream = peers.streams(task.total * dtypeSize(task.dtype));  // large outputs
  auto pushed = [&](const Transfer& t) {
    if constexpr (Peers::kWritesOutputs) return task.coll == Coll::kGather && !published(t.from);
    else return false;
  };
  plan.forEach(rank, [&](const Transfer& t, bool) {  // each rank takes what comes to it
    char* dst = out + t.toAt;
    if constexpr (Peers::kWritesOutputs) {
      if (t.from == rank && t.to != rank && pushed(t)) {
        peers.writeOutput(t.to, t.toAt, inputAt(task, t.fromAt), t.bytes, stream);
      }
    }
    if (t.to != rank) return;
    if (t.from == rank) {
      const char* src = inputAt(task, t.fromAt);
      if (src != dst) peers.copyToOutput(dst, src, t.bytes, stream);
    } else if (pushed(t)) {
      // its sender writes it
    } else if (published(t.from)) {
      payloads.copy(dst, payloads.payload(t.from) + t.fromAt, t.bytes);
    } else {
      peers.readInput(t.from, t.fromAt, dst, t.bytes, stream);
    }
  });
  if (everyPayload) return;  // the payloads stay until the peers' next call
  // our input must not change while a peer reads it; the root's output is whole once all pushed
  peers.signal(DirectStage::kDone);
  peers.waitAll(DirectStage::kDone);
}

// Where the ranks may not read each other's memory (shared memory where process_vm_readv is
// refused: a container's default seccomp), every input passes through its rank's one-shot slots
// a window at a time. In round k each rank publishes bytes [kW, (k+1)W) of its input, and takes
// from the peers' slots the parts of its transfers that lie there. largest: the largest input of
// any rank, in bytes (every rank's header has it), so every rank makes as many rounds.
//
// Two slots a rank, used in turn, so that a rank fills one while slower peers still take from
// the other: one wait for the peers a round. Round k's slot held round k-2, and a rank writes it
// only after it saw every rank publish round k-1, which each did after taking round k-2: so no
// rank runs two windows ahead of a peer's reads. The last round lies in slot 0, the call's own,
// which stays until the peers' next call, as one_shot's payloads; slot 1 is free then, its last
// round (count-2) taken by all before round count-1 was published everywhere.
//   window(), slot(r, i)                   the slots: rank r's slot i (0, 1), W bytes each
//   publish(k), waitPublished(k)           this rank's window of round k is in its slot / all are
template <class Rounds>
void exchangeInRounds(Rounds& rounds, const ExchangePlan& plan, const Task& task, int rank,
                      size_t largest) {
  char* out = static_cast<char*>(task.out);
  const size_t window = rounds.window(), mine = task.count * dtypeSize(task.dtype);
  const bool stream = rounds.streams(task.total * dtypeSize(task.dtype));
  plan.forEach(rank, [&](const Transfer& t, bool) {  // this rank's own shard: no slot
    if (t.from != rank || t.to != rank) return;
    const char* src = inputAt(task, t.fromAt);
    if (src != out + t.toAt) rounds.copyToOutput(out + t.toAt, src, t.bytes, stream);
  });
  const uint64_t count = (largest + window - 1) / window;
  for (uint64_t k = 0; k < count; ++k) {
    const size_t lo = k * window, hi = lo + window;
    const int slot = static_cast<int>((count - 1 - k) % 2);  // the last round in slot 0
    if (lo < mine) {
      copyInput(task, lo, std::min(hi, mine) - lo, rounds.slot(rank, slot),
                [&](char* dst, const char* src, size_t bytes) { rounds.copy(dst, src, bytes); });
    }
    rounds.publish(k);
    rounds.waitPublished(k);
    plan.forEach(rank, [&](const Transfer& t, bool) {
      if (t.to != rank || t.from == rank) return;
      const size_t from = std::max(lo, t.fromAt), to = std::min(hi, t.fromAt + t.bytes);
      if (from < to) {
        rounds.copy(out + t.toAt + (from - t.fromAt), rounds.slot(t.from, slot) + (from - lo),
                    to - from);
      }
    });
  }
}

template <class Messages>
void exchangeOverMessages(Messages& m, const ExchangePlan& plan, const Task& task, int rank) {
  char* out = static_cast<char*>(task.out);
  plan.forEach(rank, [&](const Transfer& t, bool sends) {
    if (t.from == t.to) return;
    if (!sends) m.recv(t.from, out + t.toAt, t.bytes);
  });
  plan.forEach(rank, [&](const Transfer& t, bool sends) {
    if (!sends) return;
    const char* src = inputAt(task, t.fromAt);
    if (t.from != t.to) {
      m.send(t.to, src, t.bytes);
    } else if (src != out + t.toAt) {
      m.copy(out + t.toAt, src, t.bytes);
    }
  });
  m.wait();
}

}  // namespace dpcore
