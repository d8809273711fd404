// Point-to-point over MPI (the MPI transport, and between virtual or real nodes), on a
// communicator of its own (a duplicate made at init), so no message meets a collective's.
// MPI's tags do not match messages here: every message is checked against its receive, so a
// header travels first (tag kHeader) and the receiver answers it (kReply):
//   up to kEagerBytes: the data rides in the header; the answer acknowledges it;
//   larger: the answer says go once the receiver has posted its receive of the data (kData),
//   which the sender then sends, straight into the receiver's buffer.
// A receive that does not take the message answers with the mismatch, which both ranks raise.
// A send completes once the receiver has answered: the peer has it.
#pragma once

#include <memory>
#include <vector>

#include "mpi/mpi_api.h"
#include "p2p/p2p_channel.h"

namespace dpcore {

class MpiChannel : public P2pChannel {
 public:
  // anySource: the library's MPI_ANY_SOURCE (mpi4py's MPI.ANY_SOURCE).
  MpiChannel(MpiEndpoint endpoint, int anySource);
  ~MpiChannel() override;

  int rank() const override { return e_.rank; }
  int size() const override { return e_.size; }
  bool progress(P2pOps& ops) override;
  std::string trouble(int peer, bool deep) override;
  void abort(const std::string& why, const P2pOps& failed) override;
  void leave() override {}

 private:
  bool progressSend(P2pOp& op);
  bool progressRecv(P2pOp& op);
  bool test(uint64_t& request);          // true once done (or never posted)
  void answer(int to, const std::string& mismatch);  // "" : acknowledge / go
  void check(int rc, const P2pOp& op);   // an MPI error: this op's CommError

  MpiEndpoint e_;
  int anySource_;
  std::vector<uint64_t> dataTurn_;   // per destination: the send whose data may go next
  std::vector<uint64_t> received_;   // per source: messages taken so far
  struct Answer {
    uint64_t request;
    std::unique_ptr<char[]> bytes;
  };
  std::vector<Answer> answers_;      // answers on their way
  // What MPI may still hold after a failure: never freed, so no later communicator can reuse
  // their context and meet a late message, and no buffer goes while MPI may write it.
  std::vector<std::shared_ptr<P2pOp>> abandoned_;
};

}  // namespace dpcore
