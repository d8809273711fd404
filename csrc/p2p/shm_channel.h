// Point-to-point over shared memory (shm_mailbox.h): the ranks of one node, a segment of
// mailboxes of its own, made at init beside the transport's.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cpu/shm_segment.h"
#include "p2p/p2p_channel.h"
#include "p2p/shm_mailbox.h"

namespace dpcore {

class ShmChannel : public P2pChannel {
 public:
  // readPeers: every rank may read every peer's memory (process_vm_readv): large messages are
  // read from the sender's buffer; else they are staged through the mailbox in pieces.
  ShmChannel(const std::string& name, bool create, int rank, int size, bool readPeers);
  ~ShmChannel() override;
  static size_t segmentBytes(int size) { return MailLayout(size).bytes(); }
  void unlink() { segment_->unlink(); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool progress(P2pOps& ops) override;
  std::string trouble(int peer, bool deep) override;
  void abort(const std::string& why, const P2pOps& failed) override;
  void leave() override;

 private:
  bool postSlots(P2pOp& op);  // a send: fills what room the mailbox has; whether it moved
  bool take(P2pOp& op, int from);  // a receive: consumes its message's slots that have come
  bool hasMessage(int from) const;  // a message's first slot waits in from's mailbox
  void readSender(P2pOp& op, int from, const MailSlot& slot);
  std::string deadOrLeft(int peer);

  int rank_, size_;
  bool readPeers_;
  MailLayout layout_;
  std::unique_ptr<ShmSegment> segment_;
  char* base_;
  std::vector<uint64_t> head_;    // per destination: slots this rank has filled
  std::vector<uint64_t> tail_;    // per source: slots this rank has emptied
  std::vector<P2pOp*> taking_;    // per source: the receive in the middle of a staged message
  std::vector<char> held_;        // progress's, per destination: a send holds back the later
                                  // ones (a member: no allocation each time a wait polls)
  int nextAny_ = 0;               // where an any-source receive starts looking (fairness)
};

}  // namespace dpcore
