// Peer memory over shared memory: what algo/one_shot.h and algo/direct.h read and signal through.
// One-shot payloads sit in the peers' one-shot slots of the segment, published as each rank
// arrived; direct reads the peers' own buffers, at the addresses their headers carry.
#pragma once

#include <cstdint>
#include <vector>

#include "algo/direct.h"
#include "core/call.h"
#include "cpu/shm_transport.h"
#include "host/reduce.h"

namespace dpcore {

class ShmPayloads : public HostLoops {
 public:
  ShmPayloads(const ShmTransport& t, const std::vector<CollHeader>& headers)
      : t_(t), headers_(headers) {}
  const char* payload(int r) const {
    return t_.oneShotSlot(r) + headers_[r].meta<ShmMeta>().align;
  }

 private:
  const ShmTransport& t_;
  const std::vector<CollHeader>& headers_;
};

class ShmPeerMemory : public HostLoops {
 public:
  static constexpr bool kMapped = false;  // a peer's memory is read by a copy (readFrom)
  static constexpr bool kWritesOutputs = true;  // and written by one (writeTo)
  ShmPeerMemory(ShmTransport& t, const std::vector<CollHeader>& headers)
      : t_(t), headers_(headers) {}

  void readInput(int peer, size_t offset, void* dst, size_t bytes, bool stream) {
    const CollHeader& h = headers_[peer];
    const ShmMeta m = h.meta<ShmMeta>();
    if (h.pieceElems == kNotInPieces) {
      t_.readFrom(peer, m.addr + offset, m.inRegion, dst, bytes, stream);
      return;
    }
    // in pieces (task.h): each piece's address from the peer's table, then the bytes there
    const size_t piece = h.pieceElems * dtypeSize(static_cast<DType>(h.dtype));
    auto to = static_cast<char*>(dst);
    forEachPieceRun(piece, offset, bytes, [&](size_t done, size_t len) {
      const size_t at = offset + done;
      uint64_t addr = 0;
      t_.readFrom(peer, m.addr + at / piece * sizeof(addr), 0, &addr, sizeof(addr), false);
      t_.readFrom(peer, addr + at % piece, 0, to + done, len, stream);
    });
  }
  void readOutput(int peer, size_t offset, void* dst, size_t bytes, bool stream) {
    const ShmMeta m = headers_[peer].meta<ShmMeta>();
    t_.readFrom(peer, m.outAddr + offset, m.outRegion, dst, bytes, stream);
  }
  void writeOutput(int peer, size_t offset, const void* src, size_t bytes, bool stream) {
    const ShmMeta m = headers_[peer].meta<ShmMeta>();
    t_.writeTo(peer, m.outAddr + offset, m.outRegion, src, bytes, stream);
  }
  void signal(DirectStage stage) { t_.signal(stage); }
  void waitAll(DirectStage stage) { t_.waitAll(stage); }
  char* scratch(int i) { return t_.directScratch(i); }

 private:
  ShmTransport& t_;
  const std::vector<CollHeader>& headers_;
};

// An exchange where the ranks may not read each other's memory (algo/exchange.h:
// exchangeInRounds): each rank's input passes through its one-shot slots, a window at a time.
class ShmRounds : public HostLoops {
 public:
  explicit ShmRounds(ShmTransport& t) : t_(t) {}
  size_t window() const { return t_.stageBytes(); }
  char* slot(int r, int i) const { return t_.roundSlot(r, i); }
  void publish(uint64_t round) { t_.signalRound(&RankControl::published, round); }
  void waitPublished(uint64_t round) {
    t_.waitRound(&RankControl::published, round, " to publish its window");
  }

 private:
  ShmTransport& t_;
};

}  // namespace dpcore
