// algo="auto" past the one-shot sizes, where the ranks may read each other's memory: the ring or
// the direct algorithm, whichever has lately been faster for this collective and size class.
//
// Why measure instead of predict: on the shared VM this project is built on, which of the two
// wins flips with where the host puts the ranks' cores, and it flips during a run. With a shared
// L3 (a 110 ns cross-core round trip) the ring's cache-to-cache FIFO wins up to 64 MiB; with the
// cores on different dies (500-600 ns) every FIFO slot crosses dies dirty and the ring falls
// behind direct's bulk kernel copies from 4-16 MiB (benchmarks/results/2026-12-01-cpu.md). A
// fixed threshold is wrong half of the time; a few timed calls are not.
//
// Each arm is judged in runs: the first call after a switch pays for the switch (cold FIFO
// slots, a peer that is still elsewhere), so it is not counted, and the next kWindow calls are.
// A size class starts with a run of each, then runs the faster one, with a run of the other
// now and then in case the machine changed: after 64 calls, and twice as long after each run
// that changed nothing (up to 1024), so a slower arm costs a few percent at first and less
// and less while it stays slower. Only rank 0 tunes. Its pick travels in
// its header, so every rank runs the same algorithm; and ring and direct reduce in the same
// order (ShmComm::reduceOwnChunk), so the pick never changes a result's bits.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <unordered_map>

#include "dpcore/types.h"

namespace dpcore {

class Tuner {
 public:
  static constexpr int kWindow = 3;  // an arm's estimate: the median of its last 3 calls
  static constexpr uint32_t kMinPeriod = 64, kMaxPeriod = 1024;  // calls between explorations

  // true: run direct, false: run the ring.
  bool pickDirect(Coll coll, size_t bytes) {
    Class& c = classes_[key(coll, bytes)];
    if (c.runLeft == 0) {
      int best = c.arms[1].estimate() < c.arms[0].estimate() ? 1 : 0;
      if (c.arms[0].samples == 0 || c.arms[1].samples == 0) {
        startRun(c, c.arms[0].samples == 0 ? 0 : 1);  // the ring first, then direct
      } else if (c.exploring) {  // a run of the other arm just ended: did it change anything?
        c.exploring = false;
        c.period = best == c.best ? std::min(2 * c.period, kMaxPeriod) : kMinPeriod;
        c.best = c.arm = best;
      } else if (++c.sinceExplore >= c.period) {
        c.sinceExplore = 0;
        c.exploring = true;
        c.best = best;
        startRun(c, 1 - best);
      } else {
        c.arm = best;
      }
    }
    if (c.runLeft > 0) --c.runLeft;
    return c.arm == 1;
  }

  void record(Coll coll, size_t bytes, bool direct, double seconds) {
    Class& c = classes_[key(coll, bytes)];
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
    // The median of the window (a missing sample counts as infinitely slow): not the best,
    // since an arm whose times scatter widely would win on one lucky call.
    double estimate() const {
      if (samples < static_cast<uint64_t>(kWindow)) return samples ? perByte[0] : 1e30;
      double s[kWindow];
      std::copy(perByte, perByte + kWindow, s);
      std::nth_element(s, s + kWindow / 2, s + kWindow);
      return s[kWindow / 2];
    }
  };
  struct Class {
    Arm arms[2];  // ring, direct
    int arm = 0;       // the arm this class runs now
    int lastArm = -1;  // the arm of its last recorded call
    int runLeft = 0;   // calls left in a run of `arm` that started with a switch
    int best = 0;      // the faster arm before the exploration in progress
    bool exploring = false;
    uint32_t sinceExplore = 0, period = kMinPeriod;
  };
  static void startRun(Class& c, int arm) {
    c.arm = arm;
    c.runLeft = kWindow + 1;  // the switch's call, then a window
  }
  // A size class per power of two of the collective's bytes, per collective.
  static int key(Coll coll, size_t bytes) {
    int log2 = 0;
    while ((bytes >> log2) > 1) ++log2;
    return static_cast<int>(coll) * 64 + log2;
  }
  std::unordered_map<int, Class> classes_;
};

}  // namespace dpcore
