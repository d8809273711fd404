// Point-to-point for one collective (mpi_link.h): requests, and waits that poll them against
// the deadline and the peers' news.
#include "mpi/mpi_link.h"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <stdexcept>

namespace dpcore {

void MpiLink::check(int rc, int peer) {
  if (rc == 0) return;
  // MPI's error may be a peer's death seen first by MPI (its shared-memory copy from a process
  // that is gone: "process_vm_readv failed (errno 3)"). Then the news is that death, passed on
  // as it began, naming the dead rank rather than this one; the process may take a moment to
  // show as gone.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
  for (;;) {
    const std::string trouble = watch_.trouble(call_->seq);
    if (!trouble.empty()) call_->fail(trouble);
    if (std::chrono::steady_clock::now() >= until) break;
    timespec nap{0, 5 * 1000 * 1000};
    nanosleep(&nap, nullptr);
  }
  call_->fail("MPI error with rank " + std::to_string(e_.names[peer]) + ": " +
              e_.api->errorString(rc));
}

MpiLink::Pending MpiLink::isend(const void* buf, size_t bytes, int peer, int tag) {
  Pending p{0, peer, false};
  check(e_.api->isend(buf, static_cast<int>(bytes), e_.byteType, e_.names[peer], tag, e_.comm,
                      &p.request), peer);
  return p;
}

MpiLink::Pending MpiLink::irecv(void* buf, size_t bytes, int peer, int tag) {
  Pending p{0, peer, true};
  check(e_.api->irecv(buf, static_cast<int>(bytes), e_.byteType, e_.names[peer], tag, e_.comm,
                      &p.request), peer);
  return p;
}

void MpiLink::waitAll(Pending* pending, size_t count) {
  using Clock = std::chrono::steady_clock;
  constexpr auto kWatchEvery = std::chrono::milliseconds(20);  // the peers' news, pids
  size_t left = count;  // pending[0 .. left) are not done yet
  Clock::time_point nextWatch{};
  for (long polls = 1;; ++polls) {
    for (size_t i = 0; i < left;) {
      bool done = false;
      check(e_.api->test(&pending[i].request, &done), pending[i].peer);
      if (done) pending[i] = pending[--left];
      else ++i;
    }
    if (left == 0) {
      // A rank stopped in a long wait may resume to find its data there but its peers gone:
      // a call they gave up must fail here too.
      if (polls >= 4096) {
        const std::string trouble = watch_.trouble(call_->seq);
        if (!trouble.empty()) call_->fail(trouble);
      }
      return;
    }
    if (polls < 64) continue;
    const Clock::time_point now = Clock::now();
    if (polls == 64) nextWatch = now + kWatchEvery;
    if (now >= nextWatch) {
      nextWatch = now + kWatchEvery;
      const std::string trouble = watch_.trouble(call_->seq);
      if (!trouble.empty()) abandon(pending, left, trouble);
    }
    if (call_->expired(now)) timeOut(pending, left);
    if (polls < 4096) {
      sched_yield();
    } else {
      timespec nap{0, 500 * 1000};
      nanosleep(&nap, nullptr);
    }
  }
}

// Receives are cancelled; a send may still be taken by a late peer, so its request is kept
// until the link goes.
void MpiLink::abandon(Pending* late, size_t count, const std::string& why) {
  for (size_t i = 0; i < count; ++i) {
    if (late[i].receive) e_.api->cancel(&late[i].request);
    abandoned_.push_back(late[i].request);
  }
  call_->fail(why);
}

// "timed out after 1 s waiting for rank 2 (receive from rank 2)", or where the peers it waited
// for timed out too, for the rank they waited for: "... waiting for rank 0 (stopped), for which
// the ranks this one waits for wait too". Before giving up, this rank says so, and listens a
// moment for the peers it waited for.
void MpiLink::timeOut(Pending* late, size_t count) {
  // A rank that was stopped past its deadline finds, when it resumes, the peers' news
  const std::string trouble = watch_.trouble(call_->seq);
  if (!trouble.empty()) abandon(late, count, trouble);
  std::set<int> peers;
  std::string detail;
  for (size_t i = 0; i < count; ++i) {
    peers.insert(late[i].peer);
    detail += (i ? ", " : "") + std::string(late[i].receive ? "receive from" : "send to") +
              " rank " + std::to_string(e_.names[late[i].peer]);
  }
  std::string who = peers.size() > 1 ? "ranks " : "rank ";
  for (int p : peers) who += (p == *peers.begin() ? "" : ", ") + std::to_string(e_.names[p]);
  const std::string why = call_->timedOut(who + " (" + detail + ")");
  const std::vector<int> waited(peers.begin(), peers.end());
  watch_.sayGoodbye(call_->seq - 1, "gave up: " + call_->message(why), waited);
  const std::string culprits = watch_.stalled(waited, std::min(1.0, call_->timeout / 4));
  abandon(late, count, culprits.empty() ? why : call_->timedOut(culprits));
}

}  // namespace dpcore
