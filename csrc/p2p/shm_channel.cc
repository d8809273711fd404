// Point-to-point over shared memory (shm_channel.h, shm_mailbox.h): filling and emptying the
// mailboxes, reading a sender's buffer, and what becomes of the peers.
#include "p2p/shm_channel.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/process.h"
#include "cpu/peer_read.h"
#include "dpcore/error.h"

namespace dpcore {
namespace {

// The abort flag while the first failing rank writes its message: readers wait for the rank.
constexpr uint64_t kWritingReason = ~uint64_t{0};

}  // namespace

ShmChannel::ShmChannel(const std::string& name, bool create, int rank, int size, bool readPeers)
    : rank_(rank), size_(size), readPeers_(readPeers), layout_(size),
      segment_(std::make_unique<ShmSegment>(name, layout_.bytes(), create)),
      base_(segment_->data()), head_(size, 0), tail_(size, 0), taking_(size, nullptr),
      held_(size, 0) {
  layout_.rank(base_, rank_)->pid.value.store(static_cast<uint64_t>(getpid()),
                                               std::memory_order_release);
}

ShmChannel::~ShmChannel() { leave(); }

void ShmChannel::leave() {
  layout_.rank(base_, rank_)->left.value.store(1, std::memory_order_release);
}

void ShmChannel::abort(const std::string& why, const P2pOps&) {
  MailControl* c = layout_.control(base_);
  uint64_t expected = 0;
  if (c->abort.value.compare_exchange_strong(expected, kWritingReason)) {
    std::strncpy(c->reason, why.c_str(), sizeof(c->reason) - 1);
    c->abort.value.store(1 + rank_, std::memory_order_release);
  }
}

bool ShmChannel::progress(P2pOps& ops) {
  bool moved = false;
  // Sends, per destination in posting order: one that has not filled all its slots holds back
  // the later ones; one that has waits for the tail to pass its last slot.
  std::vector<char>& held = held_;
  std::fill(held.begin(), held.end(), 0);
  for (const auto& sp : ops) {
    P2pOp& op = *sp;
    if (!op.send || op.finished()) continue;
    if (op.stage < 2) {
      if (held[op.peer]) continue;
      moved |= postSlots(op);
      if (op.stage < 2) {
        held[op.peer] = 1;
        continue;
      }
    }
    Mailbox* box = layout_.mailbox(base_, rank_, op.peer);
    if (box->tail.value.load(std::memory_order_acquire) >= op.endSlot) {
      op.finish();
      moved = true;
    }
  }
  // Receives, in posting order: each takes the next message of its source (or of the first
  // source that has one, from any rank) unless an earlier receive is in the middle of one.
  for (const auto& sp : ops) {
    P2pOp& op = *sp;
    if (op.send || op.finished()) continue;
    if (op.source != kAnySource) {
      moved |= take(op, op.source);
    } else if (op.peer != kAnySource) {
      if (!taking_[op.peer] && hasMessage(op.peer)) moved |= take(op, op.peer);
    } else {
      for (int k = 0; k < size_; ++k) {
        const int from = (nextAny_ + k) % size_;
        if (from == rank_ || taking_[from] || !hasMessage(from)) continue;
        nextAny_ = from + 1;
        moved |= take(op, from);
        break;
      }
    }
  }
  return moved;
}

bool ShmChannel::postSlots(P2pOp& op) {
  Mailbox* box = layout_.mailbox(base_, rank_, op.peer);
  uint64_t& head = head_[op.peer];
  const uint64_t tail = box->tail.value.load(std::memory_order_acquire);
  bool moved = false;
  while (head - tail < Mailbox::kSlots) {
    MailSlot& s = box->slots[head % Mailbox::kSlots];
    s.number = op.number;
    s.bytes = op.bytes;
    s.tag = op.tag;
    s.dtype = static_cast<int32_t>(op.dtype);
    s.addr = 0;
    if (op.bytes <= MailSlot::kPieceBytes) {
      s.kind = MailSlot::kInline;
      s.len = static_cast<uint32_t>(op.bytes);
    } else if (readPeers_) {
      s.kind = MailSlot::kAddress;
      s.addr = reinterpret_cast<uint64_t>(op.data);
      s.len = 0;
    } else {
      s.kind = MailSlot::kStaged;
      s.len = static_cast<uint32_t>(std::min(MailSlot::kPieceBytes, op.bytes - op.moved));
    }
    if (s.len) std::memcpy(s.payload(), op.data + op.moved, s.len);
    op.moved = s.kind == MailSlot::kAddress ? op.bytes : op.moved + s.len;
    box->head.value.store(++head, std::memory_order_release);
    moved = true;
    if (op.moved == op.bytes) {
      op.stage = 2;
      op.endSlot = head;
      break;
    }
    op.stage = 1;
  }
  return moved;
}

bool ShmChannel::hasMessage(int from) const {
  return layout_.mailbox(base_, from, rank_)->head.value.load(std::memory_order_acquire) >
         tail_[from];
}

bool ShmChannel::take(P2pOp& op, int from) {
  Mailbox* box = layout_.mailbox(base_, from, rank_);
  uint64_t& tail = tail_[from];
  bool moved = false;
  while (box->head.value.load(std::memory_order_acquire) > tail) {
    const MailSlot& s = box->slots[tail % Mailbox::kSlots];
    if (op.source == kAnySource) {  // the message's first slot: check it against the receive
      const std::string wrong =
          p2pMismatch(from, s.number, s.tag, static_cast<DType>(s.dtype), s.bytes, op);
      if (!wrong.empty()) throw CommError(wrong);
      op.source = from;
    }
    if (s.kind == MailSlot::kAddress) {
      readSender(op, from, s);
    } else {
      std::memcpy(op.data + op.moved, s.payload(), s.len);
      op.moved += s.len;
    }
    // the sender may reuse the slot, and for kAddress its buffer: the acknowledgement
    box->tail.value.store(++tail, std::memory_order_release);
    moved = true;
    if (op.moved == op.bytes) {
      taking_[from] = nullptr;
      op.finish();
      return true;
    }
    taking_[from] = &op;
  }
  return moved;
}

// In pieces, so that a failure elsewhere (the abort flag) stops a long read early.
void ShmChannel::readSender(P2pOp& op, int from, const MailSlot& slot) {
  constexpr size_t kPiece = 4 << 20;
  const auto pid =
      static_cast<pid_t>(layout_.rank(base_, from)->pid.value.load(std::memory_order_acquire));
  for (size_t done = 0; done < slot.bytes; done += kPiece) {
    const std::string news = trouble(from, false);
    if (!news.empty()) throw CommError(news);
    const size_t len = std::min(kPiece, slot.bytes - done);
    const int err = readPeer(pid, slot.addr + done, op.data + done, len);
    if (err == ESRCH) {
      throw CommError(op.message("rank " + std::to_string(from) + " (pid " +
                                 std::to_string(pid) + ") died"));
    }
    if (err != 0) {
      throw CommError(op.message("cannot read rank " + std::to_string(from) +
                                 "'s buffer (process_vm_readv: " + std::strerror(err) + ")"));
    }
  }
  op.moved = slot.bytes;
}

std::string ShmChannel::trouble(int peer, bool deep) {
  MailControl* c = layout_.control(base_);
  const uint64_t aborted = c->abort.value.load(std::memory_order_acquire);
  if (aborted != 0 && aborted != kWritingReason) {
    // a death this op sees too is its own news, rather than the rank's that saw it first
    const std::string dead = peer == kAnySource ? "" : deadOrLeft(peer);
    return dead.find("died") != std::string::npos ? dead : c->reason;
  }
  if (!deep) return "";
  if (peer != kAnySource) return deadOrLeft(peer);
  int left = 0;  // any source: a dead peer, or every peer gone
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    const std::string news = deadOrLeft(r);
    if (news.find("died") != std::string::npos) return news;
    left += !news.empty();
  }
  return left == size_ - 1 && left > 0 ? "every other rank closed its communicator" : "";
}

std::string ShmChannel::deadOrLeft(int peer) {
  MailRank* r = layout_.rank(base_, peer);
  const auto pid = static_cast<pid_t>(r->pid.value.load(std::memory_order_acquire));
  if (pid > 0 && !processAlive(pid)) {
    return "rank " + std::to_string(peer) + " (pid " + std::to_string(pid) + ") died";
  }
  if (r->left.value.load(std::memory_order_acquire) != 0) {
    return "rank " + std::to_string(peer) + " closed its communicator";
  }
  return "";
}

}  // namespace dpcore
