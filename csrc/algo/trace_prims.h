// A Prims that only records which verb touched which element range. Running the real ring
// templates against it simulates any rank's schedule without a transport: the tests replay every
// rank's trace (tests/test_ring_schedule.py), and a transport that must know ahead how many
// segments it will receive counts them here (mpi/mpi_prims.h). Host and device code.
#pragma once

#include <cstddef>

#include "dpcore/types.h"

namespace dpcore {

enum class Verb : int {
  kSend, kRecv, kRecvReduceSend, kRecvReduceCopySend, kRecvReduceCopy, kRecvCopySend, kCopySend,
};

inline const char* verbName(Verb v) {
  static const char* names[] = {"send", "recv", "recvReduceSend", "recvReduceCopySend",
                                "recvReduceCopy", "recvCopySend", "copySend"};
  return names[static_cast<int>(v)];
}

DP_HOST_DEVICE inline bool verbReceives(Verb v) {
  return v != Verb::kSend && v != Verb::kCopySend;
}

struct VerbRecord {
  Verb verb;
  size_t start;  // element offset in the buffer the verb reads from or writes to
  size_t count;
};

class TracePrims {
 public:
  // Pointers passed to the templates are offsets from a null base (1 byte per element). Records
  // go to records[0 .. capacity); every verb is counted, recorded or not.
  DP_HOST_DEVICE TracePrims(VerbRecord* records = nullptr, size_t capacity = 0)
      : records_(records), capacity_(capacity) {}

  DP_HOST_DEVICE void send(const void* src, size_t n) { add(Verb::kSend, src, n); }
  DP_HOST_DEVICE void recv(void* dst, size_t n) { add(Verb::kRecv, dst, n); }
  DP_HOST_DEVICE void recvReduceSend(const void* src, size_t n) {
    add(Verb::kRecvReduceSend, src, n);
  }
  DP_HOST_DEVICE void recvReduceCopySend(const void*, void* dst, size_t n) {
    add(Verb::kRecvReduceCopySend, dst, n);
  }
  DP_HOST_DEVICE void recvReduceCopy(const void* src, void*, size_t n) {
    add(Verb::kRecvReduceCopy, src, n);
  }
  DP_HOST_DEVICE void recvCopySend(void* dst, size_t n) { add(Verb::kRecvCopySend, dst, n); }
  DP_HOST_DEVICE void copySend(const void*, void* dst, size_t n) {
    add(Verb::kCopySend, dst, n);
  }

  DP_HOST_DEVICE size_t verbs() const { return verbs_; }
  DP_HOST_DEVICE size_t receives() const { return receives_; }

 private:
  DP_HOST_DEVICE void add(Verb verb, const void* p, size_t n) {
    if (verbs_ < capacity_) {
      records_[verbs_] = VerbRecord{verb, static_cast<size_t>(reinterpret_cast<uintptr_t>(p)), n};
    }
    ++verbs_;
    receives_ += verbReceives(verb) ? 1 : 0;
  }
  VerbRecord* records_;
  size_t capacity_;
  size_t verbs_ = 0;
  size_t receives_ = 0;
};

}  // namespace dpcore
