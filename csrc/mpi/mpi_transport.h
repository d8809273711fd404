// The MPI transport: all ranks of an MPI communicator, over point-to-point messages. It carries
// the headers (each rank sends its own to every peer), the one-shot payloads (the same way) and
// the ring's segments (mpi_prims.h) for core/collectives.h; MPI's own collectives are never used.
// No peer memory: direct does not run here, but for gather, scatter and all_to_all, whose
// transfers are each one message (MpiMessages).
#pragma once

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "algo/exchange.h"
#include "algo/ring.h"
#include "core/call.h"
#include "host/reduce.h"
#include "mpi/mpi_link.h"
#include "mpi/mpi_prims.h"

namespace dpcore {

// One-shot payloads, received whole from every rank that publishes one.
class MpiPayloads : public HostLoops {
 public:
  MpiPayloads(const char* staging, std::vector<size_t> offsets)
      : staging_(staging), offsets_(std::move(offsets)) {}
  const char* payload(int r) const { return staging_ + offsets_[r]; }

 private:
  const char* staging_;
  std::vector<size_t> offsets_;  // bytes: rank r's payload starts at offsets_[r]
};

// gather, scatter and all_to_all's Messages (algo/exchange.h): each transfer goes straight
// between the users' buffers, in pieces that MPI's int count can carry, posted in the same
// order by sender and receiver (MPI keeps a pair's messages of one tag in order).
class MpiMessages {
 public:
  static constexpr int kTag = 4;
  static constexpr size_t kPieceBytes = size_t{1} << 30;
  explicit MpiMessages(MpiLink& link) : link_(link) {}
  void recv(int from, void* dst, size_t bytes) { post(from, dst, bytes, true); }
  void send(int to, const void* src, size_t bytes) {
    post(to, const_cast<void*>(src), bytes, false);
  }
  static void copy(void* dst, const void* src, size_t bytes) { std::memmove(dst, src, bytes); }
  void wait() { link_.waitAll(pending_.data(), pending_.size()); }

 private:
  void post(int peer, void* buf, size_t bytes, bool receive) {
    for (size_t at = 0; at < bytes; at += kPieceBytes) {
      char* piece = static_cast<char*>(buf) + at;
      const size_t len = std::min(kPieceBytes, bytes - at);
      pending_.push_back(receive ? link_.irecv(piece, len, peer, kTag)
                                 : link_.isend(piece, len, peer, kTag));
    }
  }
  MpiLink& link_;
  std::vector<MpiLink::Pending> pending_;
};

class MpiTransport {
 public:
  static constexpr bool kPeerMemory = false;
  using Meta = NoMeta;  // every rank's data travels in messages: its peers need no address
  // segmentBytes: the ring's segment, large enough that a message costs little more than its
  // bytes; slots: receives posted ahead, and sends in flight from slots (dpcore/settings.py).
  MpiTransport(MpiEndpoint endpoint, size_t slots, size_t segmentBytes);
  ~MpiTransport();
  MpiTransport(const MpiTransport&) = delete;
  MpiTransport& operator=(const MpiTransport&) = delete;

  int rank() const { return link_.rank(); }
  int name(int r) const { return link_.name(r); }
  int size() const { return link_.size(); }

  void validate(const Task&) const {}
  Meta annotate(const Task&) const { return {}; }
  static bool sharedInput(const Meta&) { return false; }
  void begin(const CallContext& call) {
    call_ = &call;
    link_.begin(call);
  }
  std::vector<CollHeader> exchange(const Task& task, const CollHeader& mine);
  size_t segmentBytes() const { return slots_.segmentBytes; }
  static void copyAlone(void* out, const void* in, size_t bytes) { std::memmove(out, in, bytes); }
  MpiPrims prims(const RingCall& ring, const std::vector<CollHeader>& headers);
  MpiPayloads payloads(const Task& task, const std::vector<CollHeader>& headers);
  MpiMessages messages(const ExchangePlan&) { return MpiMessages(link_); }
  // The call in flight failed: the peers hear it (mpi_peers.h) and fail it too. Requests of the
  // failed call may still reach this transport's memory, so from now on that memory outlives
  // the transport.
  void abort(const std::string& message) {
    failed_ = true;
    link_.watch().sayGoodbye(call_ ? call_->seq - 1 : 0, "failed: " + message);
  }
  // This rank makes no more calls (it closes, exits, or failed elsewhere): peers that wait for
  // one hear why at once.
  void leave(const std::string& why) {
    const uint64_t last = call_ ? call_->seq : 0;
    link_.watch().sayGoodbye(last, why + " after its call #" + std::to_string(last));
  }
  // This rank failed elsewhere (between nodes: inside its node) because of `news`, "rank 3
  // (pid 7) died": the peers hear that, as it is, and that this rank makes no more calls.
  void passOn(const std::string& news) {
    link_.watch().passOn(news);
    leave("");
  }

 private:
  MpiLink link_;
  const CallContext* call_ = nullptr;
  bool failed_ = false;
  // What MPI reads and writes: the ring's slots, the headers, the one-shot payloads.
  MpiSlots slots_;
  std::unique_ptr<std::vector<CollHeader>> headers_;
  std::unique_ptr<std::vector<char>> staging_;
};

}  // namespace dpcore
