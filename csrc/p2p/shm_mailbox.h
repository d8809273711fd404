// The point-to-point segment of the shared-memory transport: one mailbox per ordered pair of
// ranks, a ring of kSlots descriptors that only the sender fills (head) and only the receiver
// empties (tail):
//
//   MailControl                            abort flag and the first failure's message
//   MailRank[n]                            per rank: pid, left
//   Mailbox[n][n]                          [from][to]: head, tail, kSlots slots
//
// A message takes one slot or several: up to kPieceBytes inline; larger ones, where the
// receiver may read the sender's memory, one slot with the buffer's address, which the
// receiver reads (process_vm_readv) and acknowledges by moving the tail past it; else staged,
// one piece per slot. A send completes once the tail has passed its last slot: the peer has it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cpu/shm_layout.h"

namespace dpcore {

struct MailSlot {
  enum Kind : uint32_t { kInline = 0, kAddress = 1, kStaged = 2 };
  static constexpr size_t kPieceBytes = (16 << 10) - 64;
  uint64_t number;  // the send's number on this pair (p2p_op.h)
  uint64_t bytes;   // the whole message's
  uint64_t addr;    // kAddress: where the message lies in the sender's memory
  int32_t tag;
  int32_t dtype;
  uint32_t kind;
  uint32_t len;     // bytes of data in this slot
  // A message of up to 24 bytes lies here, in the line the receiver reads the slot's fields
  // from: one cache line fewer crosses between the cores per small message.
  char small[24];
  char data[kPieceBytes];
  char* payload() { return len <= sizeof(small) ? small : data; }
  const char* payload() const { return len <= sizeof(small) ? small : data; }
};
static_assert(sizeof(MailSlot) == 16 << 10);

struct Mailbox {
  static constexpr uint64_t kSlots = 8;
  Counter head;  // slots filled, by the sender only
  Counter tail;  // slots emptied, by the receiver only
  MailSlot slots[kSlots];
};

struct MailControl {
  Counter abort;  // 0, or 1 + the rank whose point-to-point op failed first
  char reason[1024];
};

struct alignas(kCacheLine) MailRank {
  Counter pid;
  Counter left;  // 1 once this rank posts nothing more
};

class MailLayout {
 public:
  explicit MailLayout(int size) : size_(size) {}
  size_t bytes() const { return mailboxOff() + size_t(size_) * size_ * sizeof(Mailbox); }
  MailControl* control(char* base) const { return reinterpret_cast<MailControl*>(base); }
  MailRank* rank(char* base, int r) const {
    return reinterpret_cast<MailRank*>(base + sizeof(MailControl)) + r;
  }
  Mailbox* mailbox(char* base, int from, int to) const {
    return reinterpret_cast<Mailbox*>(base + mailboxOff()) + from * size_ + to;
  }

 private:
  size_t mailboxOff() const {
    const size_t end = sizeof(MailControl) + size_t(size_) * sizeof(MailRank);
    return (end + 4095) / 4096 * 4096;
  }
  int size_;
};

}  // namespace dpcore
