// The news of the MPI transport's peers (mpi_peers.h): goodbyes sent and heard, pids watched.
#include "mpi/mpi_peers.h"

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <chrono>
#include <cstring>
#include <set>

#include "core/process.h"

namespace dpcore {
namespace {
constexpr int kGoodbyeTag = 9;  // the link's other tags: mpi_transport.cc, mpi_prims.h
}  // namespace

struct PeerWatch::Inbox {
  std::vector<Goodbye> received;
  std::vector<MpiApi::Handle> receives;
  std::vector<bool> arrived;
  Goodbye outgoing{};
  std::vector<MpiApi::Handle> sends;
};

PeerWatch::PeerWatch(const MpiEndpoint& endpoint) : e_(endpoint), inbox_(new Inbox) {
  Inbox& in = *inbox_;
  in.received.resize(e_.size);
  in.receives.assign(e_.size, 0);
  in.arrived.assign(e_.size, false);
  for (int p = 0; p < e_.size; ++p) {
    if (p == e_.rank) continue;
    e_.api->irecv(&in.received[p], sizeof(Goodbye), e_.byteType, e_.names[p], kGoodbyeTag,
                  e_.comm, &in.receives[p]);
  }
}

// The inbox goes with the watch only once MPI is done with it: every peer's goodbye came and
// every one of ours went. Otherwise it is left to MPI, a few hundred bytes per peer.
PeerWatch::~PeerWatch() {
  if (e_.api->finalized()) return;
  poll();
  bool done = true;
  for (int p = 0; p < e_.size; ++p) done = done && (p == e_.rank || inbox_->arrived[p]);
  for (MpiApi::Handle& r : inbox_->sends) {
    bool sent = false;
    done = done && e_.api->test(&r, &sent) == 0 && sent;
  }
  if (done) delete inbox_;
}

void PeerWatch::sayGoodbye(uint64_t lastDone, const std::string& reason,
                           const std::vector<int>& waitedFor) {
  if (said_ || e_.api->finalized()) return;
  said_ = true;
  Goodbye& g = inbox_->outgoing;
  g.lastDone = lastDone;
  g.origin = newsOf_ >= 0 ? newsOf_ : e_.names[e_.rank];
  g.timedOut = newsOf_ < 0 && !waitedFor.empty() ? 1 : 0;
  std::fill(std::begin(g.waitedFor), std::end(g.waitedFor), -1);
  if (g.timedOut) {
    std::copy_n(waitedFor.begin(), std::min<size_t>(waitedFor.size(), Goodbye::kMaxWaitedFor),
                g.waitedFor);
  }
  const std::string& text = newsOf_ >= 0 ? news_ : reason;
  std::memset(g.reason, 0, sizeof(g.reason));
  std::strncpy(g.reason, text.c_str(), sizeof(g.reason) - 1);
  send(g);
}

void PeerWatch::passOn(const std::string& news) {
  if (newsOf_ >= 0) return;  // this link's own news came first
  int origin = -1, length = 0;
  if (std::sscanf(news.c_str(), "rank %d %n", &origin, &length) == 1 && length > 0) {
    newsOf_ = origin;
    news_ = news.substr(length);
  } else {
    newsOf_ = e_.names[e_.rank];
    news_ = "failed: " + news;
  }
}

void PeerWatch::send(const Goodbye& g) {
  for (int p = 0; p < e_.size; ++p) {
    if (p == e_.rank) continue;
    MpiApi::Handle request = 0;
    if (e_.api->isend(&g, sizeof(Goodbye), e_.byteType, e_.names[p], kGoodbyeTag, e_.comm,
                      &request) == 0) {
      inbox_->sends.push_back(request);
    }
  }
  // MPI may move a message only while it is polled, and a rank that fails often exits at once:
  // push the goodbyes out first (a small message completes as soon as it is sent).
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
  for (bool done = false; !done && std::chrono::steady_clock::now() < until;) {
    done = true;
    for (MpiApi::Handle& r : inbox_->sends) {
      bool sent = false;
      done = e_.api->test(&r, &sent) == 0 && sent && done;
    }
  }
}

void PeerWatch::poll() {
  Inbox& in = *inbox_;
  for (int p = 0; p < e_.size; ++p) {
    if (p == e_.rank || in.arrived[p]) continue;
    bool done = false;
    if (e_.api->test(&in.receives[p], &done) == 0 && done) in.arrived[p] = true;
  }
}

std::string PeerWatch::stateOf(int peer) const {
  if (e_.pids.empty() || e_.pids[peer] <= 0) return "";
  switch (processState(static_cast<pid_t>(e_.pids[peer]))) {
    case ProcessState::kGone:
      return "gone";
    case ProcessState::kStopped:
      return "stopped";
    default:
      return "";
  }
}

std::string PeerWatch::trouble(uint64_t seq) {
  // A goodbye first: a rank that failed and then exited says why, which its pid cannot.
  std::string news = goodbyeNews(seq);
  if (!news.empty()) return news;
  for (int p = 0; p < e_.size; ++p) {
    if (p != e_.rank && stateOf(p) == "gone") {
      // what it said just before it exited may still be on its way
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
      while (news.empty() && std::chrono::steady_clock::now() < until) {
        timespec nap{0, 1000 * 1000};
        nanosleep(&nap, nullptr);
        news = goodbyeNews(seq);
      }
      if (!news.empty()) return news;
      newsOf_ = e_.names[p];
      news_ = "(pid " + std::to_string(e_.pids[p]) + ") died";
      return "rank " + std::to_string(newsOf_) + " " + news_;
    }
  }
  return "";
}

std::string PeerWatch::goodbyeNews(uint64_t seq) {
  poll();
  for (int p = 0; p < e_.size; ++p) {
    const Goodbye& g = inbox_->received[p];
    // a peer that timed out is no news: it waits as this rank does, and stalled() follows it
    if (p != e_.rank && inbox_->arrived[p] && seq > g.lastDone && !g.timedOut) {
      newsOf_ = g.origin;
      news_ = g.reason;
      return "rank " + std::to_string(newsOf_) + " " + news_;
    }
  }
  return "";
}

// Follows "timed out waiting for" from the ranks this one waited for, to ranks that said nothing.
std::string PeerWatch::stalled(const std::vector<int>& waited, double grace) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace);
  std::set<int> silent, timedOut;
  for (;;) {
    poll();
    silent.clear();
    timedOut.clear();
    std::vector<int> frontier = waited;
    std::set<int> seen;
    while (!frontier.empty()) {
      const int r = frontier.back();
      frontier.pop_back();
      if (r < 0 || r >= e_.size || r == e_.rank || !seen.insert(r).second) continue;
      const Goodbye& g = inbox_->received[r];
      if (!inbox_->arrived[r]) {
        silent.insert(r);
      } else if (g.timedOut) {
        timedOut.insert(r);
        frontier.insert(frontier.end(), std::begin(g.waitedFor), std::end(g.waitedFor));
      }
    }
    // a stopped or dead rank will say nothing: no use listening for it
    bool mute = true;
    for (int r : silent) mute = mute && !stateOf(r).empty();
    if (mute || std::chrono::steady_clock::now() >= until) break;
    timespec nap{0, 2 * 1000 * 1000};
    nanosleep(&nap, nullptr);
  }
  // the silent ranks held the others up: those this rank waited for, or those they waited for
  std::string culprits;
  bool known = false;  // the state of some silent rank: worth saying even without a chain
  for (int r : silent) {
    const std::string state = stateOf(r);
    known = known || !state.empty();
    culprits += (culprits.empty() ? "" : ", ") + std::string("rank ") +
                std::to_string(e_.names[r]) + (state.empty() ? "" : " (" + state + ")");
  }
  if (timedOut.empty()) return known ? culprits : "";
  return culprits.empty() ? "" : culprits + ", for which the ranks this one waits for wait too";
}

}  // namespace dpcore
