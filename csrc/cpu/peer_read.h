// Reading a peer's memory directly (Linux cross-memory attach, process_vm_readv): one copy from
// the peer's buffer into ours, where a FIFO needs two (into a slot, out of it). MPICH moves its
// large messages this way. The kernel allows it between processes of one user unless ptrace is
// restricted, so a communicator probes it once (ShmTransport::canReadPeers) before it is used.
// Writing (process_vm_writev) passes the very same check (ptrace's attach mode), so the probe
// of the read answers for both.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace dpcore {

// Copies `bytes` from address `remote` in process `pid` to `local`. Returns 0, or the errno of
// the failed call (ESRCH: the process is gone; EPERM: not allowed; EFAULT: bad address).
int readPeer(pid_t pid, uint64_t remote, void* local, size_t bytes);
// Copies `bytes` from `local` to address `remote` in process `pid`; the same errors.
int writePeer(pid_t pid, uint64_t remote, const void* local, size_t bytes);

}  // namespace dpcore
