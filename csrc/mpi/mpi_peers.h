// How a rank of the MPI transport learns that a peer will never send what it waits for. MPI
// reports no dead process (pip's MPICH has no fault tolerance): a receive from one waits
// forever, and a rank that left waits in MPI_Finalize, alive. So:
//   - every rank says goodbye to every peer, once, when it leaves this link: it closes the
//     communicator, exits, or fails or gives up a call. One small message: the last call it
//     completed, and why it left.
//   - every rank keeps a receive posted for each peer's goodbye, and looks at them while it
//     waits: a peer that completed call k and left fails this rank's calls after k, with its
//     reason. Every goodbye meets its posted receive, so none is left over for a later
//     communicator.
//   - every rank looks at the pids of the peers on its own host: SIGKILL says no goodbye.
// And a rank that timed out waiting for a peer listens a moment longer: a peer that timed out
// too says whom it waited for, so the rank that stalled them all is named, not a neighbour.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mpi/mpi_api.h"

namespace dpcore {

struct Goodbye {
  static constexpr int kMaxWaitedFor = 8;
  uint64_t lastDone;      // the last call (this link's sequence) the sender completed
  int32_t timedOut;       // 1: it gave up waiting for waitedFor (endpoint ranks, -1 padded)
  int32_t waitedFor[kMaxWaitedFor];
  int32_t origin;         // whose news the reason is (a name): the sender, or the peer whose
                          // goodbye failed the sender's call, passed on as it was
  char reason[428];       // "closed its communicator", "failed: ...", NUL-terminated
};

class PeerWatch {
 public:
  explicit PeerWatch(const MpiEndpoint& endpoint);  // posts a receive for every peer's goodbye
  ~PeerWatch();
  PeerWatch(const PeerWatch&) = delete;
  PeerWatch& operator=(const PeerWatch&) = delete;

  // Tells every peer this rank leaves after call lastDone; only the first goodbye goes out.
  // Where a peer's news failed this rank (trouble: it died, or its goodbye), that news goes on
  // instead of `reason`, so a message names where the failure began, not each rank that passed
  // it on.
  void sayGoodbye(uint64_t lastDone, const std::string& reason,
                  const std::vector<int>& waitedFor = {});
  bool saidGoodbye() const { return said_; }
  // The next goodbye passes on `news` ("rank 3 (pid 7) died") rather than its own reason.
  void passOn(const std::string& news);
  // Why a call numbered seq cannot complete: a peer on this host died, or left before seq. ""
  // while no trouble is known.
  std::string trouble(uint64_t seq);
  // After a timeout waiting for `waited`: listens up to `grace` seconds for the goodbyes of
  // those peers and of whom they waited for, and returns the ranks that held them all up, e.g.
  // "rank 0 (stopped), for which the ranks this one waits for wait too", or "".
  std::string stalled(const std::vector<int>& waited, double grace);

 private:
  void poll();  // takes the goodbyes that have come
  std::string goodbyeNews(uint64_t seq);  // trouble() from a goodbye alone
  void send(const Goodbye& g);  // to every peer
  std::string stateOf(int peer) const;  // "stopped", "gone" or "" (not on this host)

  struct Inbox;  // MPI writes into it: left to MPI while a receive is pending
  const MpiEndpoint& e_;
  Inbox* inbox_;
  bool said_ = false;
  // What trouble() reported, to pass on as it is: whose news (a name, or -1) and what it is.
  int newsOf_ = -1;
  std::string news_;
};

}  // namespace dpcore
