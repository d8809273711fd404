// Buffers that every rank of a node maps (Communicator.alloc, as NCCL's ncclMemAlloc and
// PyTorch's symmetric memory): one allocation gives every rank a buffer of its own, each a
// shared-memory segment that every peer maps too. The direct algorithm reads a peer's data out
// of its buffer with a plain memcpy through this rank's mapping of it, where other memory needs
// a kernel copy (process_vm_readv), which pins the peer's pages one by one before it copies.
//
// A rank publishes, per call, which region holds its buffers (find), so a peer never translates
// an address by a mapping its owner has since freed; a peer that has freed its own mapping of
// that region falls back to the kernel copy (copyFrom returns false).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "host/stream_copy.h"

namespace dpcore {

class SharedBuffers {
 public:
  // Region `id` (the same on every rank) of `bytes` per rank: rank r's buffer is at bases[r]
  // in rank r's process and at mapped[r] in this one (mapped[rank]: this rank's own buffer).
  void add(uint32_t id, int rank, size_t bytes, std::vector<char*> mapped,
           std::vector<uint64_t> bases) {
    std::lock_guard<std::mutex> lock(mu_);
    char* local = mapped[rank];
    regions_[id] = Region{local, bytes, std::move(mapped), std::move(bases)};
    count_.store(regions_.size(), std::memory_order_relaxed);
  }
  // Before the mapping goes: waits for a copy out of it in flight.
  void remove(uint32_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    regions_.erase(id);
    count_.store(regions_.size(), std::memory_order_relaxed);
  }
  // The region that holds [p, p + bytes) in this process; 0 if none does.
  uint32_t find(const void* p, size_t bytes) const {
    // every collective asks, twice: without allocations, skip the lock (an array that a call
    // passes was allocated before the call, so its region is counted already)
    if (count_.load(std::memory_order_relaxed) == 0) return 0;
    std::lock_guard<std::mutex> lock(mu_);
    auto a = reinterpret_cast<uintptr_t>(p);
    for (const auto& [id, r] : regions_) {
      auto base = reinterpret_cast<uintptr_t>(r.local);
      if (a >= base && a + bytes <= base + r.bytes) return id;
    }
    return 0;
  }
  // Copies `bytes` from address `remote` of rank `peer`, which that rank says lies in region
  // `id`, through this rank's mapping of it. false: this rank does not map it (any more).
  // stream: with streaming stores (copyToOutput), for destinations past the cache.
  bool copyFrom(int peer, uint32_t id, uint64_t remote, void* dst, size_t bytes,
                bool stream) const {
    return withMapping(peer, id, remote, bytes, [&](char* there) {
      copyToOutput(dst, there, bytes, stream);
    });
  }
  // The same, to rank `peer`'s buffer from `src`.
  bool copyTo(int peer, uint32_t id, uint64_t remote, const void* src, size_t bytes,
              bool stream) const {
    return withMapping(peer, id, remote, bytes, [&](char* there) {
      copyToOutput(there, src, bytes, stream);
    });
  }

 private:
  // copy(where [remote, remote + bytes) of the peer lies here), under the lock: the region may
  // not be unmapped mid-copy. false: not mapped here.
  template <class Copy>
  bool withMapping(int peer, uint32_t id, uint64_t remote, size_t bytes, Copy copy) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = regions_.find(id);
    if (it == regions_.end()) return false;
    const Region& r = it->second;
    const uint64_t base = r.bases[peer];
    if (remote < base || remote + bytes > base + r.bytes) return false;
    copy(r.mapped[peer] + (remote - base));
    return true;
  }

  struct Region {
    char* local;  // this rank's own buffer
    size_t bytes;
    std::vector<char*> mapped;    // per rank: its buffer, as this rank maps it
    std::vector<uint64_t> bases;  // per rank: its buffer, in its own process
  };
  mutable std::mutex mu_;
  std::map<uint32_t, Region> regions_;
  std::atomic<size_t> count_{0};
};

}  // namespace dpcore
