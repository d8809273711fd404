"""Direct on ordinary CUDA arrays that every rank registered (comm.register, the zero copy of
ordinary buffers): each peer maps the allocation that holds a rank's buffer, once, and direct
reads and writes it in place. On the CPU emulation (DPCORE_CUDA_EMULATION=1, whose arrays are
allocations a peer can map, and whose free aborts while a live peer maps one) or a GPU
(DEVICE=cupy). Checks:
- every verb direct on registered buffers, against NumPy exactly and bit for bit against the
  ring, and in place (on a GPU, a torch tensor as well, where torch has CUDA);
- two registrations in one allocation (mapped once by each peer): the first deregistered, the
  second still runs;
- after deregister, direct on the buffer is refused again; another communicator's deregister
  refuses it;
- host arrays: a registration that maps nothing; a rank's bad buffer: a ValueError there and,
  naming it, on the peers; CUDA arrays on some ranks and host arrays on others: refused; a
  `with` block that an exception ends leaves the registration in place;
- freeing safely: a rank that frees its buffer as soon as deregister returns, while a peer is
  slow to deregister; a registration dropped without deregister, whose array is kept until
  the ranks agree to unmap it, at the next register; and one still live at close().

Mode "unguarded" (rank 0 drops a registration whose array nothing keeps): the emulation must
abort rank 0, saying that it freed memory a peer maps.

Usage: mpiexec -n K python -m mpi4py device_registered.py [unguarded]
"""
import gc
import os
import sys
import time

import numpy as np

import dpcore
from checks import Checker, device_arrays, make_input, reference, say
from fault_kit import mpi_shm_segments

xp, to_host = device_arrays()

comm = dpcore.init(timeout=30)
rank, size = comm.rank, comm.size
check = Checker(rank)

if sys.argv[1:] == ["unguarded"]:
    from dpcore.comm.device_path import DevicePath

    DevicePath._let_go = lambda self, region, array: None  # nothing keeps a dropped one's array
    x = xp.asarray(np.ones(1000, np.float32))
    registration = comm.register(x)
    comm.all_reduce(x, out=x, algo="direct")
    say(rank, f"mpi shm {mpi_shm_segments()}")  # the job's abort leaves MPICH's behind
    if rank == 0:
        del registration, x
        gc.collect()  # the emulation aborts here: the peers map x
    say(rank, "dropped")
    time.sleep(2)
    comm.close()
    sys.exit(0)


def refused(call, needle, label):
    try:
        call()
        check.true(False, f"{label}: did not raise")
    except ValueError as e:
        check.true(needle in str(e), f"{label}: {e}")


for dtype, op in [(np.dtype("float16"), "sum"), (np.dtype("float32"), "avg"),
                  (np.dtype("int64"), "max")]:
    for count in (1, 1009, 100_003):
        everyone = [make_input(dtype, op, count, r, size) for r in range(size)]
        want = reference(op, everyone)
        lo, hi = dpcore.shard_range(count, size, rank)
        label = f"{dtype} {op} count={count}"
        x, out = xp.asarray(everyone[rank]), xp.empty(count, dtype)
        with comm.register(x), comm.register(out):
            comm.all_reduce(x, op=op, out=out, algo="direct")
            ring = comm.all_reduce(xp.asarray(everyone[rank]), op=op, algo="ring")
            check.equal(to_host(out), want, f"all_reduce {label}")
            check.equal(to_host(out).view(np.uint8), to_host(ring).view(np.uint8),
                        f"all_reduce {label}: the ring's bits")
            s = comm.reduce_scatter(x, op=op, algo="direct")
            check.equal(to_host(s), want[lo:hi], f"reduce_scatter {label}")
            r = comm.reduce(x, root=count % size, op=op, algo="direct")
            if rank == count % size:
                check.equal(to_host(r), want, f"reduce {label}")
            comm.all_reduce(x, op=op, out=x, algo="direct")
            check.equal(to_host(x), want, f"all_reduce in place {label}")
        shard = xp.asarray(want[lo:hi])
        with comm.register(shard):
            check.equal(to_host(comm.all_gather(shard, algo="direct")), want,
                        f"all_gather {label}")
        b = xp.asarray(everyone[rank])
        with comm.register(b):
            comm.broadcast(b, root=size - 1, algo="direct")
            check.equal(to_host(b), everyone[size - 1], f"broadcast {label}")

# two buffers of one allocation: each peer maps it once, until the last goes
count = 4099
both = xp.empty(2 * count, np.float32)
x, out = both[:count], both[count:]
x.set(np.full(count, rank + 1, np.float32))
first, second = comm.register(out), comm.register(x)
comm.all_reduce(x, out=out, algo="direct")
comm.deregister(first)
comm.all_reduce(x, out=x, algo="direct")  # the allocation is still mapped, for x
total = size * (size + 1) // 2
check.equal(to_host(out), np.full(count, total, np.float32), "one allocation: into out")
check.equal(to_host(x), np.full(count, total, np.float32), "one allocation: in place")
comm.deregister(second)
comm.deregister(second)  # again: nothing to do
refused(lambda: comm.all_reduce(x, out=x, algo="direct"), "comm.register",
        "direct after deregister")

other = dpcore.init(timeout=30)  # a registration is its communicator's alone
mine = comm.register(xp.empty(8, np.float32))
refused(lambda: other.deregister(mine), "another communicator's", "deregister elsewhere")
comm.deregister(mine)
other.close()

host = comm.register(np.ones(3))
check.true(host.region is None and not host.registered, f"a host array's: {host}")
comm.deregister(host)
refused(lambda: comm.register(np.ones(3) if rank == 0 else xp.empty(3, np.float32)),
        "ranks [0] passed host arrays", "CUDA arrays and host arrays")
bad = size - 1
strided = xp.empty(20, np.float32)[::2] if rank == bad else xp.empty(10, np.float32)
refused(lambda: comm.register(strided), "C-contiguous" if rank == bad else f"rank {bad}:",
        "a bad buffer on one rank")

# on a GPU, torch's caching allocator's memory too, where torch has CUDA
torch = None
if os.environ.get("DEVICE") == "cupy":
    try:
        import torch
    except ImportError:
        pass
if torch is not None and torch.cuda.is_available():
    t = torch.full((4099,), float(rank + 1), device=f"cuda:{xp.cuda.Device().id}")
    with comm.register(t):
        comm.all_reduce(t, out=t, algo="direct")
    check.equal(t.cpu().numpy(), np.full(4099, size * (size + 1) // 2, np.float32),
                "a torch tensor registered")

# a with block that an exception ends leaves the registration to close() (or deregister)
try:
    with comm.register(xp.empty(8, np.float32)) as left:
        raise KeyError("the caller's")
except KeyError:
    pass
check.true(left.registered, f"after a with block an exception ended: {left}")
comm.deregister(left)

# freed as soon as deregister returns, while the last rank is slow to deregister: deregister
# returns only once every peer has unmapped it (the emulation would abort the free otherwise)
x = xp.asarray(np.ones(1000, np.float32))
registration = comm.register(x)
comm.all_reduce(x, out=x, algo="direct")
if rank == size - 1:
    time.sleep(0.3)
comm.deregister(registration)
del registration, x
gc.collect()
# dropped without deregister, by every rank, rank 0 first, while the peers map its array: it
# is kept until the next register, where the ranks agree to unmap it, and then freed
x = xp.asarray(np.ones(1000, np.float32))
registration = comm.register(x)
if rank == 0:
    del registration, x
    gc.collect()
comm.barrier()
registration = x = None
gc.collect()
with comm.register(xp.empty(8, np.float32)):
    pass
# live at close: its array is let go once the peers have left
kept = comm.register(xp.empty(8, np.float32))

calls = comm.algorithm_calls()
check.true(calls.get("direct", 0) > 0, f"direct ran: {calls}")
say(rank, f"device {comm.device}")
comm.close()
check.finish()
