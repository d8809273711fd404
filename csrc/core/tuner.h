// algo="auto" past the one-shot sizes, where the ranks may read each other's memory: the ring or
// the direct algorithm, whichever has lately been faster for this collective, size class and
// kind of buffer. Measured, not predicted: on a shared machine which of the two wins past the
// cache flips with where the host puts the ranks' cores, during a run, so a fixed threshold is
// wrong half of the time and a few timed calls are not (benchmarks/results/2026-12-01-cpu.md).
//
// Each arm is judged in runs: the first call after a switch pays for the switch (cold slots, a
// peer still elsewhere), so it is not counted, and the next kWindow calls are. An arm's estimate
// is the fastest call of its window: noise on a shared machine only ever adds time, in bursts
// that a median of a few consecutive calls follows but a minimum does not.
//
// A size class starts with a run of each arm, then runs the faster one, with a run of the
// other now and then in case the machine changed: after 128 calls, and twice as long after
// each run that changed nothing (up to 2048), so an arm twice as slow costs 4 % at first and
// less and less while it stays slower. Any change of the faster arm starts the count at 128
// again, so a wrong switch is undone soon. Only rank 0 tunes. Its pick travels in its header, so
// every rank runs the same algorithm; and ring and direct reduce in the same order
// (algo/direct.h, reduceOwnChunk), so the pick never changes a result's bits.
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
  static constexpr uint32_t kMinPeriod = 128, kMaxPeriod = 2048;  // calls between explorations
  // A new class's first run of each arm, after which it runs the faster one: a benchmark that
  // wants auto's steady state makes this many untimed calls first (dpcore.bench does).
  static constexpr int kSettleCalls = 2 * (kWindow + 1);

  // DPCORE_TUNE=0's fixed choice instead of timings: direct from 64 MiB, where the tuner took
  // it with the ranks' cores on different dies (on one die the ring stays ahead there: no fixed
  // threshold suits both), and all_gather on shared buffers at any size, where direct's plain
  // copy beat the ring in both.
  static constexpr size_t kFixedDirectMin = 64 << 20;
  static bool fixedPick(Coll coll, size_t bytes, BufferKind kind) {
    return bytes >= kFixedDirectMin || (coll == Coll::kAllGather && kind.shared);
  }

  // true: run direct, false: run the ring.
  bool pickDirect(Coll coll, size_t bytes, BufferKind kind) {
    Class& c = classes_[key(coll, bytes, kind)];
    if (c.runLeft == 0) {
      int best = c.arms[1].estimate() < c.arms[0].estimate() ? 1 : 0;
      if (c.arms[0].samples == 0 || c.arms[1].samples == 0) {
        startRun(c, c.arms[0].samples == 0 ? 0 : 1);  // the ring first, then direct
      } else if (best != c.best) {  // after an exploration, or the faster arm slowed down
        c.best = c.arm = best;
        c.exploring = false;
        c.period = kMinPeriod;
        c.sinceExplore = 0;
      } else if (c.exploring) {  // a run of the other arm that changed nothing
        c.exploring = false;
        c.period = std::min(2 * c.period, kMaxPeriod);
        c.arm = best;
      } else if (++c.sinceExplore >= c.period) {
        c.sinceExplore = 0;
        c.exploring = true;
        startRun(c, 1 - best);
      } else {
        c.arm = best;
      }
    }
    if (c.runLeft > 0) --c.runLeft;
    return c.arm == 1;
  }

  void record(Coll coll, size_t bytes, BufferKind kind, bool direct, double seconds) {
    Class& c = classes_[key(coll, bytes, kind)];
    int arm = direct ? 1 : 0;
    if (arm != c.lastArm) {  // the switch's own call
      c.lastArm = arm;
      return;
    }
    Arm& a = c.arms[arm];
    // seconds per byte: sizes within a class differ by up to 2x
    a.perByte[a.samples++ % kWindow] = seconds / static_cast<double>(std::max<size_t>(bytes, 1));
  }

 private:
  struct Arm {
    double perByte[kWindow] = {};
    uint64_t samples = 0;
    double estimate() const {  // an arm not yet timed counts as infinitely slow
      if (samples == 0) return 1e30;
      return *std::min_element(perByte, perByte + std::min<uint64_t>(samples, kWindow));
    }
  };
  struct Class {
    Arm arms[2];  // ring, direct
    int arm = 0;       // the arm this class runs now
    int best = 0;      // the faster arm, as last decided
    int lastArm = -1;  // the arm of its last recorded call
    int runLeft = 0;   // calls left in a run of `arm` that started with a switch
    bool exploring = false;  // in a run of the slower arm
    uint32_t sinceExplore = 0, period = kMinPeriod;
  };
  static void startRun(Class& c, int arm) {
    c.arm = arm;
    c.runLeft = kWindow + 1;  // the switch's call, then a window
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
