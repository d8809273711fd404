"""Rank 0 stops (SIGSTOP) in an all_reduce at 3 ranks; every other rank must raise a
dpcore.CommError that names rank 0 (not its own ring neighbour) at about the timeout. Once the
others have failed, rank 1 SIGCONTs rank 0, which must then raise too (in that call or the next
two): never report success for a collective that its peers abandoned.

Usage: mpiexec -disable-auto-cleanup -n K python as_child.py python peer_stalls.py WHEN DIR
  (DPCORE_TIMEOUT set by the caller, a few seconds)
  WHEN = before:  rank 0 stops itself right before all_reduce #3 (128 MiB, ring); the others
                  are inside it
         during:  a thread of rank 0 stops the process 0.5 s into #3, most likely in the middle
                  of its ring (the call takes about a second here; more 128 MiB calls follow,
                  for a fast machine); rank 1 enters #3 0.2 s after the others, so rank 2,
                  which receives from rank 1, runs out of time first
  DIR  = a directory for the marks (fault_kit.Marks): 'fault' (when rank 0 stopped), 'cont' (when
         rank 1 let it go on), 'done.R'.

Every rank prints 'rank R: succeeded N' (the all_reduces it finished), and
'rank R: error SECONDS | TYPE: MESSAGE' (SECONDS since rank 0 stopped; for rank 0, since it was
let go on) or 'rank R: hang ...' past fault_kit.GRACE, and leaves with os._exit.
"""
import os
import signal
import sys
import threading
import time

import numpy as np
from mpi4py import MPI

import dpcore
from fault_kit import GRACE, Marks, mpi_shm_segments, report_error, say, start_watchdog

when, directory = sys.argv[1], sys.argv[2]
STALLED = 0
BIG = 1 << 25  # float32: 128 MiB
marks = Marks(directory)
world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
others = [r for r in range(size) if r != STALLED]
pids = world.allgather(os.getpid())
say(rank, f"pid {os.getpid()}")


def stop():
    marks.make("fault")
    os.kill(os.getpid(), signal.SIGSTOP)


def let_go_on():
    """Rank 1, once every other rank is done: SIGCONT rank 0 (rank 1's watchdog does it too,
    if rank 1 hangs)."""
    marks.make("cont")
    os.kill(pids[STALLED], signal.SIGCONT)


if rank == STALLED:  # its watchdog counts from when it was let go on
    start_watchdog(rank, marks, "cont", "all_reduce after SIGCONT")
else:
    start_watchdog(rank, marks, "fault", f"all_reduce, rank {STALLED} stopped ({when})",
                   cont_pid=pids[STALLED] if rank == 1 else None)

comm = dpcore.init()
small = np.ones(1 << 16, np.float32)
big = np.ones(BIG, np.float32)  # a ring all_reduce of it takes about a second here
comm.all_reduce(small[:100])                 # 1
comm.all_reduce(small, algo="ring")          # 2
say(rank, f"mpi shm {mpi_shm_segments()}")
world.Barrier()

succeeded = 2
# 3: rank 0 stalls, the others raise ('during': in whichever of 3..12 the stop comes). Where rank
# 0 finished the call the others failed, it must fail one of the last two.
calls = [big] * (1 if when == "before" else 10) + [small, small]
try:
    for i, x in enumerate(calls, start=3):
        if i == 3 and rank == STALLED:
            if when == "before":
                time.sleep(0.3)  # the others are inside #3 by now
                stop()
            else:
                threading.Timer(0.5, stop).start()
        if i == 3 and rank == 1 and when == "during":
            time.sleep(0.2)  # rank 2's deadline comes first: it waits for rank 1
        comm.all_reduce(x, algo="ring")
        succeeded += 1
    say(rank, "no error")
except Exception as e:  # noqa: BLE001 (the test checks the type)
    report_error(rank, marks, "cont" if rank == STALLED else "fault", e)
say(rank, f"succeeded {succeeded}")
marks.make(f"done.{rank}")

if rank == 1:
    marks.wait([f"done.{r}" for r in others], GRACE)
    let_go_on()
if rank != STALLED:
    marks.wait([f"done.{STALLED}"], GRACE + 10)  # stay alive while rank 0 finishes its call
os._exit(0)
