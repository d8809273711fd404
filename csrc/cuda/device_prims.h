// The ring's verbs (algo/ring.h), one-shot's payloads (algo/one_shot.h) and direct's peer
// memory (algo/direct.h) over device memory.
//
// The ring: each verb is one reduceCopy kernel (reduce_copy.h), fused as NCCL fuses them. Rank
// r's kernels push into rank r+1's FIFO through its mapping, and read their own. A slot is
// handed on by the host FIFO's counters (ShmTransport) and by a pair of interprocess events per
// slot, so that no host waits for a kernel between steps:
//   send side: wait (host) until the next rank has queued the reading of the slot's last use
//              (its post), make our stream wait for its `drained` event, queue our kernel,
//              record our `filled` event, post;
//   recv side: wait (host) for the previous rank's post, make our stream wait for its `filled`
//              event, queue our kernel, record our `drained` event, post.
// An event is recorded again only after the peer has awaited it: its next record needs the
// peer's post that follows the await. finish() is the call's one host wait, for the last kernel,
// whose end means every earlier one has ended (one stream).
//
// A segment sits in its slot at its own address modulo 16 in the sender's buffer, so that the
// slot, the sources and the destinations of both kernels of a hop agree modulo 16 wherever the
// ranks' buffers do (cudaMalloc's are 256-byte aligned), and the kernels move whole 16-byte packs
// whatever the count: chunks start at any element. The sender notes that offset in the host
// slot of the same number, which the receiver reads once the post has handed the slot over.
#pragma once

#include <initializer_list>
#include <vector>

#include "algo/direct.h"
#include "core/trace.h"
#include "cuda/device_transport.h"

namespace dpcore {

class DevicePrims {
 public:
  DevicePrims(DeviceTransport& t, DType dtype, ReduceOp op, int divisor, StepSpans spans)
      : t_(t), dtype_(dtype), op_(op), elemSize_(dtypeSize(dtype)), divisor_(divisor),
        spans_(spans) {}

  void send(const void* src, size_t count) {
    TraceSpan span = spans_.next("send", count * elemSize_);
    const Slot out = sendSlot(src);
    run({src}, {out.at}, count, 0);
    postSend(out);
  }
  void recv(void* dst, size_t count) {
    TraceSpan span = spans_.next("recv", count * elemSize_);
    const Slot in = recvSlot();
    run({in.at}, {dst}, count, 0);
    postRecv(in);
  }
  void recvReduceSend(const void* src, size_t count) {
    TraceSpan span = spans_.next("recvReduceSend", count * elemSize_);
    const Slot in = recvSlot(), out = sendSlot(src);
    run({in.at, src}, {out.at}, count, 0);
    postSend(out);
    postRecv(in);
  }
  void recvReduceCopySend(const void* src, void* dst, size_t count) {
    TraceSpan span = spans_.next("recvReduceCopySend", count * elemSize_);
    const Slot in = recvSlot(), out = sendSlot(dst);
    run({in.at, src}, {dst, out.at}, count, divisor_);
    postSend(out);
    postRecv(in);
  }
  void recvReduceCopy(const void* src, void* dst, size_t count) {
    TraceSpan span = spans_.next("recvReduceCopy", count * elemSize_);
    const Slot in = recvSlot();
    run({in.at, src}, {dst}, count, divisor_);
    postRecv(in);
  }
  void recvCopySend(void* dst, size_t count) {
    TraceSpan span = spans_.next("recvCopySend", count * elemSize_);
    const Slot in = recvSlot(), out = sendSlot(dst);
    run({in.at}, {dst, out.at}, count, 0);
    postSend(out);
    postRecv(in);
  }
  void copySend(const void* src, void* dst, size_t count) {
    TraceSpan span = spans_.next("copySend", count * elemSize_);
    const Slot out = sendSlot(dst);
    if (dst != src) run({src}, {out.at, dst}, count, 0);
    else run({src}, {out.at}, count, 0);
    postSend(out);
  }
  // the call's one host wait: its outputs are the caller's once this returns
  void finish() { t_.waitFor(last_); }

 private:
  struct Slot {
    char* at;        // where the segment lies in the slot
    uint64_t index;  // the slot's number, as the FIFO's counters give it
  };

  // The next rank's slot for `segment` (where the segment lies in this rank's buffer: its
  // output where the verb writes one, which the later hops move too, else its input), at the
  // segment's offset modulo 16, noted for the receiver; the kernel queued next waits until the
  // next rank's kernel that read the slot's last use has ended.
  Slot sendSlot(const void* segment) {
    const int next = (t_.rank() + 1) % t_.size();
    const uint64_t index = t_.control().waitSendSlot();
    const auto at = static_cast<unsigned char>(reinterpret_cast<uintptr_t>(segment) %
                                               DeviceTransport::kHeadroom);
    *t_.control().hostSlot(next, index) = static_cast<char>(at);
    t_.awaitDrained(index);
    return {t_.fifoSlot(next, index) + at, index};
  }
  // Our slot, once the previous rank has posted it; the kernel queued next waits until the
  // previous rank's kernel that filled it has ended.
  Slot recvSlot() {
    const uint64_t index = t_.control().waitRecvSlot();
    const auto at = static_cast<unsigned char>(*t_.control().hostSlot(t_.rank(), index));
    t_.awaitFilled(index);
    return {t_.fifoSlot(t_.rank(), index) + at, index};
  }
  // After the verb's kernel is queued: its event, then the post that lets the peer await it.
  void postSend(const Slot& out) {
    t_.markFilled(out.index);
    t_.control().postSend();
  }
  void postRecv(const Slot& in) {
    t_.markDrained(in.index);
    t_.control().postRecv();
  }

  // A reduction of two sources (the slot that arrived, then ours, as on the CPU), or a copy:
  // one source, which the kernel moves as it is (op and rounding never apply to one value).
  // Queued, not waited for.
  void run(std::initializer_list<const void*> srcs, std::initializer_list<void*> dsts,
           size_t count, int divisor) {
    ReduceCopyArgs args;
    for (const void* s : srcs) args.srcs[args.numSrcs++] = s;
    for (void* d : dsts) args.dsts[args.numDsts++] = d;
    args.count = count;
    args.divisor = divisor;
    if (const uint64_t ticket = t_.launch(dtype_, op_, args)) last_ = ticket;
  }

  DeviceTransport& t_;
  DType dtype_;
  ReduceOp op_;
  size_t elemSize_;
  int divisor_;
  StepSpans spans_;
  uint64_t last_ = 0;  // the ticket of the last kernel queued
};

// One-shot's interface: every rank's payload in its device one-shot slot, and the kernels.
class DevicePayloads {
 public:
  DevicePayloads(DeviceTransport& t, const std::vector<CollHeader>& headers)
      : t_(t), headers_(headers) {}
  const char* payload(int r) const {
    return t_.oneShotSlot(r) + headers_[r].meta<ShmMeta>().align;
  }
  // all inputs in one kernel, rounding once at the end, as host/reduce.h's reduceMany
  void reduceMany(DType dtype, ReduceOp op, const void* const* inputs, int numInputs, void* out,
                  size_t count, int divisor) {
    t_.reduce(dtype, op, inputs, numInputs, &out, 1, count, divisor, false);
  }
  void copy(void* dst, const void* src, size_t bytes) { t_.copy(dst, src, bytes); }

 private:
  DeviceTransport& t_;
  const std::vector<CollHeader>& headers_;
};

// Direct's interface over regions: a peer's buffer is an address here, so a step is one kernel
// that reads it where it lies.
class DevicePeerMemory {
 public:
  static constexpr bool kMapped = true;
  static constexpr bool kWritesOutputs = false;  // its kernels read the peers' regions

  DevicePeerMemory(DeviceTransport& t, const std::vector<CollHeader>& headers)
      : t_(t), headers_(headers) {}

  const char* input(int peer, size_t offset) const {
    const ShmMeta m = headers_[peer].meta<ShmMeta>();
    return t_.peerAddress(peer, m.inRegion, m.addr + offset);
  }
  void readInput(int peer, size_t offset, void* dst, size_t bytes, bool) {
    t_.copy(dst, input(peer, offset), bytes);
  }
  void* output(int peer, size_t offset) const {
    const ShmMeta m = headers_[peer].meta<ShmMeta>();
    return const_cast<char*>(t_.peerAddress(peer, m.outRegion, m.outAddr + offset));
  }
  void readOutput(int peer, size_t offset, void* dst, size_t bytes, bool) {
    t_.copy(dst, output(peer, offset), bytes);
  }
  void copyToOutput(void* dst, const void* src, size_t bytes, bool) { t_.copy(dst, src, bytes); }
  static bool streams(size_t) { return false; }
  // as a chain of two-input reductions (the ring's bits): the sources in order, rounding after
  // every op; the result written to every output
  void reduceInOrder(DType dtype, ReduceOp op, const void* const* inputs, int numInputs,
                     void* const* outputs, int numOutputs, size_t count, int divisor) {
    t_.reduce(dtype, op, inputs, numInputs, outputs, numOutputs, count, divisor, true);
  }
  void signal(DirectStage stage) { t_.control().signal(stage); }
  void waitAll(DirectStage stage) { t_.control().waitAll(stage); }

 private:
  DeviceTransport& t_;
  const std::vector<CollHeader>& headers_;
};

}  // namespace dpcore
