// The ring's primitive verbs (algo/ring.h) over MPI point-to-point: MPI only carries bytes, the
// reductions are dpcore's (host/reduce.h). Segments come in to receive slots of the transport's
// memory, posted ahead (as many as there are slots, never more than the call will receive, so
// none can take a message of the next call). A segment goes out from wherever it already is:
// the user's buffer where the verb keeps or reads it there (no copy; such a send is done before
// the verb that next writes the user's buffers), else a send slot, reused once its send is done.
#pragma once

#include <cstring>
#include <vector>

#include "core/trace.h"
#include "host/reduce.h"
#include "mpi/mpi_link.h"

namespace dpcore {

// The transport's slots: `depth` receive slots and `depth` send slots of segmentBytes each.
struct MpiSlots {
  size_t depth, segmentBytes;
  char* memory;  // 2 * depth * segmentBytes
  char* recv(size_t i) const { return memory + (i % depth) * segmentBytes; }
  char* send(size_t i) const { return memory + (depth + i % depth) * segmentBytes; }
};

class MpiPrims {
 public:
  static constexpr int kTag = 2;

  // receives: how many segments this call receives (the ring's schedule, counted ahead).
  MpiPrims(MpiLink& link, MpiSlots slots, DType dtype, ReduceOp op, int divisor, size_t receives,
           StepSpans spans)
      : link_(link), slots_(slots), dtype_(dtype), op_(op), elemSize_(dtypeSize(dtype)),
        divisor_(divisor), receives_(receives), spans_(spans),
        next_((link.rank() + 1) % link.size()),
        prev_((link.rank() + link.size() - 1) % link.size()),
        recvs_(slots.depth), sends_(slots.depth), sendBusy_(slots.depth, false) {
    while (posted_ < receives_ && posted_ < slots_.depth) postRecv();
  }

  void send(const void* src, size_t count) {
    TraceSpan span = spans_.next("send", count * elemSize_);
    sendUser(src, count);
  }
  void recv(void* dst, size_t count) {
    TraceSpan span = spans_.next("recv", count * elemSize_);
    const char* in = recvSlot();
    beforeUserWrite();
    std::memcpy(dst, in, count * elemSize_);
    doneWithRecv();
  }
  void recvReduceSend(const void* src, size_t count) {
    TraceSpan span = spans_.next("recvReduceSend", count * elemSize_);
    const char* in = recvSlot();
    reduce2(dtype_, op_, in, src, sendSlot(), count, 0);
    postSlotSend(count);
    doneWithRecv();
  }
  void recvReduceCopySend(const void* src, void* dst, size_t count) {
    TraceSpan span = spans_.next("recvReduceCopySend", count * elemSize_);
    const char* in = recvSlot();
    beforeUserWrite();
    reduce2(dtype_, op_, in, src, dst, count, divisor_);
    sendUser(dst, count);
    doneWithRecv();
  }
  void recvReduceCopy(const void* src, void* dst, size_t count) {
    TraceSpan span = spans_.next("recvReduceCopy", count * elemSize_);
    const char* in = recvSlot();
    beforeUserWrite();
    reduce2(dtype_, op_, in, src, dst, count, divisor_);
    doneWithRecv();
  }
  void recvCopySend(void* dst, size_t count) {
    TraceSpan span = spans_.next("recvCopySend", count * elemSize_);
    const char* in = recvSlot();
    beforeUserWrite();
    std::memcpy(dst, in, count * elemSize_);
    sendUser(dst, count);
    doneWithRecv();
  }
  void copySend(const void* src, void* dst, size_t count) {
    TraceSpan span = spans_.next("copySend", count * elemSize_);
    if (dst != src) {
      beforeUserWrite();
      std::memcpy(dst, src, count * elemSize_);
    }
    sendUser(dst, count);
  }
  // The call's sends must be done before it returns (the user may then change the buffers) and
  // before the slots serve another call.
  void finish() {
    beforeUserWrite();
    std::vector<MpiLink::Pending> busy;
    for (size_t i = 0; i < slots_.depth; ++i) {
      if (sendBusy_[i]) busy.push_back(sends_[i]);
    }
    link_.waitAll(busy.data(), busy.size());
  }

 private:
  const char* recvSlot() {
    link_.wait(recvs_[taken_ % slots_.depth]);
    return slots_.recv(taken_);
  }
  void doneWithRecv() {
    ++taken_;
    if (posted_ < receives_) postRecv();
  }
  void postRecv() {
    recvs_[posted_ % slots_.depth] =
        link_.irecv(slots_.recv(posted_), slots_.segmentBytes, prev_, kTag);
    ++posted_;
  }
  char* sendSlot() {
    const size_t i = sent_ % slots_.depth;
    if (sendBusy_[i]) link_.wait(sends_[i]);
    sendBusy_[i] = false;
    return slots_.send(sent_);
  }
  void postSlotSend(size_t count) {
    const size_t i = sent_ % slots_.depth;
    sends_[i] = link_.isend(slots_.send(sent_), count * elemSize_, next_, kTag);
    sendBusy_[i] = true;
    ++sent_;
  }
  void sendUser(const void* src, size_t count) {
    userSends_.push_back(link_.isend(src, count * elemSize_, next_, kTag));
  }
  // In place, a later step may overwrite what an earlier one still sends from.
  void beforeUserWrite() {
    link_.waitAll(userSends_.data(), userSends_.size());
    userSends_.clear();
  }

  MpiLink& link_;
  MpiSlots slots_;
  DType dtype_;
  ReduceOp op_;
  size_t elemSize_;
  int divisor_;
  size_t receives_;
  StepSpans spans_;
  int next_, prev_;
  std::vector<MpiLink::Pending> recvs_, sends_, userSends_;
  std::vector<bool> sendBusy_;
  size_t posted_ = 0, taken_ = 0, sent_ = 0;
};

}  // namespace dpcore
