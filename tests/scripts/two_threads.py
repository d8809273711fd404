"""Two Python threads call same-shaped all_reduces on one communicator at the same moment.
API.md: calls from several threads on one communicator are serialised correctly or refused with
a clear error, never paired wrongly across ranks. Same shapes on both threads make a wrong
pairing invisible to dpcore's matching; each thread's values differ, so it is visible here.

Usage: mpiexec -n K python -m mpi4py two_threads.py
Each rank prints, per thread T:
    'rank R: thread T calls C right W'           C calls returned, W of them wrong
    'rank R: thread T error TYPE: MESSAGE'        the first exception, if any (the thread stops)
and 'rank R: finished' once both threads ended (at most 120 s), then leaves with os._exit.
"""
import os
import threading

import numpy as np
from mpi4py import MPI

import dpcore
from checks import say
from fault_kit import mpi_shm_segments

CALLS = 50
SIZES = (1 << 10, 1 << 18)  # one_shot and ring sizes (auto), alternating
comm = dpcore.init()
rank, size = comm.rank, comm.size
say(rank, f"mpi shm {mpi_shm_segments()}")
sync = threading.Barrier(2)  # both threads call at the same moment, every time
results = {}


def worker(t):
    right = wrong = calls = 0
    error = None
    # thread t of rank r contributes (t + 1) * 1000 + r: a sum with the other thread's is wrong
    want = sum((t + 1) * 1000 + r for r in range(size))
    try:
        for i in range(CALLS):
            x = np.full(SIZES[i % 2], (t + 1) * 1000 + rank, np.float64)
            try:
                sync.wait(timeout=30)
            except threading.BrokenBarrierError:
                pass  # the other thread stopped: go on alone
            y = comm.all_reduce(x)
            calls += 1
            if np.all(y == want):
                right += 1
            else:
                wrong += 1
    except Exception as e:  # noqa: BLE001 (the test reads the type and message)
        error = f"{type(e).__name__}: {' '.join(str(e).split())}"
        sync.abort()
    results[t] = (calls, right, wrong, error)


threads = [threading.Thread(target=worker, args=(t,), daemon=True) for t in (0, 1)]
for th in threads:
    th.start()
for th in threads:
    th.join(timeout=120)
for t in (0, 1):
    if t not in results:
        say(rank, f"thread {t} stuck")
        continue
    calls, right, wrong, error = results[t]
    say(rank, f"thread {t} calls {calls} right {right} wrong {wrong}")
    if error:
        say(rank, f"thread {t} error {error}")
say(rank, "finished")
# A rank that leaves without MPI_Finalize makes mpiexec end the others, maybe before they print:
# leave together.
MPI.COMM_WORLD.Barrier()
os._exit(0)  # a thread may still hold the communicator; MPI_Finalize could wait on a peer
