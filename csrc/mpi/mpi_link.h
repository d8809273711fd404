// Point-to-point among the ranks of one MPI endpoint, for one collective at a time. No MPI
// call blocks: a wait polls its requests against the deadline of the call in flight and the
// peers' news (mpi_peers.h), and gives up naming the ranks it still waits for. Ranks may
// outnumber cores and MPI progresses only while it is polled, so a wait spins briefly, then
// yields the core, then sleeps.
#pragma once

#include <cstddef>
#include <vector>

#include "core/call.h"
#include "mpi/mpi_api.h"
#include "mpi/mpi_peers.h"

namespace dpcore {

class MpiLink {
 public:
  struct Pending {
    MpiApi::Handle request;
    int peer;
    bool receive;
  };

  explicit MpiLink(MpiEndpoint endpoint) : e_(std::move(endpoint)), watch_(e_) {}
  MpiLink(const MpiLink&) = delete;
  MpiLink& operator=(const MpiLink&) = delete;

  int rank() const { return e_.rank; }
  int name(int r) const { return e_.names[r]; }
  int size() const { return e_.size; }
  void begin(const CallContext& call) { call_ = &call; }
  PeerWatch& watch() { return watch_; }

  Pending isend(const void* buf, size_t bytes, int peer, int tag);
  Pending irecv(void* buf, size_t bytes, int peer, int tag);
  void wait(Pending& one) { waitAll(&one, 1); }
  void waitAll(Pending* pending, size_t count);  // reorders pending

 private:
  void check(int rc, int peer);  // an MPI error: a dead peer's news, or names the peer
  [[noreturn]] void timeOut(Pending* late, size_t count);
  [[noreturn]] void abandon(Pending* late, size_t count, const std::string& why);

  MpiEndpoint e_;
  PeerWatch watch_;
  const CallContext* call_ = nullptr;
  // Requests of a call that failed, never freed: a live request keeps its communicator's
  // context, so a communicator made later cannot reuse it and receive the late messages.
  std::vector<MpiApi::Handle> abandoned_;
};

}  // namespace dpcore
