// Point-to-point among the ranks of one MPI communicator, for one collective at a time. No MPI
// call blocks: a wait polls its requests against the deadline of the call in flight and, past
// it, names the ranks it still waits for. Ranks may outnumber cores and MPI progresses only
// while it is polled, so a wait spins briefly, then yields the core, then sleeps.
#pragma once

#include <cstddef>
#include <vector>

#include "core/call.h"
#include "mpi/mpi_api.h"

namespace dpcore {

class MpiLink {
 public:
  struct Pending {
    MpiApi::Handle request;
    int peer;
    bool receive;
  };

  explicit MpiLink(MpiEndpoint endpoint) : e_(std::move(endpoint)) {}
  MpiLink(const MpiLink&) = delete;
  MpiLink& operator=(const MpiLink&) = delete;

  int rank() const { return e_.rank; }
  int size() const { return e_.size; }
  void begin(const CallContext& call) { call_ = &call; }

  Pending isend(const void* buf, size_t bytes, int peer, int tag);
  Pending irecv(void* buf, size_t bytes, int peer, int tag);
  void wait(Pending& one) { waitAll(&one, 1); }
  void waitAll(Pending* pending, size_t count);  // reorders pending

 private:
  void check(int rc) const;
  [[noreturn]] void giveUp(Pending* pending, size_t count);

  MpiEndpoint e_;
  const CallContext* call_ = nullptr;
  // Requests of a call that timed out, never freed: a live request keeps its communicator's
  // context, so a communicator made later cannot reuse it and receive the late messages.
  std::vector<MpiApi::Handle> abandoned_;
};

}  // namespace dpcore
