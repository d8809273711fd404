// The words of point-to-point errors (p2p_op.h).
#include "p2p/p2p_op.h"

namespace dpcore {
namespace {

std::string what(int tag, uint64_t bytes, DType dtype) {
  return "tag " + std::to_string(tag) + ", " + std::to_string(bytes) + " bytes of " +
         dtypeName(dtype);
}

std::string sendName(uint64_t number, int from, int to) {
  return "send #" + std::to_string(number) + " from rank " + std::to_string(from) + " to rank " +
         std::to_string(to);
}

}  // namespace

std::string P2pOp::describe() const {
  if (send) return sendName(number, rank, peer) + " (" + what(tag, bytes, dtype) + ")";
  const std::string from = peer == kAnySource ? "any rank" : "rank " + std::to_string(peer);
  return "recv #" + std::to_string(number) + " on rank " + std::to_string(rank) + " (from " +
         from + ", " + what(tag, bytes, dtype) + ")";
}

std::string P2pOp::waitingFor() const {
  if (send) return "rank " + std::to_string(peer) + " to receive it";
  return (peer == kAnySource ? "any rank" : "rank " + std::to_string(peer)) + " to send";
}

std::string p2pMismatch(int from, uint64_t sendNumber, int tag, DType dtype, uint64_t bytes,
                        const P2pOp& recv) {
  if (tag == recv.tag && dtype == recv.dtype && bytes == recv.bytes) return "";
  return "dpcore " + sendName(sendNumber, from, recv.rank) + " (" + what(tag, bytes, dtype) +
         ") met recv #" + std::to_string(recv.number) + " on rank " + std::to_string(recv.rank) +
         " expecting " + what(recv.tag, recv.bytes, recv.dtype) +
         ": every send must meet a receive of the same tag, size and dtype";
}

}  // namespace dpcore
