// What lives in a communicator's shared-memory segment, and where.
//
//   SegmentControl                         abort flag and the first failure's reason
//   RankControl[n]                         per rank: arrival counter, pid, call headers
//   FifoControl[n]                         per rank: its incoming FIFO's head and tail
//   fifo slots [n][slots][slotBytes]       rank r's incoming FIFO (filled by rank r-1)
//   one-shot slots [n][2][oneShotBytes]    per rank, by sequence parity
//
// Every counter sits on its own cache line and has a single writer, so a rank polling a peer's
// counter never shares a line with anything that peer writes for someone else.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "dpcore/types.h"

namespace dpcore {

constexpr size_t kCacheLine = 64;

struct alignas(kCacheLine) Counter {
  std::atomic<uint64_t> value;
};

struct SegmentControl {
  Counter abort;  // 0, or 1 + the rank that failed first
  char reason[512];
};

struct alignas(kCacheLine) RankControl {
  Counter arrived;  // sequence number of the last collective this rank entered
  Counter pid;
  CollHeader header[2];  // by sequence parity: peers may still read the previous one
};

struct alignas(kCacheLine) FifoControl {
  Counter head;  // slots filled, written by the sender (rank r-1) only
  Counter tail;  // slots emptied, written by the receiver (rank r) only
};

struct ShmConfig {
  int size;             // ranks in the communicator (all on this node)
  int fifoSlots;        // depth of each FIFO
  size_t slotBytes;     // bytes per FIFO slot: the segment size of the ring
  size_t oneShotBytes;  // largest per-rank payload of the one-shot algorithm
};

class ShmLayout {
 public:
  explicit ShmLayout(const ShmConfig& c) : c_(c) {
    rankOff_ = roundUp(sizeof(SegmentControl));
    fifoOff_ = rankOff_ + c.size * sizeof(RankControl);
    slotsOff_ = roundUp(fifoOff_ + c.size * sizeof(FifoControl), 4096);
    oneShotOff_ = slotsOff_ + c.size * c.fifoSlots * roundUp(c.slotBytes, 4096);
    bytes_ = oneShotOff_ + c.size * 2 * roundUp(c.oneShotBytes, 4096);
  }
  size_t bytes() const { return bytes_; }

  SegmentControl* control(char* base) const { return reinterpret_cast<SegmentControl*>(base); }
  RankControl* rank(char* base, int r) const {
    return reinterpret_cast<RankControl*>(base + rankOff_) + r;
  }
  FifoControl* fifo(char* base, int r) const {
    return reinterpret_cast<FifoControl*>(base + fifoOff_) + r;
  }
  char* fifoSlot(char* base, int r, uint64_t index) const {
    size_t stride = roundUp(c_.slotBytes, 4096);
    return base + slotsOff_ + (r * c_.fifoSlots + index % c_.fifoSlots) * stride;
  }
  char* oneShotSlot(char* base, int r, uint64_t seq) const {
    size_t stride = roundUp(c_.oneShotBytes, 4096);
    return base + oneShotOff_ + (r * 2 + seq % 2) * stride;
  }

 private:
  static size_t roundUp(size_t x, size_t to = kCacheLine) { return (x + to - 1) / to * to; }
  ShmConfig c_;
  size_t rankOff_, fifoOff_, slotsOff_, oneShotOff_, bytes_;
};

}  // namespace dpcore
