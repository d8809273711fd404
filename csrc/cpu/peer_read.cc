// readPeer and writePeer (peer_read.h): process_vm_readv / writev, repeated until every byte
// has gone.
#include "cpu/peer_read.h"

#include <sys/uio.h>

#include <cerrno>

namespace dpcore {
namespace {

using Move = ssize_t (*)(pid_t, const iovec*, unsigned long, const iovec*, unsigned long,
                         unsigned long);

int movePeer(Move move, pid_t pid, uint64_t remote, char* local, size_t bytes) {
  while (bytes > 0) {
    iovec localIov{local, bytes};
    iovec remoteIov{reinterpret_cast<void*>(remote), bytes};
    ssize_t moved = move(pid, &localIov, 1, &remoteIov, 1, 0);
    if (moved < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (moved == 0) return EFAULT;
    local += moved;  // a partial move (page boundary of a short mapping): carry on
    remote += static_cast<uint64_t>(moved);
    bytes -= static_cast<size_t>(moved);
  }
  return 0;
}

}  // namespace

int readPeer(pid_t pid, uint64_t remote, void* local, size_t bytes) {
  return movePeer(process_vm_readv, pid, remote, static_cast<char*>(local), bytes);
}

int writePeer(pid_t pid, uint64_t remote, const void* local, size_t bytes) {
  // process_vm_writev only reads the local iovec's memory
  auto src = const_cast<char*>(static_cast<const char*>(local));
  return movePeer(process_vm_writev, pid, remote, src, bytes);
}

}  // namespace dpcore
