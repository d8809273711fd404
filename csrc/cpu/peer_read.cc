// readPeer (peer_read.h): process_vm_readv, repeated until every byte has come.
#include "cpu/peer_read.h"

#include <sys/uio.h>

#include <cerrno>

namespace dpcore {

int readPeer(pid_t pid, uint64_t remote, void* local, size_t bytes) {
  auto dst = static_cast<char*>(local);
  while (bytes > 0) {
    iovec localIov{dst, bytes};
    iovec remoteIov{reinterpret_cast<void*>(remote), bytes};
    ssize_t got = process_vm_readv(pid, &localIov, 1, &remoteIov, 1, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (got == 0) return EFAULT;
    dst += got;  // a partial read (page boundary of a short mapping): carry on
    remote += static_cast<uint64_t>(got);
    bytes -= static_cast<size_t>(got);
  }
  return 0;
}

}  // namespace dpcore
