// The shared-memory transport (shm_transport.h): the headers' exchange, the FIFOs, direct's
// reads and stages, liveness, abort and the messages of a timeout.
#include "cpu/shm_transport.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "algo/direct.h"
#include "algo/one_shot.h"
#include "algo/ring.h"
#include "core/contracts.h"
#include "core/process.h"
#include "cpu/peer_read.h"
#include "cpu/shm_peers.h"
#include "cpu/shm_prims.h"

namespace dpcore {

static_assert(contract::isTransport<ShmTransport>());  // core/contracts.h names what it lacks

namespace {

int usableCpus() {
  cpu_set_t cpus;
  if (sched_getaffinity(0, sizeof(cpus), &cpus) != 0) return 1;
  return CPU_COUNT(&cpus);
}

// A word at a known address in every rank, for canReadPeers.
constexpr uint64_t kProbeValue = 0x6470636f72650a01ull;  // "dpcore" and a version
const volatile uint64_t probeWord = kProbeValue;

// DPCORE_SPIN_US as the polling time; dpcore/settings.py bounds it alike (MAX_SPIN_US).
std::chrono::nanoseconds spinTime(double us) {
  if (!(us >= 0 && us <= 1e6)) {
    throw std::invalid_argument("dpcore: spin_us must be 0 to 1000000 microseconds, not " +
                                std::to_string(us));
  }
  return std::chrono::nanoseconds(static_cast<int64_t>(us * 1e3));
}

// The offset this rank's slot data takes (ShmLayout::kAlignSpan): that of the user buffer the
// slot is copied from (one-shot publishes the input) or mostly copied into (the ring, which
// kAuto may run; direct uses no slots).
uint32_t alignFor(const Task& task) {
  bool ring = task.algo == Algo::kRing || task.algo == Algo::kAuto;
  bool input = !ring || task.coll == Coll::kReduceScatter || task.coll == Coll::kReduce;
  return ShmLayout::alignOf(input ? task.in : task.out);
}

std::string sidesDiffer(int peer, bool peerOnDevice) {
  const char* host = "host arrays";
  const char* device = "CUDA arrays";
  return "rank " + std::to_string(peer) + " made this call on " + (peerOnDevice ? device : host) +
         ", this rank on " + (peerOnDevice ? host : device) +
         ": every rank passes its arrays on the same side";
}

}  // namespace

ShmTransport::ShmTransport(const std::string& name, bool create, int rank,
                           const ShmConfig& config, double spinUs)
    : rank_(rank), config_(config), layout_(config),
      segment_(std::make_unique<ShmSegment>(name, layout_.bytes(), create)),
      base_(segment_->data()), oversubscribed_(config.size > usableCpus()),
      spin_(spinTime(spinUs)), pollFor_(spin_),
      lastPeerCheck_(std::chrono::steady_clock::now()) {
  RankControl* mine = layout_.rank(base_, rank_);
  mine->pid.value.store(static_cast<uint64_t>(getpid()), std::memory_order_release);
  mine->probe.value.store(reinterpret_cast<uint64_t>(&probeWord), std::memory_order_release);
}

ShmTransport::~ShmTransport() { leave(""); }

void ShmTransport::leave(const std::string&) {
  layout_.rank(base_, rank_)->left.value.store(1, std::memory_order_release);
  notifyAll();
}

bool ShmTransport::canReadPeers() {
  bool ok = true;
  for (int r = 0; r < config_.size; ++r) {
    if (r == rank_) continue;
    RankControl* peer = layout_.rank(base_, r);
    uint64_t value = 0;
    ok = ok && readPeer(static_cast<pid_t>(peer->pid.value.load(std::memory_order_acquire)),
                        peer->probe.value.load(std::memory_order_acquire), &value,
                        sizeof(value)) == 0 && value == kProbeValue;
  }
  return ok;
}

void ShmTransport::validate(const Task& task) const {
  checkOneShotFits(task, config_.oneShotBytes);
}

ShmMeta ShmTransport::annotate(const Task& task) const {
  return shmMetaOf(task, alignFor(task),
                   [this](const void* p, size_t bytes) { return shared_->find(p, bytes); });
}

void ShmTransport::abort(const std::string& message) {
  SegmentControl* control = layout_.control(base_);
  uint64_t expected = 0;
  // The first rank to fail tells the others why; they stop waiting and report it.
  if (control->abort.value.compare_exchange_strong(expected, 1 + rank_)) {
    std::strncpy(control->reason, message.c_str(), sizeof(control->reason) - 1);
    control->abort.value.store(1 + rank_, std::memory_order_release);
    notifyAll();
  }
}

void ShmTransport::checkAbort() const {
  SegmentControl* control = layout_.control(base_);
  if (control->abort.value.load(std::memory_order_acquire) != 0) {
    call_->fail(std::string("aborted: ") + control->reason);
  }
}

// Why a peer will never post what we wait for: it made the call on the other side (and may
// since have closed its communicator, having failed there), it died, or it closed its
// communicator.
std::string ShmTransport::peerTrouble(bool leftCounts) {
  lastPeerCheck_ = std::chrono::steady_clock::now();
  std::string elsewhere = otherSideTrouble();
  if (!elsewhere.empty()) return elsewhere;
  for (int r = 0; r < config_.size; ++r) {
    if (r == rank_) continue;
    RankControl* peer = layout_.rank(base_, r);
    auto pid = static_cast<pid_t>(peer->pid.value.load(std::memory_order_acquire));
    if (pid > 0 && !processAlive(pid)) {
      return "rank " + std::to_string(name(r)) + " (pid " + std::to_string(pid) + ") died";
    }
    if (leftCounts && peer->left.value.load(std::memory_order_acquire) != 0) {
      return "rank " + std::to_string(name(r)) +
             " closed its communicator without making this call";
    }
  }
  return "";
}

// Numbers are the communicator's, alike on every rank and never reused: a peer whose last call
// on the other side has this call's number made this call there.
std::string ShmTransport::otherSideTrouble() const {
  if (meeting_) return "";
  const bool device = hostSide_ != nullptr;
  const ShmTransport& host = device ? *hostSide_ : *this;
  Counter RankControl::*there = device ? &RankControl::entered : &RankControl::elsewhere;
  for (int r = 0; r < config_.size; ++r) {
    if (r == rank_) continue;
    if ((host.layout_.rank(host.base_, r)->*there).value.load(std::memory_order_acquire) ==
        call_->number) {
      return sidesDiffer(name(r), !device);
    }
  }
  return "";
}

void ShmTransport::meetElsewhere(const CallContext& call) {
  call_ = &call;
  enterElsewhere(call.number);
  notifyAll();  // peers meeting here too
  struct Meeting {
    bool& flag;
    explicit Meeting(bool& f) : flag(f) { flag = true; }
    ~Meeting() { flag = false; }
  } meeting(meeting_);
  for (int r = 0; r < config_.size; ++r) {
    if (r == rank_) continue;
    RankControl* peer = layout_.rank(base_, r);
    waitUntil([&] {
      return peer->elsewhere.value.load(std::memory_order_acquire) >= call.number ||
             peer->entered.value.load(std::memory_order_acquire) == call.number;
    }, r);
    if (peer->entered.value.load(std::memory_order_acquire) == call.number) {
      call.fail(sidesDiffer(name(r), false));
    }
  }
}

// Follows the waits from `peer`: the rank where they end waits for nobody, so it holds up
// every rank on the way (stopped, or busy elsewhere). A timeout names it rather than the
// neighbour this rank waits for: "rank 0 (stopped), for which ...", or "" if none is found.
std::string ShmTransport::heldUpBy(int peer) const {
  if (peer < 0) return "";
  auto stopped = [&](int r) {
    const auto pid = static_cast<pid_t>(layout_.rank(base_, r)->pid.value.load());
    return pid > 0 && processState(pid) == ProcessState::kStopped;
  };
  std::vector<bool> seen(config_.size, false);
  int r = peer;
  while (!stopped(r)) {  // a stopped rank may have stopped inside a wait of its own
    seen[r] = true;
    const uint64_t w = layout_.rank(base_, r)->waitingFor.value.load(std::memory_order_acquire);
    if (w == kWaitingForSeveral) return "";
    if (w == 0) break;
    const int next = static_cast<int>(w - 1);
    if (next < 0 || next >= config_.size || seen[next]) return "";
    r = next;
  }
  const std::string held =
      "rank " + std::to_string(name(r)) + (stopped(r) ? " (stopped)" : "");
  if (r == peer) return stopped(r) ? held : "";
  return held + ", for which the rank this one waits for waits too";
}

// "ranks 1, 3": those whose `counter` (arrived, done) is below seq.
std::string ShmTransport::ranksBehind(Counter RankControl::*counter, uint64_t seq) const {
  std::string list;
  int count = 0;
  for (int r = 0; r < config_.size; ++r) {
    if ((layout_.rank(base_, r)->*counter).value.load(std::memory_order_acquire) < seq) {
      list += (count++ ? ", " : "") + std::to_string(name(r));
    }
  }
  return (count == 1 ? "rank " : "ranks ") + list;
}

std::vector<CollHeader> ShmTransport::exchange(const Task& task, const CollHeader& mine) {
  openExchange();
  // Alone, the collective is a copy: nobody reads the slot.
  if (task.algo == Algo::kOneShot && config_.size > 1 && publishesPayload(task, rank_) &&
      task.count) {
    std::memcpy(oneShotSlot(rank_) + mine.meta<ShmMeta>().align, task.in,
                task.count * dtypeSize(task.dtype));
  }
  return closeExchange(mine);
}

void ShmTransport::openExchange() {
  const uint64_t seq = call_->seq;
  checkAbort();
  // Peers may still read what we published for seq-2 in this parity until they enter seq-1.
  for (int r = 0; r < config_.size; ++r) {
    Counter& arrived = layout_.rank(base_, r)->arrived;
    waitUntil([&] { return arrived.value.load(std::memory_order_acquire) + 1 >= seq; }, r);
  }
}

std::vector<CollHeader> ShmTransport::closeExchange(const CollHeader& mine) {
  const uint64_t seq = call_->seq;
  RankControl* me = layout_.rank(base_, rank_);
  me->header[seq % 2] = mine;
  me->arrived.value.store(seq, std::memory_order_release);
  notifyAll();
  waitAll(&RankControl::arrived, "");
  std::vector<CollHeader> headers(config_.size);
  for (int r = 0; r < config_.size; ++r) {
    headers[r] = r == rank_ ? mine : layout_.rank(base_, r)->header[seq % 2];
  }
  return headers;
}

ShmPrims ShmTransport::prims(const RingCall& ring, const std::vector<CollHeader>& headers) {
  const Task& task = ring.task;
  return ShmPrims(*this, task.dtype, task.op, avgDivisor(task, ring.n),
                  headers[(rank_ + 1) % ring.n].meta<ShmMeta>().align,
                  headers[rank_].meta<ShmMeta>().align, ringScratch(),
                  StepSpans(call_->tracer, call_->seq, ringVerbsPerRound(task.coll, ring.n)));
}

ShmPayloads ShmTransport::payloads(const Task&, const std::vector<CollHeader>& headers) {
  return ShmPayloads(*this, headers);
}

ShmPeerMemory ShmTransport::peerMemory(const std::vector<CollHeader>& headers) {
  return ShmPeerMemory(*this, headers);
}

char* ShmTransport::sendSlot() {
  return layout_.fifoSlot(base_, (rank_ + 1) % config_.size, waitSendSlot());
}

uint64_t ShmTransport::waitSendSlot() {
  const int next = (rank_ + 1) % config_.size;
  FifoControl* f = layout_.fifo(base_, next);
  const uint64_t slots = config_.fifoSlots, head = sendHead_;
  waitUntil([&] { return head - f->tail.value.load(std::memory_order_acquire) < slots; }, next);
  return head;
}

void ShmTransport::postSend() {
  const int next = (rank_ + 1) % config_.size;
  layout_.fifo(base_, next)->head.value.store(++sendHead_, std::memory_order_release);
  notify(next);
}

const char* ShmTransport::recvSlot() { return layout_.fifoSlot(base_, rank_, waitRecvSlot()); }

uint64_t ShmTransport::waitRecvSlot() {
  FifoControl* f = layout_.fifo(base_, rank_);
  const uint64_t tail = recvTail_;
  waitUntil([&] { return f->head.value.load(std::memory_order_acquire) > tail; },
            (rank_ + config_.size - 1) % config_.size);
  return tail;
}

void ShmTransport::watch(const char* what) {
  checkAbort();
  const auto now = std::chrono::steady_clock::now();
  if (now - lastPeerCheck_ > std::chrono::milliseconds(200)) {
    const std::string trouble = peerTrouble(false);
    if (!trouble.empty()) call_->fail(trouble);
  }
  if (call_->expired(now)) call_->fail(call_->timedOut(what));
}

int ShmTransport::peerTroubleCount() {
  int gone = 0;
  for (int r = 0; r < config_.size; ++r) {
    if (r == rank_) continue;
    RankControl* peer = layout_.rank(base_, r);
    auto pid = static_cast<pid_t>(peer->pid.value.load(std::memory_order_acquire));
    gone += (pid > 0 && !processAlive(pid)) || peer->left.value.load(std::memory_order_acquire);
  }
  return gone;
}

void ShmTransport::postRecv() {
  layout_.fifo(base_, rank_)->tail.value.store(++recvTail_, std::memory_order_release);
  notify((rank_ + config_.size - 1) % config_.size);
}

char* ShmTransport::ringScratch() {
  ringScratch_.resize(config_.slotBytes);
  return ringScratch_.data();
}

char* ShmTransport::directScratch(int i) {
  directScratch_.resize(2 * kDirectPieceBytes);
  return directScratch_.data() + i * kDirectPieceBytes;
}

void ShmTransport::signal(Counter RankControl::*stage) {
  (layout_.rank(base_, rank_)->*stage).value.store(call_->seq, std::memory_order_release);
  notifyAll();
}

void ShmTransport::signal(DirectStage stage) {
  signal(stage == DirectStage::kReduced ? &RankControl::reduced : &RankControl::done);
}

void ShmTransport::waitAll(DirectStage stage) {
  if (stage == DirectStage::kReduced) waitAll(&RankControl::reduced, " to finish its chunk");
  else waitAll(&RankControl::done, " to finish reading");
}

void ShmTransport::waitAll(Counter RankControl::*stage, const char* what) {
  const uint64_t seq = call_->seq;
  auto all = [&] {
    for (int r = 0; r < config_.size; ++r) {
      if ((layout_.rank(base_, r)->*stage).value.load(std::memory_order_acquire) < seq) {
        return false;
      }
    }
    return true;
  };
  waitUntil(all, [&] { return ranksBehind(stage, seq) + what; });
}

// Reads in pieces, so that a peer's failure (the abort flag) stops a long read early: through
// this rank's mapping where the peer's data is in a shared buffer, else by a kernel copy.
// stream: the destination is the user's output and too large to stay in cache (stream_copy.h);
// only a copy through a mapping can stream, the kernel's copy cannot be told to.
void ShmTransport::readFrom(int peer, uint64_t remote, uint32_t region, void* local,
                            size_t bytes, bool stream) {
  constexpr size_t kPiece = 4 << 20;
  auto pid = static_cast<pid_t>(
      layout_.rank(base_, peer)->pid.value.load(std::memory_order_acquire));
  auto dst = static_cast<char*>(local);
  for (size_t done = 0; done < bytes; done += kPiece) {
    checkAbort();
    size_t len = std::min(kPiece, bytes - done);
    if (region && shared_->copyFrom(peer, region, remote + done, dst + done, len, stream)) {
      continue;
    }
    int err = readPeer(pid, remote + done, dst + done, len);
    if (err == ESRCH) {
      call_->fail("rank " + std::to_string(name(peer)) + " (pid " + std::to_string(pid) +
                  ") died");
    }
    if (err != 0) {
      call_->fail("cannot read rank " + std::to_string(name(peer)) +
                  "'s buffer (process_vm_readv: " +
                  std::strerror(err) + ")");
    }
  }
}

}  // namespace dpcore
