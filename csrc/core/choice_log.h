// DPCORE_DEBUG=INFO's algorithm choices, as NCCL_DEBUG=INFO prints its own: a line on stderr the
// first time a communicator runs a collective of a dtype and power-of-two size class with an
// algorithm (auto resolved). The Tracer's whole-collective spans feed it, so off it costs what
// the trace costs off: one branch per collective and per step.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <set>
#include <string>
#include <tuple>

#include "dpcore/types.h"

namespace dpcore {

class ChoiceLog {
 public:
  bool on = false;

  // `prefix` opens every line (dpcore/setup/info.py: host, pid, rank).
  void start(const std::string& prefix) {
    prefix_ = prefix;
    on = true;
  }
  // A collective of `bytes` in all ran `algo` on `dtype` (codes).
  void note(const char* coll, int dtype, int algo, uint64_t bytes) {
    if (algo == static_cast<int>(Algo::kCountsOnly)) return;  // (all_)gather's shard lengths
    const int sizeClass = bytes ? 63 - __builtin_clzll(bytes) : -1;  // [2^k, 2^(k+1)) bytes
    if (!seen_.emplace(coll, dtype, sizeClass, algo).second) return;
    std::string size = sizeClass < 0 ? std::string("0 B")
                                     : ofPower(sizeClass) + " to " + ofPower(sizeClass + 1);
    std::string line = prefix_ + "algorithm: " + coll + " " +
                       dtypeName(static_cast<DType>(dtype)) + ", " + size + ": " +
                       algoName(static_cast<Algo>(algo)) + "\n";
    (void)!::write(2, line.data(), line.size());  // one write: the ranks' lines stay whole
  }

 private:
  static std::string ofPower(int k) {  // 2^k bytes, in the largest binary unit that divides it
    static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    return std::to_string(1ull << (k % 10)) + " " + units[k / 10];
  }
  std::string prefix_;
  std::set<std::tuple<std::string, int, int, int>> seen_;
};

}  // namespace dpcore
