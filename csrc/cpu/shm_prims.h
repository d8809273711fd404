// The ring's primitive verbs (algo/ring.h) over the shared-memory FIFOs. Rank r fills slots of
// rank r+1's FIFO and empties its own; flow control and waiting are the transport's
// (ShmTransport::sendSlot and friends).
//
// Slots are written by memcpy only, never by a reduce loop: memcpy writes whole cache lines
// without reading them first, while a reduce loop's stores must first fetch each line of the
// slot from the peer that read it last, a cross-core round trip per line (2.5x slower where the
// cores sit on different dies: benchmarks/results/2026-12-01-structure.md). So a reduction lands
// in local memory (the user's output, or scratch) and is copied on, and a forwarded segment is
// copied on from where it was kept.
#pragma once

#include <cstring>

#include "core/trace.h"
#include "cpu/shm_transport.h"
#include "host/reduce.h"

namespace dpcore {

class ShmPrims {
 public:
  // sendAlign / recvAlign: where data sits in the next rank's slots and in ours (ShmLayout).
  // scratch: a slot's worth of local memory for recvReduceSend's partial sums.
  ShmPrims(ShmTransport& transport, DType dtype, ReduceOp op, int divisor, uint32_t sendAlign,
           uint32_t recvAlign, char* scratch, StepSpans spans)
      : t_(transport), dtype_(dtype), op_(op), elemSize_(dtypeSize(dtype)), divisor_(divisor),
        sendAlign_(sendAlign), recvAlign_(recvAlign), scratch_(scratch), spans_(spans) {}

  void send(const void* src, size_t count) {
    TraceSpan span = spans_.next("send", count * elemSize_);
    std::memcpy(sendSlot(), src, count * elemSize_);
    t_.postSend();
  }
  void recv(void* dst, size_t count) {
    TraceSpan span = spans_.next("recv", count * elemSize_);
    std::memcpy(dst, recvSlot(), count * elemSize_);
    t_.postRecv();
  }
  void recvReduceSend(const void* src, size_t count) {
    TraceSpan span = spans_.next("recvReduceSend", count * elemSize_);
    reduce2(dtype_, op_, recvSlot(), src, scratch_, count, 0);
    std::memcpy(sendSlot(), scratch_, count * elemSize_);
    t_.postSend();
    t_.postRecv();
  }
  void recvReduceCopySend(const void* src, void* dst, size_t count) {
    TraceSpan span = spans_.next("recvReduceCopySend", count * elemSize_);
    reduce2(dtype_, op_, recvSlot(), src, dst, count, divisor_);
    std::memcpy(sendSlot(), dst, count * elemSize_);
    t_.postSend();
    t_.postRecv();
  }
  void recvReduceCopy(const void* src, void* dst, size_t count) {
    TraceSpan span = spans_.next("recvReduceCopy", count * elemSize_);
    reduce2(dtype_, op_, recvSlot(), src, dst, count, divisor_);
    t_.postRecv();
  }
  void recvCopySend(void* dst, size_t count) {
    TraceSpan span = spans_.next("recvCopySend", count * elemSize_);
    std::memcpy(dst, recvSlot(), count * elemSize_);
    std::memcpy(sendSlot(), dst, count * elemSize_);
    t_.postSend();
    t_.postRecv();
  }
  void copySend(const void* src, void* dst, size_t count) {
    TraceSpan span = spans_.next("copySend", count * elemSize_);
    std::memcpy(sendSlot(), src, count * elemSize_);
    if (dst != src) std::memcpy(dst, src, count * elemSize_);
    t_.postSend();
  }
  void finish() {}  // every verb handed its slots over already

 private:
  char* sendSlot() { return t_.sendSlot() + sendAlign_; }
  const char* recvSlot() { return t_.recvSlot() + recvAlign_; }

  ShmTransport& t_;
  DType dtype_;
  ReduceOp op_;
  size_t elemSize_;
  int divisor_;  // n for avg: applied where a chunk's reduction completes
  uint32_t sendAlign_, recvAlign_;
  char* scratch_;
  StepSpans spans_;
};

}  // namespace dpcore
