"""Rank 1 dies (or leaves) while the others are in an all_reduce (or a reduce to rank 0); every
survivor must get a dpcore.CommError naming rank 1 within seconds of the death, whatever the
transport.

Usage: mpiexec -disable-auto-cleanup -n K python as_child.py python peer_dies.py FAULT WHEN DIR
       [COLL]
  FAULT = kill:      SIGKILL
          raise:     an uncaught exception (plain `python`, so no MPI_Abort: the interpreter
                     exits as after any error, running its atexit handlers)
          exit:      sys.exit(3)
          close:     comm.close(), then the process lives on (sleeps) until the others are done
  WHEN  = waiting:   the others wait in all_reduce #3, which rank 1 never calls
          during:    rank 1 dies while three large ring all_reduces of its own are in flight
  DPCORE_CUDA_EMULATION=1 runs the collectives on (emulated) CUDA arrays: the device transport;
  DEVICE=cupy on CuPy arrays, on a GPU.
  DIR   = a directory for the marks (fault_kit.Marks): 'fault' (the time rank 1 died), 'done.R'.
  COLL  = all_reduce (the default) or reduce: the collective of calls #3 on.

Every rank prints 'rank R: pid PID' and 'rank R: mpi shm ...'; each survivor prints
'rank R: error SECONDS | TYPE: MESSAGE' (SECONDS since the death) or, past fault_kit.GRACE,
'rank R: hang ...', and leaves with os._exit.
"""
import os
import signal
import sys
import time

import numpy as np
from mpi4py import MPI

import dpcore
from fault_kit import (Marks, mpi_shm_segments, report_error, say, start_reaper,
                       start_watchdog)

fault, when, directory = sys.argv[1:4]
coll = sys.argv[4] if len(sys.argv) > 4 else "all_reduce"
VICTIM = 1
marks = Marks(directory)
world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
say(rank, f"pid {os.getpid()}")
if rank != VICTIM:
    start_watchdog(rank, marks, "fault", f"{coll}, rank {VICTIM} {fault} ({when})")

comm = dpcore.init()
x = np.ones(1 << 20, np.float32)  # 4 MiB: many ring segments
if os.environ.get("DEVICE") == "cupy":  # on a GPU (tests/gpu/device_check.sh)
    import cupy
    x = cupy.asarray(x)
elif os.environ.get("DPCORE_CUDA_EMULATION") == "1":  # on the device transport
    from dpcore import emulated
    x = emulated.asarray(x)
comm.all_reduce(x[:100])                 # 1
comm.all_reduce(x, algo="ring")          # 2
ring_call = {"all_reduce": lambda **kw: comm.all_reduce(x, algo="ring", **kw),
             "reduce": lambda **kw: comm.reduce(x, root=0, algo="ring", **kw)}[coll]
say(rank, f"mpi shm {mpi_shm_segments()}")
world.Barrier()

if rank == VICTIM:
    if when == "during":
        works = [ring_call(async_op=True) for _ in range(3)]
        time.sleep(0.01)
    else:
        time.sleep(0.5)  # the others are inside call #3 by now
    if fault == "close":  # the peers hear of it as close() begins; it returns once they are gone
        marks.make("fault")
        comm.close()
        marks.wait([f"done.{r}" for r in range(size) if r != VICTIM], 30)
        os._exit(0)
    if fault in ("raise", "exit"):  # the interpreter then waits in MPI_Finalize
        start_reaper(marks, [f"done.{r}" for r in range(size) if r != VICTIM])
    marks.make("fault")
    if fault == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif fault == "raise":
        raise RuntimeError(f"injected fault: rank {rank} raises")
    elif fault == "exit":
        sys.exit(3)
    raise SystemExit(f"unknown fault {fault!r}")

try:
    for _ in range(200):
        ring_call()
    say(rank, "no error")
except Exception as e:  # noqa: BLE001 (the test checks the type)
    report_error(rank, marks, "fault", e)
marks.make(f"done.{rank}")
os._exit(0)
