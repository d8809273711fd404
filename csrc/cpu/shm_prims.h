// The ring's primitive verbs over shared-memory FIFOs. Rank r fills slots of rank r+1's FIFO
// and empties its own. Flow control is two counters per FIFO with one writer each: the sender
// may fill slot h once h - tail < slots; the receiver may read slot t once head > t. Release
// stores after the data and acquire loads before it order the slot contents with the counters.
//
// Slots are written by memcpy only, never by a reduce loop: memcpy writes whole cache lines
// without reading them first, while a reduce loop's stores must first fetch each line of the
// slot from the peer that read it last. With the two cores on different dies (the development
// VM, half of the time) that fetch is a 500 ns round trip, and writing the reduced segment into
// the next slot directly made a 2-rank all-reduce 2.5x slower (6 against 15 GB/s busbw); in
// the other half it changed nothing. So a reduction lands in local memory (the user's output,
// or scratch) and is copied on, and a forwarded segment is copied on from where it was kept.
#pragma once

#include <cstring>

#include "cpu/reduce.h"
#include "cpu/shm_comm.h"

namespace dpcore {

class ShmPrims {
 public:
  // sendAlign / recvAlign: where data sits in the next rank's slots and in ours (ShmLayout).
  // scratch: a slot's worth of local memory for recvReduceSend's partial sums.
  ShmPrims(ShmComm& comm, DType dtype, ReduceOp op, uint32_t sendAlign, uint32_t recvAlign,
           int stepsPerRound, char* scratch)
      : comm_(comm), dtype_(dtype), op_(op), elemSize_(dtypeSize(dtype)), scratch_(scratch),
        next_((comm.rank() + 1) % comm.size()),
        prev_((comm.rank() + comm.size() - 1) % comm.size()),
        divisor_(op == ReduceOp::kAvg ? comm.size() : 0),
        sendAlign_(sendAlign), recvAlign_(recvAlign), stepsPerRound_(stepsPerRound) {}

  void send(const void* src, size_t count) {
    TraceSpan span = step("send", count);
    std::memcpy(sendSlot(), src, count * elemSize_);
    postSend();
  }
  void recv(void* dst, size_t count) {
    TraceSpan span = step("recv", count);
    std::memcpy(dst, recvSlot(), count * elemSize_);
    postRecv();
  }
  void recvReduceSend(const void* src, size_t count) {
    TraceSpan span = step("recvReduceSend", count);
    reduce2(dtype_, op_, recvSlot(), src, scratch_, count, 0);
    std::memcpy(sendSlot(), scratch_, count * elemSize_);
    postSend();
    postRecv();
  }
  void recvReduceCopySend(const void* src, void* dst, size_t count) {
    TraceSpan span = step("recvReduceCopySend", count);
    reduce2(dtype_, op_, recvSlot(), src, dst, count, divisor_);
    std::memcpy(sendSlot(), dst, count * elemSize_);
    postSend();
    postRecv();
  }
  void recvReduceCopy(const void* src, void* dst, size_t count) {
    TraceSpan span = step("recvReduceCopy", count);
    reduce2(dtype_, op_, recvSlot(), src, dst, count, divisor_);
    postRecv();
  }
  void recvCopySend(void* dst, size_t count) {
    TraceSpan span = step("recvCopySend", count);
    std::memcpy(dst, recvSlot(), count * elemSize_);
    std::memcpy(sendSlot(), dst, count * elemSize_);
    postSend();
    postRecv();
  }
  void copySend(const void* src, void* dst, size_t count) {
    TraceSpan span = step("copySend", count);
    std::memcpy(sendSlot(), src, count * elemSize_);
    if (dst != src) std::memcpy(dst, src, count * elemSize_);
    postSend();
  }

 private:
  // Each verb is one step of one round; the trace labels it with its step in the round.
  TraceSpan step(const char* verb, size_t count) {
    return TraceSpan(comm_.tracer_, verb, comm_.sequence(), verbs_++ % stepsPerRound_,
                     count * elemSize_);
  }

  char* sendSlot() {
    FifoControl* f = comm_.fifo(next_);
    const uint64_t slots = comm_.config().fifoSlots, head = comm_.sendHead_;
    comm_.waitUntil([&] { return head - f->tail.value.load(std::memory_order_acquire) < slots; },
                    next_);
    return comm_.fifoSlot(next_, head) + sendAlign_;
  }
  void postSend() {
    comm_.fifo(next_)->head.value.store(++comm_.sendHead_, std::memory_order_release);
    comm_.notify(next_);
  }
  const char* recvSlot() {
    FifoControl* f = comm_.fifo(comm_.rank());
    const uint64_t tail = comm_.recvTail_;
    comm_.waitUntil([&] { return f->head.value.load(std::memory_order_acquire) > tail; }, prev_);
    return comm_.fifoSlot(comm_.rank(), tail) + recvAlign_;
  }
  void postRecv() {
    comm_.fifo(comm_.rank())->tail.value.store(++comm_.recvTail_, std::memory_order_release);
    comm_.notify(prev_);
  }

  ShmComm& comm_;
  DType dtype_;
  ReduceOp op_;
  size_t elemSize_;
  char* scratch_;
  int next_, prev_;
  int divisor_;  // n for avg: applied where a chunk's reduction completes
  uint32_t sendAlign_, recvAlign_;
  int stepsPerRound_;
  uint64_t verbs_ = 0;
};

}  // namespace dpcore
