#include "mpi/mpi_link.h"

#include <sched.h>
#include <time.h>

#include <chrono>
#include <set>
#include <stdexcept>

namespace dpcore {

void MpiLink::check(int rc) const {
  if (rc != 0) call_->fail("MPI error: " + e_.api->errorString(rc));
}

MpiLink::Pending MpiLink::isend(const void* buf, size_t bytes, int peer, int tag) {
  Pending p{0, peer, false};
  check(e_.api->isend(buf, static_cast<int>(bytes), e_.byteType, peer, tag, e_.comm,
                      &p.request));
  return p;
}

MpiLink::Pending MpiLink::irecv(void* buf, size_t bytes, int peer, int tag) {
  Pending p{0, peer, true};
  check(e_.api->irecv(buf, static_cast<int>(bytes), e_.byteType, peer, tag, e_.comm,
                      &p.request));
  return p;
}

void MpiLink::waitAll(Pending* pending, size_t count) {
  size_t left = count;  // pending[0 .. left) are not done yet
  for (long polls = 1;; ++polls) {
    for (size_t i = 0; i < left;) {
      bool done = false;
      check(e_.api->test(&pending[i].request, &done));
      if (done) pending[i] = pending[--left];
      else ++i;
    }
    if (left == 0) return;
    if (polls < 64) continue;
    if (call_->expired(std::chrono::steady_clock::now())) giveUp(pending, left);
    if (polls < 4096) {
      sched_yield();
    } else {
      timespec nap{0, 500 * 1000};
      nanosleep(&nap, nullptr);
    }
  }
}

// "timed out after 1 s waiting for rank 0 (receive from rank 0)": receives are cancelled; a
// send may still be taken by a late peer, so its request is kept until the link goes.
void MpiLink::giveUp(Pending* late, size_t count) {
  std::set<int> peers;
  std::string detail;
  for (size_t i = 0; i < count; ++i) {
    const int name = e_.names[late[i].peer];
    peers.insert(name);
    detail += (i ? ", " : "") + std::string(late[i].receive ? "receive from" : "send to") +
              " rank " + std::to_string(name);
    if (late[i].receive) e_.api->cancel(&late[i].request);
    abandoned_.push_back(late[i].request);
  }
  std::string who = peers.size() > 1 ? "ranks " : "rank ";
  bool first = true;
  for (int p : peers) {
    who += (first ? "" : ", ") + std::to_string(p);
    first = false;
  }
  call_->fail(call_->timedOut(who + " (" + detail + ")"));
}

}  // namespace dpcore
