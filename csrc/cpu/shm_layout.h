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
#include <vector>

#include "dpcore/header.h"
#include "dpcore/limits.h"

namespace dpcore {

constexpr size_t kCacheLine = 64;

struct alignas(kCacheLine) Counter {
  std::atomic<uint64_t> value;
};

struct SegmentControl {
  Counter abort;  // 0, or 1 + the rank that failed first
  char reason[512];
};

// How a rank sleeps while it waits (shm_wait.h): it sets `sleeping`, then sleeps on the futex
// word `count`; a peer that has just posted what the rank may be waiting for bumps `count` and
// wakes it, but only if `sleeping` is set, so posting costs no system call while nobody sleeps.
struct alignas(kCacheLine) Doorbell {
  std::atomic<uint32_t> count;
  std::atomic<uint32_t> sleeping;
};

constexpr uint64_t kWaitingForSeveral = ~uint64_t{0};

struct alignas(kCacheLine) RankControl {
  Counter arrived;  // sequence number of the last collective this rank entered
  // The communicator's number (CallContext::number) of the last call this rank entered on this
  // transport, and, in the host transport's segment, on the device side (ShmTransport::
  // enterElsewhere): a peer waiting for this rank's call on one side finds it on the other.
  Counter entered;
  Counter elsewhere;
  // An exchange without peer reads (algo/exchange.h: exchangeInRounds): the last round whose
  // window this rank published in its one-shot slots (ShmTransport::signalRound's marks, which
  // grow across calls).
  Counter published;
  Counter pid;
  Counter reduced;  // direct all_reduce: the last collective whose own chunk is complete
  Counter done;   // direct algorithm: the last collective whose reads from peers are finished
  Counter probe;  // address of a word in this rank's memory holding kProbeValue (canReadPeers)
  Counter left;   // 1 once this rank closed its communicator: it will call nothing more
  // While this rank sleeps waiting: 1 + the rank it waits for, kWaitingForSeveral, or 0; so a
  // timed-out rank can follow the waits to the rank that holds them all up.
  Counter waitingFor;
  CollHeader header[2];  // by sequence parity: peers may still read the previous one
  Doorbell doorbell;
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
  std::vector<int> names = {};  // what messages call each rank (between nodes: its world rank)
};

class ShmLayout {
 public:
  // Data in a slot starts at the same offset modulo 4 KiB as the user buffer it is copied to or
  // from (each rank publishes that offset in its header): a copy whose destination sits a few
  // bytes above its source modulo 4 KiB stalls on false store-to-load aliasing
  // (benchmarks/results/2026-12-01-structure.md, "Numbers the comments used to quote").
  static constexpr size_t kAlignSpan = 4096;
  static uint32_t alignOf(const void* p) {
    return static_cast<uint32_t>(reinterpret_cast<uintptr_t>(p) % kAlignSpan);
  }

  explicit ShmLayout(const ShmConfig& c) : c_(c) {
    checkRingSlots(c.fifoSlots, c.slotBytes);  // before the segment is sized by them
    rankOff_ = roundUp(sizeof(SegmentControl));
    fifoOff_ = rankOff_ + c.size * sizeof(RankControl);
    slotsOff_ = roundUp(fifoOff_ + c.size * sizeof(FifoControl), 4096);
    oneShotOff_ = slotsOff_ + c.size * c.fifoSlots * slotStride();
    bytes_ = oneShotOff_ + c.size * 2 * oneShotStride();
  }
  size_t bytes() const { return bytes_; }

  SegmentControl* control(char* base) const { return reinterpret_cast<SegmentControl*>(base); }
  RankControl* rank(char* base, int r) const {
    return reinterpret_cast<RankControl*>(base + rankOff_) + r;
  }
  FifoControl* fifo(char* base, int r) const {
    return reinterpret_cast<FifoControl*>(base + fifoOff_) + r;
  }
  // Page-aligned slot starts; add the data's align offset.
  char* fifoSlot(char* base, int r, uint64_t index) const {
    return base + slotsOff_ + (r * c_.fifoSlots + index % c_.fifoSlots) * slotStride();
  }
  char* oneShotSlot(char* base, int r, uint64_t seq) const {
    return base + oneShotOff_ + (r * 2 + seq % 2) * oneShotStride();
  }
  size_t oneShotStride() const { return roundUp(c_.oneShotBytes + kAlignSpan, 4096); }

 private:
  static size_t roundUp(size_t x, size_t to = kCacheLine) { return (x + to - 1) / to * to; }
  size_t slotStride() const { return roundUp(c_.slotBytes + kAlignSpan, 4096); }
  ShmConfig c_;
  size_t rankOff_, fifoOff_, slotsOff_, oneShotOff_, bytes_;
};

}  // namespace dpcore
