// The shared-memory transport (shm_transport.h): the headers' exchange, the FIFOs, direct's
// reads and stages, an exchange's rounds, and abort (the watch on the peers: shm_liveness.cc).
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
    ok = ok && readPeer(peerPid(r), peer->probe.value.load(std::memory_order_acquire), &value,
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

std::vector<CollHeader> ShmTransport::exchange(const Task& task, const CollHeader& mine) {
  openExchange();
  // Alone, the collective is a copy: nobody reads the slot.
  if (task.algo == Algo::kOneShot && config_.size > 1 && publishesPayload(task, rank_) &&
      task.count) {
    copyInput(task, 0, task.count * dtypeSize(task.dtype),
              oneShotSlot(rank_) + mine.meta<ShmMeta>().align);
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

namespace {

// A round's mark: above every mark of the calls before (rounds stay under 2^24 a call: the
// slot is at least 4 KiB, so up to 64 GiB a rank).
uint64_t roundMark(uint64_t seq, uint64_t round) { return (seq << 24) + round + 1; }

}  // namespace

void ShmTransport::signalRound(Counter RankControl::*stage, uint64_t round) {
  (layout_.rank(base_, rank_)->*stage).value.store(roundMark(call_->seq, round),
                                                   std::memory_order_release);
  notifyAll();
}

void ShmTransport::waitRound(Counter RankControl::*stage, uint64_t round, const char* what) {
  waitAllReach(stage, roundMark(call_->seq, round), what);
}

ShmRounds ShmTransport::rounds() { return ShmRounds(*this); }

void ShmTransport::waitAll(Counter RankControl::*stage, const char* what) {
  waitAllReach(stage, call_->seq, what);
}

void ShmTransport::waitAllReach(Counter RankControl::*stage, uint64_t mark, const char* what) {
  auto all = [&] {
    for (int r = 0; r < config_.size; ++r) {
      if ((layout_.rank(base_, r)->*stage).value.load(std::memory_order_acquire) < mark) {
        return false;
      }
    }
    return true;
  };
  waitUntil(all, [&] { return ranksBehind(stage, mark) + what; });
}

void ShmTransport::readFrom(int peer, uint64_t remote, uint32_t region, void* local,
                            size_t bytes, bool stream) {
  auto dst = static_cast<char*>(local);
  copyInPieces(peer, "read", "process_vm_readv", bytes, [&](size_t done, size_t len) {
    if (region && shared_->copyFrom(peer, region, remote + done, dst + done, len, stream)) {
      return 0;
    }
    return readPeer(peerPid(peer), remote + done, dst + done, len);
  });
}

void ShmTransport::writeTo(int peer, uint64_t remote, uint32_t region, const void* local,
                           size_t bytes, bool stream) {
  auto src = static_cast<const char*>(local);
  copyInPieces(peer, "write", "process_vm_writev", bytes, [&](size_t done, size_t len) {
    if (region && shared_->copyTo(peer, region, remote + done, src + done, len, stream)) {
      return 0;
    }
    return writePeer(peerPid(peer), remote + done, src + done, len);
  });
}

pid_t ShmTransport::peerPid(int peer) const {
  return static_cast<pid_t>(layout_.rank(base_, peer)->pid.value.load(std::memory_order_acquire));
}

}  // namespace dpcore
