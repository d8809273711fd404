"""A rank is SIGKILLed during dpcore.init() or comm.alloc(); every survivor must raise (CommError,
or RuntimeError from the bootstrap) naming it within seconds, and no /dev/shm/dpcore-* may stay.

Usage: mpiexec -disable-auto-cleanup -n K python as_child.py python peer_dies_early.py POINT
                                                                                  VICTIM DIR
  POINT = init:           the victim dies right before dpcore.init(), the others are inside it
          init-connect:   the victim dies inside init, as it starts to connect the transport
                          (dpcore.setup.transports.connect), after the communicators are made
          init-segment:   the victim (local rank 0 of its node: the creator) dies inside init
                          right after creating the node's segment, before the others map it
          alloc:          the victim dies right before comm.alloc(), the others are inside it
          alloc-segment:  the victim dies inside alloc after creating its own buffer's segment,
                          before mapping the peers' (shared memory only)
  DIR   = a directory for the marks (fault_kit.Marks): 'fault' (when the victim died), 'done.R'.

Each survivor goes on to alloc (for the alloc points) and an all_reduce, and prints
'rank R: failed in STEP' and 'rank R: error SECONDS | TYPE: MESSAGE' for the first step that
raised (or 'rank R: no error'), or, past fault_kit.GRACE, 'rank R: hang ...'; then os._exit.

The points inside init and alloc are reached through dpcore's Python functions (HOOKS): if one
is gone, every rank prints 'rank R: no hook NAME' and exits, and the test says so.
"""
import os
import signal
import sys
import time

import numpy as np
from mpi4py import MPI

import dpcore
import dpcore.setup.bootstrap
import dpcore.setup.transports
from fault_kit import Marks, mpi_shm_segments, report_error, say, start_watchdog

point, victim, directory = sys.argv[1], int(sys.argv[2]), sys.argv[3]
marks = Marks(directory)
world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
# The functions the points inside init and alloc hook, as (module, name).
HOOKS = {"init-connect": (dpcore.setup.transports, "connect"),
         "init-segment": (dpcore.setup.bootstrap.Group, "on_every_rank"),
         "alloc-segment": (dpcore.setup.bootstrap.Group, "on_every_rank")}


def die():
    marks.make("fault")
    os.kill(os.getpid(), signal.SIGKILL)


kept = []  # what the victim made before it died


def hook(point):
    """Make the victim die at `point` inside init or alloc."""
    module, name = HOOKS[point]
    original = getattr(module, name)

    if point == "init-connect":
        def patched(*args, **kwargs):
            die()
    else:
        wanted = ("init: create shared memory /" if point == "init-segment"
                  else "alloc: map the peers' buffers")

        def patched(node, step, what):
            if what.startswith(wanted):
                if point == "init-segment":  # the segment exists now; its creator dies before
                    kept.append(step())      # anyone maps it (kept: its destructor unlinks it)
                die()
            return original(node, step, what)
    setattr(module, name, patched)


say(rank, f"pid {os.getpid()}")
say(rank, f"mpi shm {mpi_shm_segments()}")
if point in HOOKS and not hasattr(*HOOKS[point]):
    say(rank, f"no hook {HOOKS[point][0].__name__}.{HOOKS[point][1]}")
    os._exit(0)
if rank != victim:
    start_watchdog(rank, marks, "fault", f"rank {victim} killed at {point}")
elif point in HOOKS:
    hook(point)
world.Barrier()

step = "init"
try:
    if rank == victim and point == "init":
        time.sleep(0.5)  # the others are inside init by now
        die()
    comm = dpcore.init()
    if point.startswith("alloc"):
        step = "alloc"
        if rank == victim and point == "alloc":
            time.sleep(0.5)  # the others are inside alloc by now
            die()
        comm.alloc(1 << 16, np.float32)
    step = "all_reduce"
    comm.all_reduce(np.ones(1 << 16, np.float32))
    if rank == victim:  # a point this configuration never reaches (no segment to create)
        say(rank, f"not killed: {point} never came")
        marks.make("fault")
        os._exit(0)
    say(rank, "no error")
except Exception as e:  # noqa: BLE001 (the test checks the type)
    say(rank, f"failed in {step}")
    report_error(rank, marks, "fault", e)
marks.make(f"done.{rank}")
os._exit(0)
