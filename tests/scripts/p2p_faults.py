"""A point-to-point op that cannot complete: both ranks of the pair raise CommError naming the op
and the peer, and the communicator is broken on every rank (its next barrier raises).

Usage: [mpiexec -disable-auto-cleanup] -n K python [as_child.py python] p2p_faults.py FAULT
  FAULT = size:    rank 0 sends 10 float32 to rank 1, which receives 8
          tag:     rank 0 sends with tag 0, rank 1 receives with tag 3
          large:   size, past the mailbox's inline piece: 40000 bytes against 32000
          send:    rank 0 sends to rank 1, which never receives (run with a short DPCORE_TIMEOUT)
          recv:    rank 1 receives from rank 0, which never sends
          die:     rank 1 SIGKILLs itself while rank 0 receives from it and rank 2 sends to it
          close:   rank 1 closes its communicator while rank 0 receives from it
Every rank prints 'rank R: pid PID' and 'rank R: mpi shm ...'; a rank whose op failed prints
'rank R: error SECONDS | MESSAGE' (SECONDS since its op began), and every survivor 'rank R: again
MESSAGE' for the barrier after. Under `die` the survivors leave with os._exit (MPI_Finalize would
wait for the dead rank); otherwise every rank ends normally, as a program that caught the error.
"""
import os
import signal
import sys
import time

import numpy as np

import dpcore
from fault_kit import mpi_shm_segments, say

fault = sys.argv[1]
comm = dpcore.init()
rank, size = comm.rank, comm.size
say(rank, f"pid {os.getpid()}")
comm.barrier()
say(rank, f"mpi shm {mpi_shm_segments()}")
comm.barrier()
SENDS = {"size": (10, 0), "tag": (8, 0), "large": (10_000, 0)}
RECVS = {"size": (8, 0), "tag": (8, 3), "large": (8_000, 0)}
start = time.monotonic()
try:
    if fault in SENDS and rank in (0, 1):
        count, tag = (SENDS if rank == 0 else RECVS)[fault]
        x = np.ones(count, np.float32)
        comm.send(x, 1, tag) if rank == 0 else comm.recv(x, 0, tag)
    elif fault == "send" and rank == 0:
        comm.send(np.ones(3, np.float32), 1)
    elif fault == "recv" and rank == 1:
        comm.recv(np.ones(3, np.float32), 0)
    elif fault == "die" and rank == 1:
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGKILL)
    elif fault == "die" and rank in (0, 2):
        x = np.ones(1 << 20, np.float32)  # 4 MiB: read from the sender's buffer, or staged
        comm.recv(x, 1) if rank == 0 else comm.send(x, 1)
    elif fault == "close" and rank == 1:
        time.sleep(0.5)
        comm.close()
        say(rank, "closed")
        sys.exit(0)
    elif fault == "close" and rank == 0:
        comm.recv(np.ones(3, np.float32), 1)
    elif fault in ("send", "recv"):
        time.sleep(2 * comm.timeout)  # the pair's peer, and the others: idle past the timeout
    say(rank, "no error")
except dpcore.CommError as e:
    say(rank, f"error {time.monotonic() - start:.2f} | {e}")
try:
    comm.barrier()
    say(rank, "barrier after the failure succeeded")
except dpcore.CommError as again:
    say(rank, f"again {again}")
if fault == "die":
    os._exit(0)
