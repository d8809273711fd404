// Point-to-point over MPI (mpi_channel.h): headers, answers and data, none blocking; the
// engine's waits poll them.
#include "p2p/mpi_channel.h"

#include <cstring>

#include "core/process.h"
#include "dpcore/error.h"

namespace dpcore {
namespace {

enum Tag : int { kHeader = 1, kReply = 2, kData = 3 };
constexpr size_t kEagerBytes = 16 << 10;
constexpr size_t kAnswerBytes = 1024;

struct WireHeader {
  uint64_t bytes;
  uint64_t number;  // the send's number on this pair
  int32_t from;     // the sender's rank in the endpoint
  int32_t tag;
  int32_t dtype;
  int32_t eager;    // the data follows in this message
};

// Receive stages (P2pOp::stage); a send's: 0 header not sent, 1 waiting for the answer,
// 2 data sent.
enum RecvStage { kPostHeader = 0, kWaitHeader = 1, kWaitData = 2 };

}  // namespace

MpiChannel::MpiChannel(MpiEndpoint endpoint, int anySource)
    : e_(std::move(endpoint)), anySource_(anySource), dataTurn_(e_.size, 1),
      received_(e_.size, 0) {}

MpiChannel::~MpiChannel() {
  if (e_.api->finalized()) return;
  for (Answer& a : answers_) {  // mostly done long ago; one a peer never took stays posted
    bool done = false;
    if (a.request) e_.api->test(&a.request, &done);
    if (!done) a.bytes.release();
  }
}

void MpiChannel::check(int rc, const P2pOp& op) {
  if (rc != 0) {
    const std::string peer = op.peer == kAnySource ? "any rank" : "rank " +
                                                                  std::to_string(op.peer);
    throw CommError(op.message("MPI error with " + peer + ": " + e_.api->errorString(rc)));
  }
}

bool MpiChannel::test(uint64_t& request) {
  if (!request) return true;
  bool done = false;
  const int rc = e_.api->test(&request, &done);
  if (rc != 0) throw CommError("dpcore: MPI error in point-to-point: " + e_.api->errorString(rc));
  if (done) request = 0;
  return done;
}

bool MpiChannel::progress(P2pOps& ops) {
  bool moved = false;
  for (size_t i = 0; i < answers_.size();) {  // answers sent: free them once MPI is done
    if (test(answers_[i].request)) {
      answers_[i] = std::move(answers_.back());
      answers_.pop_back();
    } else {
      ++i;
    }
  }
  for (const auto& op : ops) {
    if (op->finished()) continue;
    moved |= op->send ? progressSend(*op) : progressRecv(*op);
  }
  return moved;
}

bool MpiChannel::progressSend(P2pOp& op) {
  const int to = e_.names[op.peer];
  const int before = op.stage;
  if (op.stage == 0) {
    const bool eager = op.bytes <= kEagerBytes;
    const size_t sent = sizeof(WireHeader) + (eager ? op.bytes : 0);
    op.buffer.resize(sent + kAnswerBytes);
    WireHeader h{op.bytes, op.number, e_.rank, op.tag, static_cast<int32_t>(op.dtype), eager};
    std::memcpy(op.buffer.data(), &h, sizeof(h));
    if (eager && op.bytes) std::memcpy(op.buffer.data() + sizeof(h), op.data, op.bytes);
    op.requests.assign(3, 0);  // header, answer, data
    check(e_.api->irecv(op.buffer.data() + sent, kAnswerBytes, e_.byteType, to, kReply, e_.comm,
                        &op.requests[1]), op);
    check(e_.api->isend(op.buffer.data(), static_cast<int>(sent), e_.byteType, to, kHeader,
                        e_.comm, &op.requests[0]), op);
    op.stage = 1;
  }
  if (op.stage == 1) {
    // the data goes in the order of the messages, as the receiver posts its receives
    if (!test(op.requests[1]) || dataTurn_[op.peer] != op.number) return false;
    const char* answer = op.buffer.data() + op.buffer.size() - kAnswerBytes;
    if (answer[0] != 0) throw CommError(std::string(answer, strnlen(answer, kAnswerBytes)));
    ++dataTurn_[op.peer];
    if (op.bytes > kEagerBytes) {
      check(e_.api->isend(op.data, static_cast<int>(op.bytes), e_.byteType, to, kData, e_.comm,
                          &op.requests[2]), op);
    }
    op.stage = 2;
  }
  if (!test(op.requests[0]) || !test(op.requests[2])) return op.stage != before;
  op.finish();
  return true;
}

bool MpiChannel::progressRecv(P2pOp& op) {
  const int before = op.stage;
  if (op.stage == kPostHeader) {
    op.buffer.resize(sizeof(WireHeader) + kEagerBytes);
    op.requests.assign(2, 0);  // header, data
    const int from = op.peer == kAnySource ? anySource_ : e_.names[op.peer];
    check(e_.api->irecv(op.buffer.data(), static_cast<int>(op.buffer.size()), e_.byteType, from,
                        kHeader, e_.comm, &op.requests[0]), op);
    op.stage = kWaitHeader;
  }
  if (op.stage == kWaitHeader) {
    if (!test(op.requests[0])) return false;
    WireHeader h;
    std::memcpy(&h, op.buffer.data(), sizeof(h));
    // in the order of the sender's messages, as it sends their data
    if (h.number != received_[h.from] + 1) return false;
    const std::string wrong =
        p2pMismatch(h.from, h.number, h.tag, static_cast<DType>(h.dtype), h.bytes, op);
    if (!wrong.empty()) {
      answer(h.from, wrong);
      throw CommError(wrong);
    }
    ++received_[h.from];
    op.source = h.from;
    if (h.eager) {
      if (h.bytes) std::memcpy(op.data, op.buffer.data() + sizeof(h), h.bytes);
    } else {
      check(e_.api->irecv(op.data, static_cast<int>(op.bytes), e_.byteType, e_.names[h.from],
                          kData, e_.comm, &op.requests[1]), op);
    }
    answer(h.from, "");
    op.stage = kWaitData;
  }
  if (!test(op.requests[1])) return op.stage != before;
  op.finish();
  return true;
}

void MpiChannel::answer(int to, const std::string& mismatch) {
  const size_t bytes = mismatch.empty() ? 1 : std::min(kAnswerBytes, mismatch.size() + 1);
  Answer a{0, std::make_unique<char[]>(bytes)};
  a.bytes[0] = 0;
  if (!mismatch.empty()) std::memcpy(a.bytes.get(), mismatch.c_str(), bytes - 1);
  a.bytes[bytes - 1] = 0;
  const int rc = e_.api->isend(a.bytes.get(), static_cast<int>(bytes), e_.byteType,
                               e_.names[to], kReply, e_.comm, &a.request);
  if (rc != 0) throw CommError("dpcore: MPI error answering rank " + std::to_string(to) + ": " +
                               e_.api->errorString(rc));
  answers_.push_back(std::move(a));
}

std::string MpiChannel::trouble(int peer, bool deep) {
  if (!deep) return "";
  for (int r = 0; r < e_.size; ++r) {
    if (r == e_.rank || (peer != kAnySource && r != peer)) continue;
    const auto pid = static_cast<pid_t>(e_.pids[r]);
    if (pid > 0 && !processAlive(pid)) {
      return "rank " + std::to_string(e_.names[r]) + " (pid " + std::to_string(pid) + ") died";
    }
  }
  return "";
}

void MpiChannel::abort(const std::string&, const P2pOps& failed) {
  if (e_.api->finalized()) return;
  for (const auto& op : failed) {
    if (!op->send) {  // a receive may be cancelled; a send may still be taken by a late peer
      for (uint64_t& r : op->requests) {
        if (r) e_.api->cancel(&r);
      }
    }
    abandoned_.push_back(op);
  }
}

}  // namespace dpcore
