// What a communicator's numbers may be, so that none becomes an overflow or a division by zero
// deep inside a collective: timeouts past what the clock can count mean "no limit", and the
// ring's slots (DPCORE_FIFO_SLOTS, DPCORE_SLOT_BYTES) are refused when a transport is made
// unless every transport can divide by them. dpcore/settings.py checks the settings first and
// names them; these are the last line.
#pragma once

#include <chrono>
#include <stdexcept>
#include <string>

#include "dpcore/task.h"
#include "dpcore/types.h"

namespace dpcore {

// Waits this long or longer (inf included) have no limit: about 31 years, well inside the 292
// years steady_clock counts in nanoseconds.
constexpr double kForeverSeconds = 1e9;

// `seconds` after `now`, or time_point::max(): a deadline that never passes.
inline std::chrono::steady_clock::time_point deadlineAfter(
    std::chrono::steady_clock::time_point now, double seconds) {
  if (!(seconds < kForeverSeconds)) return std::chrono::steady_clock::time_point::max();
  return now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                   std::chrono::duration<double>(seconds));
}

// A ring step holds one slot of its incoming FIFO while it waits for one in the outgoing.
constexpr long long kRingMinSlots = 2;

// `slots` once checked: at least kRingMinSlots, each a whole number of the largest elements, so
// that a segment holds at least one element of every dtype.
// A one-shot call publishes its whole input: it must fit the slot (bad input, refused before
// anything is sent).
inline void checkOneShotFits(const Task& task, size_t slotBytes) {
  const size_t bytes = task.count * dtypeSize(task.dtype);
  if (task.algo == Algo::kOneShot && bytes > slotBytes) {
    throw std::invalid_argument("one_shot payload of " + std::to_string(bytes) +
                                " bytes exceeds its slot of " + std::to_string(slotBytes));
  }
}

inline size_t checkRingSlots(long long slots, size_t slotBytes) {
  if (slots < kRingMinSlots) {
    throw std::invalid_argument("dpcore: the ring needs at least " +
                                std::to_string(kRingMinSlots) + " slots per link, not " +
                                std::to_string(slots));
  }
  if (slotBytes == 0 || slotBytes % kMaxDTypeSize != 0) {
    throw std::invalid_argument("dpcore: a ring slot must hold a positive multiple of " +
                                std::to_string(kMaxDTypeSize) +
                                " bytes (the largest element), not " + std::to_string(slotBytes));
  }
  return static_cast<size_t>(slots);
}

}  // namespace dpcore
