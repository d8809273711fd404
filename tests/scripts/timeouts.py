"""A timeout of inf (wait forever) or one past what the clock can count (1e13 s) works like any
long timeout: every collective, on every algorithm, completes exactly; an explicit timeout=None
means DPCORE_TIMEOUT (or 300 s); 0, -1, nan, -inf and non-numbers are refused at init with
ValueError/TypeError, on every rank alike, before anything is sent.

Usage: mpiexec -n K python -m mpi4py timeouts.py  (DPCORE_TIMEOUT set by the caller)
"""
import math
import os

import numpy as np
from mpi4py import MPI

import dpcore
from checks import Checker, make_input, mpi_allgatherv, reference

world = MPI.COMM_WORLD
rank, size = world.rank, world.size
check = Checker(rank)
i32 = np.dtype(np.int32)
env_timeout = float(os.environ["DPCORE_TIMEOUT"])

for timeout in [math.inf, 1e13, 1e300, None]:
    with dpcore.init(timeout=timeout) as comm:
        want_timeout = env_timeout if timeout is None else timeout
        check.true(comm.timeout == want_timeout, f"timeout={timeout}: comm.timeout {comm.timeout}")
        for algo in ["auto", "ring", "one_shot"] + (["direct"] if comm.direct else []):
            n = 500 if algo == "one_shot" else 70_000
            every = [make_input(i32, "sum", n, r, size) for r in range(size)]
            label = f"timeout={timeout} algo={algo}"
            try:
                check.equal(comm.all_reduce(every[rank], algo=algo), reference("sum", every),
                            f"all_reduce {label}")
                start, stop = dpcore.shard_range(n, size, rank)
                check.equal(comm.reduce_scatter(every[rank], algo=algo),
                            reference("sum", every)[start:stop], f"reduce_scatter {label}")
                check.equal(comm.all_gather(every[rank][:9], algo=algo),
                            mpi_allgatherv(world, every[rank][:9]), f"all_gather {label}")
                check.equal(comm.all_reduce(every[rank], algo=algo, async_op=True).wait(),
                            reference("sum", every), f"async all_reduce {label}")
            except dpcore.CommError as e:
                check.true(False, f"{label}: {e}")
                break
        comm.barrier()

for timeout, error in [(0, ValueError), (-1, ValueError), (math.nan, ValueError),
                       (-math.inf, ValueError), (0.0, ValueError), ("60", TypeError),
                       (True, TypeError), ([60], TypeError)]:
    try:
        dpcore.init(timeout=timeout).close()
        check.true(False, f"timeout={timeout!r}: accepted (expected {error.__name__})")
    except error as e:
        check.true("timeout" in str(e), f"timeout={timeout!r}: message does not name it: {e}")
    except Exception as e:
        check.true(False, f"timeout={timeout!r}: {type(e).__name__}: {e}")

# nothing was sent: a fresh communicator works
with dpcore.init() as comm:
    check.equal(comm.all_reduce(np.ones(5, i32)), np.full(5, size, i32), "fresh communicator")
check.finish()
