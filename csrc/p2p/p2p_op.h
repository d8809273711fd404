// One point-to-point operation as one rank posted it, and the words its errors use. A send is
// numbered per destination (send #3 from rank 0 to rank 1 is the third message on that ordered
// pair); a receive per rank (recv #3 on rank 1 is the third receive rank 1 posted), so a
// mismatch names the message and the receive that met, as the collectives name their calls.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dpcore/types.h"

namespace dpcore {

constexpr int kAnySource = -1;
// The most bytes one message holds: MPI counts them in an int (mpi_channel.cc), so every channel
// takes as much and no more.
constexpr size_t kMaxMessageBytes = (size_t{1} << 31) - 1;

struct P2pOp {
  enum State { kPending = 0, kDone = 1, kFailed = 2 };

  bool send = false;
  int rank = 0;             // this rank
  int peer = kAnySource;    // the destination, or the source a receive accepts (kAnySource)
  int tag = 0;
  DType dtype = DType::kFloat32;
  char* data = nullptr;
  size_t bytes = 0;
  uint64_t number = 0;      // see the file comment
  std::chrono::steady_clock::time_point deadline;

  // Where the channel is with it (p2p/shm_channel.cc, p2p/mpi_channel.cc).
  int source = kAnySource;  // a receive: the rank its message came from, once it has one
  size_t moved = 0;         // bytes posted (a send) or taken (a receive) so far
  uint64_t endSlot = 0;     // shared memory: the mailbox count that completes it
  int stage = 0;            // the channel's own progress marker
  std::vector<char> buffer; // MPI: the header this op sends or receives into
  std::vector<uint64_t> requests;  // MPI requests in flight

  std::atomic<int> state{kPending};
  std::string error;  // set before state becomes kFailed

  bool finished() const { return state.load(std::memory_order_acquire) != kPending; }
  void finish() { state.store(kDone, std::memory_order_release); }
  void fail(const std::string& why) {
    error = why;
    state.store(kFailed, std::memory_order_release);
  }

  // "send #3 from rank 0 to rank 1 (tag 0, 40 bytes of float32)", "recv #3 on rank 1 (from any
  // rank, tag 0, 40 bytes of float32)"
  std::string describe() const;
  // "dpcore send #3 from rank 0 to rank 1 (...): why"
  std::string message(const std::string& why) const { return "dpcore " + describe() + ": " + why; }
  // What a timeout waited for: "rank 1 to receive it", "rank 0 to send", "any rank to send".
  std::string waitingFor() const;
};

// The message both ranks raise when a send meets a receive that does not take it (tag, bytes or
// dtype differ), or "" where they agree.
std::string p2pMismatch(int from, uint64_t sendNumber, int tag, DType dtype, uint64_t bytes,
                        const P2pOp& recv);

}  // namespace dpcore
