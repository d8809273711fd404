// algo="auto" past the one-shot sizes, where the ranks may read each other's memory: the ring or
// the direct algorithm, whichever has lately been faster for this collective, size class and
// kind of buffer. Measured, not predicted: on a shared machine which of the two wins past the
// cache flips with where the host puts the ranks' cores, during a run, so a fixed threshold is
// wrong half of the time and a few timed calls are not (benchmarks/results/2026-12-01-cpu.md).
//
// A class runs its incumbent arm, at first the fixed choice (fixedPick, DPCORE_TUNE=0's), so a
// user's loop of a new size starts on a safe algorithm, not on a trial. Now and then it tries
// the other arm, the challenger, for a run: the first call after a switch pays for the switch
// (cold slots, a peer still elsewhere), so it is not counted, and the next kWindow calls are.
// An arm's estimate is the fastest call of its window: noise on a shared machine only ever adds
// time, in bursts that a median of a few consecutive calls follows but a minimum does not.
//
// What a user's loop pays for that, and why it does not flip on noise:
//   - a trial stops after its first counted call if that is kGiveUp times the incumbent's
//     estimate: a clearly slower challenger costs two calls, not a run;
//   - the challenger takes over only if it beats the incumbent by kMargin, both before the trial
//     and in a run of the incumbent right after it (the confirmation), so a burst of noise over
//     one of the incumbent's windows is not enough;
//   - trials come after kWindow + 1 calls of a new class, then every kMinPeriod calls, twice as
//     far apart after each trial that changed nothing (up to kMaxPeriod): a challenger twice as
//     slow costs a few % at first and less and less while it stays slower. An incumbent that
//     has slowed (kChanged times its estimate when it was last judged, or past the challenger's
//     last estimate by kMargin: the machine changed) brings the next trial forward.
// Only rank 0 tunes. Its pick travels in its header, so every rank runs the same algorithm; and
// ring and direct reduce in the same order (algo/direct.h, reduceInRingOrder), so the pick never
// changes a result's bits.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <unordered_map>

#include "dpcore/types.h"

namespace dpcore {

// What a call's buffers are, beside its collective and size: direct's speed depends on it, so
// each kind is tuned apart. shared: from Communicator.alloc, which direct reads with a plain copy
// instead of a kernel copy. in place: out of place, direct also copies this rank's own part
// into the output, a copy the ring hides among its steps, so the ring's lead out of place says
// nothing of in place.
struct BufferKind {
  bool shared = false;
  bool inPlace = true;
};

class Tuner {
 public:
  static constexpr int kWindow = 4;  // an arm's estimate: the fastest of its last 4 calls
  static constexpr int kRun = kWindow + 1;  // a run of an arm: the switch's call, then a window
  static constexpr uint32_t kMinPeriod = 128, kMaxPeriod = 2048;  // calls between trials
  static constexpr double kMargin = 0.1;  // a challenger must be 10 % faster to take over
  static constexpr double kGiveUp = 1.5;  // a trial's first counted call this much slower: stop
  static constexpr double kChanged = 1.5;  // the incumbent this much slower: try the other now
  // A new class's first run, its trial of the challenger and the confirmation, after which it
  // runs the faster arm: a benchmark that wants auto's steady state makes this many untimed
  // calls first (dpcore.bench does).
  static constexpr int kSettleCalls = 3 * kRun;

  // DPCORE_TUNE=0's fixed choice instead of timings, and the tuner's first: direct from 64 MiB,
  // where the tuner took it with the ranks' cores on different dies (on one die the ring stays
  // ahead there: no fixed threshold suits both), and all_gather on shared buffers at any size,
  // where direct's plain copy beat the ring in both. Never reduce: under direct the root alone
  // reads and reduces all (n-1) S, where the chain has every peer copy its part at once, so
  // direct's lead grows less likely with n; where it does lead, the timings find it.
  static constexpr size_t kFixedDirectMin = 64 << 20;
  static bool fixedPick(Coll coll, size_t bytes, BufferKind kind) {
    if (coll == Coll::kReduce) return false;
    return bytes >= kFixedDirectMin || (coll == Coll::kAllGather && kind.shared);
  }

  // true: run direct, false: run the ring.
  bool pickDirect(Coll coll, size_t bytes, BufferKind kind) {
    auto [it, fresh] = classes_.try_emplace(key(coll, bytes, kind));
    Class& c = it->second;
    if (fresh) c.incumbent = c.arm = fixedPick(coll, bytes, kind) ? 1 : 0;
    if (c.runLeft == 0) next(c);
    if (c.runLeft > 0) --c.runLeft;
    return c.arm == 1;
  }

  void record(Coll coll, size_t bytes, BufferKind kind, bool direct, double seconds) {
    Class& c = classes_[key(coll, bytes, kind)];
    const int arm = direct ? 1 : 0;
    if (arm != c.lastArm) {  // the switch's own call
      c.lastArm = arm;
      return;
    }
    // seconds per byte: sizes within a class differ by up to 2x
    const double perByte = seconds / static_cast<double>(std::max<size_t>(bytes, 1));
    c.arms[arm].add(perByte);
    if (c.phase == Phase::kTrial && arm != c.incumbent &&
        perByte > kGiveUp * c.arms[c.incumbent].estimate()) {
      c.runLeft = 0;  // clearly slower: back to the incumbent at the next call
    }
  }

 private:
  enum class Phase { kSteady, kTrial, kConfirm };
  struct Arm {
    double perByte[kWindow] = {};
    uint64_t samples = 0;
    void add(double t) { perByte[samples++ % kWindow] = t; }
    double estimate() const {  // an arm not yet timed counts as infinitely slow
      if (samples == 0) return 1e30;
      return *std::min_element(perByte, perByte + std::min<uint64_t>(samples, kWindow));
    }
  };
  struct Class {
    Arm arms[2];        // ring, direct
    int incumbent = 0;  // the arm the class runs between trials
    int arm = 0;        // the arm it runs now
    int lastArm = -1;   // the arm of its last recorded call
    int runLeft = kRun;  // calls left in the current run (a new class: the incumbent's first)
    Phase phase = Phase::kSteady;
    double before = 0;   // the incumbent's estimate when the trial began
    double judged = 0;   // the incumbent's estimate when the last trial ended
    uint32_t sinceTrial = 0, period = kMinPeriod;
  };

  // Called when a run ends (and at every call between runs): what the class runs next.
  static void next(Class& c) {
    const int challenger = 1 - c.incumbent;
    const Arm &mine = c.arms[c.incumbent], &other = c.arms[challenger];
    switch (c.phase) {
      case Phase::kTrial:
        if (other.samples > 0 && beats(other.estimate(), c.before)) {
          startRun(c, Phase::kConfirm, c.incumbent);  // promising: see the incumbent again
        } else {
          settle(c, std::min(2 * c.period, kMaxPeriod));  // the trial changed nothing
        }
        return;
      case Phase::kConfirm:
        if (beats(other.estimate(), std::min(c.before, mine.estimate()))) {
          c.incumbent = challenger;
          settle(c, kMinPeriod);  // after a change, look back soon
        } else {
          settle(c, std::min(2 * c.period, kMaxPeriod));
        }
        return;
      case Phase::kSteady:
        break;
    }
    ++c.sinceTrial;
    // the first trial follows the first run; later ones come every period, or sooner where the
    // incumbent has slowed, against itself or against what the challenger last did
    const bool slowed = other.samples > 0 && c.sinceTrial > kRun &&
                        (mine.estimate() > kChanged * c.judged ||
                         beats(other.estimate(), mine.estimate()));
    if (other.samples == 0 || c.sinceTrial >= c.period || slowed) {
      c.before = mine.estimate();
      startRun(c, Phase::kTrial, challenger);
    }
  }
  static bool beats(double challenger, double incumbent) {
    return challenger < (1 - kMargin) * incumbent;
  }
  // A trial or confirmation judges the arm by this run alone: an old window of the machine's
  // better days must not speak for it.
  static void startRun(Class& c, Phase phase, int arm) {
    c.phase = phase;
    c.arm = arm;
    c.runLeft = kRun;
    c.arms[arm].samples = 0;
  }
  static void settle(Class& c, uint32_t period) {
    c.phase = Phase::kSteady;
    c.arm = c.incumbent;
    c.judged = c.arms[c.incumbent].estimate();
    c.period = period;
    c.sinceTrial = 0;
  }
  // A size class per power of two of the collective's bytes, per collective and kind of buffer.
  static int key(Coll coll, size_t bytes, BufferKind kind) {
    int log2 = 0;
    while ((bytes >> log2) > 1) ++log2;
    return ((static_cast<int>(coll) * 64 + log2) * 2 + kind.shared) * 2 + kind.inPlace;
  }
  std::unordered_map<int, Class> classes_;
};

}  // namespace dpcore
