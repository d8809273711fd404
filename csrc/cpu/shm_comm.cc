#include "cpu/shm_comm.h"

#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "algo/ring.h"
#include "cpu/direct.h"
#include "cpu/reduce.h"
#include "cpu/shm_prims.h"
#include "cpu/stream_copy.h"
#include "dpcore/error.h"

namespace dpcore {
namespace {

// A peer is gone when its pid no longer exists or is a zombie (killed, not yet reaped).
bool processAlive(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return true;  // no procfs: trust kill()
  std::string line;
  std::getline(stat, line);
  size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return true;
  char state = line[close + 2];
  return state != 'Z' && state != 'X';
}

int usableCpus() {
  cpu_set_t cpus;
  if (sched_getaffinity(0, sizeof(cpus), &cpus) != 0) return 1;
  return CPU_COUNT(&cpus);
}

}  // namespace

namespace {
// A word at a known address in every rank, for canReadPeers.
constexpr uint64_t kProbeValue = 0x6470636f72650a01ull;  // "dpcore" and a version
const volatile uint64_t probeWord = kProbeValue;
}  // namespace

ShmComm::ShmComm(const std::string& name, bool create, int rank, const ShmConfig& config,
                 double timeoutSeconds)
    : rank_(rank), config_(config), layout_(config),
      segment_(std::make_unique<ShmSegment>(name, layout_.bytes(), create)),
      base_(segment_->data()), timeout_(timeoutSeconds),
      oversubscribed_(config.size > usableCpus()) {
  layout_.rank(base_, rank_)->pid.value.store(static_cast<uint64_t>(getpid()),
                                              std::memory_order_release);
  layout_.rank(base_, rank_)->probe.value.store(reinterpret_cast<uint64_t>(&probeWord),
                                                std::memory_order_release);
  lastPeerCheck_ = std::chrono::steady_clock::now();
}

ShmComm::~ShmComm() {
  layout_.rank(base_, rank_)->left.value.store(1, std::memory_order_release);
  notifyAll();
}

[[noreturn]] void ShmComm::fail(const std::string& why) {
  std::string msg = std::string("dpcore ") + collName_ + " #" + std::to_string(seq_) +
                    " on rank " + std::to_string(rank_) + ": " + why;
  SegmentControl* control = layout_.control(base_);
  uint64_t expected = 0;
  // The first rank to fail tells the others why; they stop waiting and report it.
  if (control->abort.value.compare_exchange_strong(expected, 1 + rank_)) {
    std::strncpy(control->reason, msg.c_str(), sizeof(control->reason) - 1);
    control->abort.value.store(1 + rank_, std::memory_order_release);
    notifyAll();
  }
  brokenReason_ = msg;
  throw CommError(msg);
}

// Why a peer will never post what we wait for: it died, or it closed its communicator. Either
// happens after everything it did post, so the caller looks once more before it gives up.
std::string ShmComm::peerTrouble() {
  lastPeerCheck_ = std::chrono::steady_clock::now();
  for (int r = 0; r < config_.size; ++r) {
    if (r == rank_) continue;
    RankControl* peer = layout_.rank(base_, r);
    auto pid = static_cast<pid_t>(peer->pid.value.load(std::memory_order_acquire));
    if (pid > 0 && !processAlive(pid)) {
      return "rank " + std::to_string(r) + " (pid " + std::to_string(pid) + ") died";
    }
    if (peer->left.value.load(std::memory_order_acquire) != 0) {
      return "rank " + std::to_string(r) + " closed its communicator without making this call";
    }
  }
  return "";
}

std::string ShmComm::describe(const CollHeader& h) const {
  auto coll = static_cast<Coll>(h.coll);
  std::string s = std::string(collName(coll)) + "(count=" + std::to_string(h.count);
  if (coll == Coll::kAllGather) s += ", total=" + std::to_string(h.total);
  if (coll != Coll::kBarrier) s += std::string(", dtype=") + dtypeName(static_cast<DType>(h.dtype));
  if (coll == Coll::kAllReduce || coll == Coll::kReduceScatter) {
    s += std::string(", op=") + opName(static_cast<ReduceOp>(h.op));
  }
  if (coll == Coll::kBroadcast) s += ", root=" + std::to_string(h.root);
  static const char* algos[] = {"one_shot", "ring", "counts_only", "direct", "auto"};
  s += std::string(", algo=") + algos[h.algo] + ")";
  return s;
}

// Publishes this rank's header (and, for one-shot, its payload) for collective seq_.
void ShmComm::arrive(const Task& task, CollHeader& header) {
  // Peers may still read what we published for seq-2 in this parity until they enter seq-1.
  for (int r = 0; r < config_.size; ++r) {
    Counter& arrived = layout_.rank(base_, r)->arrived;
    waitUntil([&] { return arrived.value.load(std::memory_order_acquire) + 1 >= seq_; }, r);
  }
  RankControl* mine = layout_.rank(base_, rank_);
  mine->header[seq_ % 2] = header;
  if (task.algo == Algo::kOneShot && task.coll != Coll::kBarrier) {
    size_t elem = dtypeSize(task.dtype);
    // Alone, run() copies input to output directly: nobody reads the slot.
    bool hasPayload = config_.size > 1 && (task.coll != Coll::kBroadcast || task.root == rank_);
    if (hasPayload && task.count) {
      std::memcpy(layout_.oneShotSlot(base_, rank_, seq_) + header.align, task.in,
                  task.count * elem);
    }
  }
  mine->arrived.value.store(seq_, std::memory_order_release);
  notifyAll();
}

std::string ShmComm::ranksBehind(Counter RankControl::*counter, uint64_t seq) const {
  std::string list;
  int count = 0;
  for (int r = 0; r < config_.size; ++r) {
    if ((layout_.rank(base_, r)->*counter).value.load(std::memory_order_acquire) < seq) {
      list += (count++ ? ", " : "") + std::to_string(r);
    }
  }
  return (count == 1 ? "rank " : "ranks ") + list;
}

std::vector<CollHeader> ShmComm::gatherHeaders(const CollHeader& mine) {
  waitForAll(&RankControl::arrived, "");
  std::vector<CollHeader> headers(config_.size);
  for (int r = 0; r < config_.size; ++r) {
    headers[r] = r == rank_ ? mine : layout_.rank(base_, r)->header[seq_ % 2];
  }
  return headers;
}

void ShmComm::checkHeaders(const std::vector<CollHeader>& headers, const CollHeader& mine) {
  size_t shardTotal = 0;
  for (int r = 0; r < config_.size; ++r) {
    const CollHeader& h = headers[r];
    shardTotal += h.count;
    bool same = h.seq == mine.seq && h.coll == mine.coll && h.dtype == mine.dtype &&
                h.op == mine.op && h.root == mine.root && h.algo == mine.algo &&
                h.total == mine.total &&
                (mine.coll == static_cast<int>(Coll::kAllGather) || h.count == mine.count);
    if (!same) {
      fail("mismatch: rank " + std::to_string(rank_) + " called " + describe(mine) + " but rank " +
           std::to_string(r) + " called " + describe(h));
    }
  }
  if (mine.coll == static_cast<int>(Coll::kAllGather) &&
      mine.algo != static_cast<int>(Algo::kCountsOnly) && shardTotal != mine.total) {
    fail("mismatch: the shards add up to " + std::to_string(shardTotal) +
         " elements but the output holds " + std::to_string(mine.total));
  }
}

bool ShmComm::canReadPeers() {
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

// The offset this rank's slot data takes (ShmLayout::kAlignSpan): that of the user buffer the
// slot is copied from (one-shot publishes the input) or mostly copied into (the ring, which
// kTuned may run; direct uses no slots).
static uint32_t alignFor(const Task& task) {
  bool ring = task.algo == Algo::kRing || task.algo == Algo::kTuned;
  bool input = !ring || task.coll == Coll::kReduceScatter;
  return ShmLayout::alignOf(input ? task.in : task.out);
}

// Whether the input lies inside the output (all_gather), the output inside the input
// (reduce_scatter) or both are one buffer; broadcast is always in place.
static bool inPlace(const Task& task) {
  const size_t elem = dtypeSize(task.dtype);
  auto in = reinterpret_cast<uintptr_t>(task.in), out = reinterpret_cast<uintptr_t>(task.out);
  switch (task.coll) {
    case Coll::kAllGather:
      return in >= out && in < out + task.total * elem;
    case Coll::kReduceScatter:
      return out >= in && out < in + task.count * elem;
    default:
      return in == out || task.coll == Coll::kBroadcast;
  }
}

std::vector<CollHeader> ShmComm::run(const Task& task) {
  if (!brokenReason_.empty()) {
    throw CommError("dpcore: communicator unusable after an earlier failure: " + brokenReason_);
  }
  const size_t elem = dtypeSize(task.dtype);
  if (task.algo == Algo::kOneShot && task.count * elem > config_.oneShotBytes) {
    throw std::invalid_argument("one_shot payload of " + std::to_string(task.count * elem) +
                                " bytes exceeds its slot of " +
                                std::to_string(config_.oneShotBytes));
  }
  ++seq_;
  collName_ = collName(task.coll);
  const size_t bytes = task.total * elem;
  TraceSpan span(tracer_, collName_, seq_, -1, bytes);
  deadline_ = std::chrono::steady_clock::now() +
              std::chrono::microseconds(static_cast<int64_t>(timeout_ * 1e6));
  const void* published = task.coll == Coll::kBroadcast ? task.out : task.in;
  const uint32_t inRegion = shared_->find(published, task.count * elem);
  const uint32_t outRegion =
      task.coll == Coll::kAllReduce ? shared_->find(task.out, task.count * elem) : 0;
  // kTuned: rank 0 picks, by its tuner's timings or by the fixed thresholds, and its header
  // carries the pick, so every rank runs the same algorithm whatever buffers it passed
  const bool tuned = task.algo == Algo::kTuned, timed = tuned && config_.tune;
  const BufferKind kind{inRegion != 0, inPlace(task)};
  Algo pick = Algo::kRing;
  if (tuned && rank_ == 0 &&
      (timed ? tuner_.pickDirect(task.coll, bytes, kind)
             : Tuner::fixedPick(task.coll, bytes, kind))) {
    pick = Algo::kDirect;
  }
  CollHeader header{seq_,
                    static_cast<int32_t>(task.coll),
                    static_cast<int32_t>(task.dtype),
                    static_cast<int32_t>(task.op),
                    task.root,
                    static_cast<int32_t>(task.algo),
                    alignFor(task),
                    static_cast<int32_t>(pick),
                    task.count,
                    task.total,
                    reinterpret_cast<uint64_t>(published),
                    reinterpret_cast<uint64_t>(task.out),
                    inRegion,
                    outRegion};
  checkAbort();
  arrive(task, header);
  std::vector<CollHeader> headers = gatherHeaders(header);
  checkHeaders(headers, header);
  if (task.coll == Coll::kBarrier || task.algo == Algo::kCountsOnly) return headers;
  const Algo algo = tuned ? static_cast<Algo>(headers[0].pick) : task.algo;
  ++algoCalls_[static_cast<int>(algo)];
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = timed ? Clock::now() : Clock::time_point{};  // tuner only
  if (config_.size == 1) {
    // Alone, every collective is a copy (avg divides by 1); broadcast is in place.
    if (task.coll != Coll::kBroadcast && task.in != task.out && task.count) {
      std::memmove(task.out, task.in, task.count * elem);
    }
  } else if (algo == Algo::kRing) {
    runRing(task, headers);
  } else if (algo == Algo::kDirect) {
    runDirect(task, headers);
  } else {
    runOneShot(task, headers);
  }
  if (timed && rank_ == 0) {
    std::chrono::duration<double> took = Clock::now() - start;
    tuner_.record(task.coll, bytes, kind, algo == Algo::kDirect, took.count());
  }
  return headers;
}

std::vector<size_t> ShmComm::exchangeCounts(DType dtype, size_t mine) {
  Task task;
  task.coll = Coll::kAllGather;
  task.dtype = dtype;
  task.algo = Algo::kCountsOnly;
  task.count = mine;
  std::vector<size_t> counts;
  for (const CollHeader& h : run(task)) counts.push_back(h.count);
  return counts;
}

// One shot: every rank has put its whole payload in its own slot; each reads what it needs
// from all slots, in rank order, so every rank computes identical bits.
void ShmComm::runOneShot(const Task& task, const std::vector<CollHeader>& headers) {
  const int n = config_.size;
  const size_t elem = dtypeSize(task.dtype);
  auto slot = [&](int r) { return layout_.oneShotSlot(base_, r, seq_) + headers[r].align; };
  char* out = static_cast<char*>(task.out);
  const int divisor = task.op == ReduceOp::kAvg ? n : 0;
  std::vector<const void*> inputs(n);
  switch (task.coll) {
    case Coll::kAllReduce:
      for (int r = 0; r < n; ++r) inputs[r] = slot(r);
      reduceMany(task.dtype, task.op, inputs.data(), n, out, task.count, divisor);
      break;
    case Coll::kReduceScatter: {
      Range mine = shardRange(task.count, n, rank_);
      for (int r = 0; r < n; ++r) inputs[r] = slot(r) + mine.start * elem;
      reduceMany(task.dtype, task.op, inputs.data(), n, out, mine.size(), divisor);
      break;
    }
    case Coll::kAllGather: {
      size_t offset = 0;
      for (int r = 0; r < n; ++r) {
        size_t bytes = headers[r].count * elem;
        const void* src = r == rank_ ? task.in : slot(r);
        if (bytes && src != out + offset) std::memcpy(out + offset, src, bytes);
        offset += bytes;
      }
      break;
    }
    case Coll::kBroadcast:
      if (rank_ != task.root && task.count) {
        std::memcpy(out, slot(task.root), task.count * elem);
      }
      break;
    case Coll::kBarrier:
      break;
  }
  // The slots may be rewritten once every peer has entered the next collective; no wait here.
}

void ShmComm::runRing(const Task& task, const std::vector<CollHeader>& headers) {
  const int n = config_.size;
  const size_t elem = dtypeSize(task.dtype);
  const size_t segmentCount = config_.slotBytes / elem;
  // Verbs per round, for the trace's step labels: the 2(n-1) hops of an all-reduce take 2n-1
  // verbs (the first only sends, the last only receives), reduce-scatter and all-gather n, a
  // broadcast chain 1.
  const int steps = task.coll == Coll::kAllReduce ? 2 * n - 1
                    : task.coll == Coll::kBroadcast ? 1 : n;
  ringScratch_.resize(config_.slotBytes);
  ShmPrims prims(*this, task.dtype, task.op, headers[(rank_ + 1) % n].align, headers[rank_].align,
                 steps, ringScratch_.data());
  auto in = static_cast<const char*>(task.in);
  auto out = static_cast<char*>(task.out);
  switch (task.coll) {
    case Coll::kAllReduce:
      ringAllReduce(prims, in, out, task.count, elem, rank_, n, segmentCount);
      break;
    case Coll::kReduceScatter:
      ringReduceScatter(prims, in, out, task.count, elem, rank_, n, segmentCount);
      break;
    case Coll::kAllGather: {
      std::vector<size_t> counts;
      for (const CollHeader& h : headers) counts.push_back(h.count);
      ringAllGather(prims, in, out, counts, elem, rank_, n, segmentCount);
      break;
    }
    case Coll::kBroadcast:
      ringBroadcast(prims, out, task.count, elem, rank_, n, task.root, segmentCount);
      break;
    case Coll::kBarrier:
      break;
  }
}

// Direct: each rank copies what it needs straight out of the peers' buffers (addresses in the
// headers), starting with the next rank so that readers spread over the peers, then tells the
// peers it is done and waits until they are, since a buffer must not change while a peer may
// still read it. all_reduce and reduce_scatter first reduce this rank's chunk (reading that
// chunk of every peer's input); all_reduce then waits until every chunk is complete and gathers
// the other chunks from the peers' outputs. In place is safe: a rank overwrites another rank's
// chunk of its own buffer only in the gather, after every rank has finished reading inputs.
void ShmComm::runDirect(const Task& task, const std::vector<CollHeader>& headers) {
  const int n = config_.size;
  const size_t elem = dtypeSize(task.dtype);
  char* out = static_cast<char*>(task.out);
  const bool stream = task.total * elem >= streamMinBytes();  // for copies into the output
  if (task.coll == Coll::kAllGather) {
    std::vector<size_t> offset(n + 1, 0);
    for (int r = 0; r < n; ++r) offset[r + 1] = offset[r] + headers[r].count * elem;
    for (int k = 1; k < n; ++k) {
      int peer = (rank_ + k) % n;
      readFrom(peer, headers[peer].addr, headers[peer].inRegion, out + offset[peer],
               offset[peer + 1] - offset[peer], stream);
    }
    if (task.in != out + offset[rank_] && task.count) {
      copyToOutput(out + offset[rank_], task.in, task.count * elem, stream);
    }
  } else if (task.coll == Coll::kBroadcast) {
    const CollHeader& root = headers[task.root];
    if (rank_ != task.root) {
      readFrom(task.root, root.addr, root.inRegion, out, task.count * elem, stream);
    }
  } else if (task.coll == Coll::kReduceScatter) {
    reduceOwnChunk(task, headers, out);
  } else if (task.coll == Coll::kAllReduce) {
    reduceOwnChunk(task, headers, out + shardRange(task.count, n, rank_).start * elem);
    layout_.rank(base_, rank_)->reduced.value.store(seq_, std::memory_order_release);
    notifyAll();
    waitForAll(&RankControl::reduced, " to finish its chunk");
    for (int k = 1; k < n; ++k) {
      int peer = (rank_ + k) % n;
      Range c = shardRange(task.count, n, peer);
      readFrom(peer, headers[peer].outAddr + c.start * elem, headers[peer].outRegion,
               out + c.start * elem, c.size() * elem, stream);
    }
  }
  layout_.rank(base_, rank_)->done.value.store(seq_, std::memory_order_release);
  notifyAll();
  waitForAll(&RankControl::done, " to finish reading");
}

void ShmComm::waitForAll(Counter RankControl::*counter, const char* what) {
  auto all = [&] {
    for (int r = 0; r < config_.size; ++r) {
      if ((layout_.rank(base_, r)->*counter).value.load(std::memory_order_acquire) < seq_) {
        return false;
      }
    }
    return true;
  };
  waitUntil(all, [&] { return ranksBehind(counter, seq_) + what; });
}

// This rank's chunk of the reduction, written to dst, in the ring's order: the ring starts chunk
// r at rank r+1 and each rank after it applies op(partial, its input), so here the partial
// starts as rank r+1's input, takes every later peer's in ring order and ends with our own. Ring
// and direct therefore give the same bits, and auto may pick either. A cache-sized piece at a
// time: the partial lives in directAcc_, each later peer's data lands in directPeer_, and only
// the last operation writes dst, after the peers have been read (dst may be our input).
void ShmComm::reduceOwnChunk(const Task& task, const std::vector<CollHeader>& headers,
                             char* dst) {
  constexpr size_t kPieceBytes = 128 << 10;
  const int n = config_.size;
  const size_t elem = dtypeSize(task.dtype);
  const size_t pieceCount = kPieceBytes / elem;
  const int divisor = task.op == ReduceOp::kAvg ? n : 0;
  directAcc_.resize(kPieceBytes);
  directPeer_.resize(kPieceBytes);
  Range chunk = shardRange(task.count, n, rank_);
  auto in = static_cast<const char*>(task.in);
  for (size_t off = 0; off < chunk.size(); off += pieceCount) {
    const size_t len = std::min(pieceCount, chunk.size() - off);
    const size_t at = (chunk.start + off) * elem;  // byte offset in every rank's input
    char* acc = directAcc_.data();
    const CollHeader& first = headers[(rank_ + 1) % n];
    readFrom((rank_ + 1) % n, first.addr + at, first.inRegion, acc, len * elem, false);
    for (int k = 2; k < n; ++k) {
      int peer = (rank_ + k) % n;
      readFrom(peer, headers[peer].addr + at, headers[peer].inRegion, directPeer_.data(),
               len * elem, false);
      reduce2(task.dtype, task.op, acc, directPeer_.data(), acc, len, 0);
    }
    reduce2(task.dtype, task.op, acc, in + at, dst + off * elem, len, divisor);
  }
}

// Reads in pieces, so that a peer's failure (the abort flag) stops a long read early: through
// this rank's mapping where the peer's data is in a shared buffer, else by a kernel copy.
// stream: the destination is the user's output and too large to stay in cache (stream_copy.h);
// only a copy through a mapping can stream, the kernel's copy cannot be told to.
void ShmComm::readFrom(int peer, uint64_t remote, uint32_t region, void* local, size_t bytes,
                       bool stream) {
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
      fail("rank " + std::to_string(peer) + " (pid " + std::to_string(pid) + ") died");
    }
    if (err != 0) {
      fail("cannot read rank " + std::to_string(peer) + "'s buffer (process_vm_readv: " +
           std::strerror(err) + ")");
    }
  }
}

}  // namespace dpcore
