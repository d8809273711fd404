// The device transport (device_transport.h): set-up and regions, the headers' exchange, and
// every kernel run to its end while the host watches the peers.
#include "cuda/device_transport.h"

#include <sched.h>

#include <cstring>
#include <stdexcept>

#include "algo/one_shot.h"
#include "algo/ring.h"
#include "core/contracts.h"

namespace dpcore {

static_assert(contract::isTransport<DeviceTransport>());  // core/contracts.h names what it lacks

namespace {

// Where this rank's one-shot payload sits in its slot, modulo 16: that of the input it is
// copied from, so that the copy and the kernels that read it move whole packs. (The ring's
// slots say where each segment sits: DevicePrims.)
uint32_t packOffsetFor(const Task& task) {
  return static_cast<uint32_t>(reinterpret_cast<uintptr_t>(task.in) % DeviceTransport::kHeadroom);
}

ShmConfig controlConfig(int size, const DeviceConfig& config) {
  if (size > kMaxSources) {
    throw std::invalid_argument("dpcore: the device transport takes at most " +
                                std::to_string(kMaxSources) + " ranks on a node, not " +
                                std::to_string(size));
  }
  // The host segment carries headers and counters only: its own slots stay as small as allowed.
  return ShmConfig{size, config.fifoSlots, kMaxDTypeSize, kMaxDTypeSize};
}

// A call into the device, whose own error fails the collective on every rank; a CommError (a
// peer's news, the deadline) passes as it is.
template <class F>
auto onDevice(const CallContext& call, F f) -> decltype(f()) {
  try {
    return f();
  } catch (const CommError&) {
    throw;
  } catch (const std::exception& e) {
    call.fail(e.what());
  }
}

}  // namespace

DeviceTransport::DeviceTransport(std::unique_ptr<Device> device, const std::string& controlName,
                                 bool create, int rank, int size, const DeviceConfig& config,
                                 double spinUs)
    : device_(std::move(device)), config_(config),
      control_(controlName, create, rank, controlConfig(size, config), spinUs) {
  checkRingSlots(config.fifoSlots, config.slotBytes);
  if (device_->onHostCores()) control_.leaveCoresToWork();
  peers_.assign(size, nullptr);
  IpcHandle memory;
  peers_[rank] = static_cast<char*>(device_->allocShared(bytes(), &memory));
  handles_.assign(memory.bytes, sizeof(memory.bytes));
  handles_ += device_->makeEvents(2 * config.fifoSlots);  // the ring's: filled, drained
}

void DeviceTransport::mapPeers(const std::vector<std::string>& handles) {
  for (int r = 0; r < size(); ++r) {
    if (r == rank()) continue;
    if (handles[r].size() < sizeof(IpcHandle::bytes)) {
      throw std::invalid_argument("dpcore: bad IPC handles");
    }
    IpcHandle memory;
    std::memcpy(memory.bytes, handles[r].data(), sizeof(memory.bytes));
    peers_[r] = static_cast<char*>(device_->openShared(memory, bytes()));
    // the ring awaits the events of its two neighbours alone
    if (r == prevRank() || r == nextRank()) {
      device_->openEvents(r, handles[r].substr(sizeof(memory.bytes)));
    }
  }
}

void DeviceTransport::validate(const Task& task) const {
  checkOneShotFits(task, config_.oneShotBytes);
  if (task.pieces.at) {  // its one-shot copy and annotate take one array (dpcore/comm/ refuses it)
    throw std::invalid_argument("dpcore: scatter takes x as a list on the host only");
  }
  const size_t bytes = task.count * dtypeSize(task.dtype);
  if (task.algo == Algo::kAuto) {
    throw std::invalid_argument("the device transport takes one_shot, ring or direct");
  }
  if (task.algo == Algo::kDirect) {  // the peers read what this rank publishes in its regions
    // broadcast: the root's buffer is read; gather: every buffer but the root's
    const bool readsIn = task.coll == Coll::kBroadcast ? task.root == rank()
                         : task.coll == Coll::kGather  ? task.root != rank()
                                                       : true;
    const bool readsOut = task.coll == Coll::kAllReduce;
    const size_t outBytes = task.total * dtypeSize(task.dtype);
    const void* published = task.coll == Coll::kBroadcast ? task.out : task.in;
    if ((readsIn && bytes && !regionOf(published, bytes)) ||
        (readsOut && outBytes && !regionOf(task.out, outBytes))) {
      throw std::invalid_argument("dpcore: algo 'direct' on CUDA arrays reads the peers' "
                                  "buffers, so they must come from "
                                  "comm.alloc(..., device=\"cuda\") or be registered "
                                  "(comm.register)");
    }
  }
}

ShmMeta DeviceTransport::annotate(const Task& task) const {
  return shmMetaOf(task, packOffsetFor(task),
                   [this](const void* p, size_t bytes) { return regionOf(p, bytes); });
}

void DeviceTransport::mapRegion(uint32_t id, size_t bytes, const std::vector<IpcHandle>& handles,
                                const std::vector<uint64_t>& bases,
                                const std::vector<uint64_t>& offsets, bool owned) {
  Region region{bytes, std::vector<char*>(size()), bases, std::vector<char*>(size()), owned};
  std::lock_guard<std::mutex> lock(regionsMutex_);
  for (int r = 0; r < size(); ++r) {
    if (r == rank()) {
      region.mapped[r] = reinterpret_cast<char*>(bases[r]);
      continue;
    }
    try {
      region.opened[r] = openPeer(r, handles[r], offsets[r] + bytes);
    } catch (...) {  // the region is not made: unmap what it had mapped
      for (int q = 0; q < r; ++q) {
        if (q != rank()) closePeer(q, region.opened[q]);
      }
      throw;
    }
    region.mapped[r] = region.opened[r] + offsets[r];
  }
  regions_[id] = std::move(region);
}

char* DeviceTransport::openPeer(int peer, const IpcHandle& handle, size_t bytes) {
  const auto key = std::make_pair(peer, std::string(handle.bytes, sizeof(handle.bytes)));
  auto it = imports_.find(key);
  if (it == imports_.end()) {
    char* base = static_cast<char*>(device_->openShared(handle, bytes));
    it = imports_.emplace(key, Import{base, 0}).first;
  }
  ++it->second.regions;
  return it->second.base;
}

void DeviceTransport::closePeer(int peer, char* base) {
  for (auto it = imports_.begin(); it != imports_.end(); ++it) {
    if (it->first.first != peer || it->second.base != base) continue;
    if (--it->second.regions == 0) {
      device_->closeShared(base);
      imports_.erase(it);
    }
    return;
  }
}

void DeviceTransport::unmapRegion(uint32_t id) {
  std::lock_guard<std::mutex> lock(regionsMutex_);
  const auto it = regions_.find(id);
  if (it == regions_.end()) return;
  for (int r = 0; r < size(); ++r) {
    if (r != rank()) closePeer(r, it->second.opened[r]);
  }
  if (it->second.owned) unmapped_[id] = it->second.mapped[rank()];
  regions_.erase(it);
}

void DeviceTransport::freeRegion(uint32_t id) {
  std::lock_guard<std::mutex> lock(regionsMutex_);
  const auto it = unmapped_.find(id);
  if (it == unmapped_.end()) return;
  device_->freeShared(it->second);
  unmapped_.erase(it);
}

uint32_t DeviceTransport::regionOf(const void* p, size_t bytes) const {
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(regionsMutex_);
  for (const auto& [id, region] : regions_) {
    const uintptr_t base = region.bases[rank()];
    if (at >= base && at + bytes <= base + region.bytes) return id;
  }
  return 0;
}

const char* DeviceTransport::peerAddress(int peer, uint32_t id, uint64_t addr) const {
  std::lock_guard<std::mutex> lock(regionsMutex_);
  const auto it = regions_.find(id);
  if (it == regions_.end()) call_->fail("rank " + std::to_string(name(peer)) +
                                        "'s buffer is in a region this rank has not mapped");
  return it->second.mapped[peer] + (addr - it->second.bases[peer]);
}

void DeviceTransport::begin(const CallContext& call) {
  call_ = &call;
  control_.begin(call);
  if (host_ != nullptr) host_->enterElsewhere(call.number);
}

std::vector<CollHeader> DeviceTransport::exchange(const Task& task, const CollHeader& mine) {
  // a gather that met its root's round of lengths is made again (Collectives::run): its
  // mark is followed already
  const bool moves = task.coll != Coll::kBarrier && task.algo != Algo::kCountsOnly &&
                     task.ready != followed_;
  if (moves) {
    // direct: the peers' kernels read this rank's buffers as soon as they have its header, and
    // nothing orders their streams after ours, so the caller's work on them must have ended
    // first (the host waits: no kernel ever waits for another process's)
    while (task.algo == Algo::kDirect && !device_->passed(task.ready)) {
      control_.watch("the caller's stream to reach this call");
      sched_yield();
    }
    // our kernels read the caller's buffers only after the work queued before the call
    device_->follow(task.ready);
    followed_ = task.ready;
  }
  control_.openExchange();  // from here our one-shot slot of this parity is free
  if (task.algo == Algo::kOneShot && size() > 1 && publishesPayload(task, rank()) &&
      task.count) {
    copy(oneShotSlot(rank()) + mine.meta<ShmMeta>().align, task.in,
         task.count * dtypeSize(task.dtype));
  }
  return control_.closeExchange(mine);
}

DevicePrims DeviceTransport::prims(const RingCall& ring, const std::vector<CollHeader>&) {
  const Task& task = ring.task;
  return DevicePrims(*this, task.dtype, task.op, avgDivisor(task, ring.n),
                     StepSpans(call_->tracer, call_->seq, ringVerbsPerRound(task.coll, ring.n)));
}

DevicePayloads DeviceTransport::payloads(const Task&, const std::vector<CollHeader>& headers) {
  return DevicePayloads(*this, headers);
}

DevicePeerMemory DeviceTransport::peerMemory(const std::vector<CollHeader>& headers) {
  return DevicePeerMemory(*this, headers);
}

void DeviceTransport::copyAlone(void* out, const void* in, size_t bytes) { copy(out, in, bytes); }

char* DeviceTransport::fifoSlot(int r, uint64_t index) const {
  return peers_[r] + (index % config_.fifoSlots) * slotStride();
}

char* DeviceTransport::oneShotSlot(int r) const {
  return peers_[r] + config_.fifoSlots * slotStride() + (call_->seq % 2) * oneShotStride();
}

void DeviceTransport::reduce(DType dtype, ReduceOp op, const void* const* inputs, int numInputs,
                             void* const* outputs, int numOutputs, size_t count, int divisor,
                             bool roundEach) {
  ReduceCopyArgs args;
  for (int k = 0; k < numInputs; ++k) args.srcs[k] = inputs[k];
  args.numSrcs = numInputs;
  for (int d = 0; d < numOutputs; ++d) args.dsts[d] = outputs[d];
  args.numDsts = numOutputs;
  args.count = count;
  args.divisor = divisor;
  args.roundEach = roundEach;
  run(dtype, op, args);
}

void DeviceTransport::copy(void* dst, const void* src, size_t bytes) {
  reduce(DType::kUInt8, ReduceOp::kSum, &src, 1, &dst, 1, bytes, 0, false);  // bytes as they are
}

uint64_t DeviceTransport::launch(DType dtype, ReduceOp op, const ReduceCopyArgs& args) {
  if (args.count == 0) return 0;
  const size_t elem = dtypeSize(dtype), perPack = 16 / elem;
  const size_t packed = (args.count - packHead(args, elem)) / perPack * perPack;  // reduceCopy's
  ++counts_.kernels;
  counts_.bytesRead += args.numSrcs * args.count * elem;
  counts_.bytesWritten += args.numDsts * args.count * elem;
  counts_.packedBytes += (args.numSrcs + args.numDsts) * packed * elem;
  return onDevice(*call_, [&] { return device_->launch(dtype, op, args); });
}

void DeviceTransport::waitFor(uint64_t ticket) {
  if (ticket == 0) return;
  ++counts_.hostWaits;
  // A short spin catches a small kernel; then idle (a GPU: yield; the emulation: sleep, as its
  // kernels need the cores), so that ranks that share the cores run, and watch the peers and the
  // deadline meanwhile.
  onDevice(*call_, [&] {
    for (int spin = 0; !device_->done(ticket); ++spin) {
      if (spin < 256) continue;
      control_.watch("this rank's kernel to end");
      device_->idle(ticket);
    }
  });
}

}  // namespace dpcore
