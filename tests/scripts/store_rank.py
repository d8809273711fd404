"""One rank of a job with no MPI in it: dpcore.init(store=..., rank=R, size=N), as a
torch.distributed backend is set up under torchrun. mpi4py is made unimportable first, so any
use of MPI on this path fails the run.

Usage: python store_rank.py MODE STORE DIR [RANK SIZE]
  STORE = file:   a torch.distributed.FileStore on DIR/store, wrapped in a PrefixStore (as torch
                  wraps a process group's)
          env:    torch's env:// rendezvous (under torchrun: the agent's TCPStore), in a
                  PrefixStore; RANK and SIZE come from it
          dir:    dir_store.DirStore on DIR/store (the same calls; no torch to import)
  MODE  = collectives: every collective against NumPy (integer-valued data, so exact), alloc,
                  close, and a second communicator on the same store; 'rank R: ok'
          die-after-hello: rank SIZE-1 SIGKILLs itself inside init right after the pids were
                  exchanged; the others print 'rank R: error SECONDS | TYPE: MESSAGE'
          die-creating-segment: rank 0 SIGKILLs itself inside init right after creating the
                  node's segment, before the others map it
          die-before-hello: rank SIZE-1 SIGKILLs itself inside init at its first message (the
                  hello), having announced only its pid
          duplicate: (the test starts rank 1 twice) init and an all_reduce; 'rank R: ok', or
                  the error, SECONDS since this process began init
          exit: rank SIZE-1 sys.exit()s without closing its communicator, and lives on for
                  2.5 s after dpcore's atexit hook; the others are in an all_reduce
          trace:  (DPCORE_TRACE set by the test) a ring all_reduce, a one_shot all_reduce and a
                  ring broadcast, then a normal exit, at which rank 0 writes the trace
          refuse: init must fail (the test sets DPCORE_TRANSPORT=mpi); 'rank R: refused TYPE:
                  MESSAGE'
          other-host: as refuse, with rank 1 on a host of its own (dpcore.setup.bootstrap.host_id)
  DIR   = the store's file, and fault_kit's marks ('fault': when the victim died)
"""
import os
import signal
import sys
import time

sys.modules["mpi4py"] = None  # `import mpi4py` now raises ImportError: MPI must not be needed

import atexit  # noqa: E402
linger = []  # seconds the victim of "exit" stays alive after dpcore's atexit hook told the peers
atexit.register(lambda: time.sleep(sum(linger)))  # registered before dpcore's: runs after it

import numpy as np  # noqa: E402

import dpcore  # noqa: E402
import dpcore.setup.bootstrap  # noqa: E402
import dpcore.setup.store_wire  # noqa: E402
from fault_kit import Marks, report_error, say  # noqa: E402

mode, kind, directory = sys.argv[1], sys.argv[2], sys.argv[3]
marks = Marks(directory)
if kind == "dir":
    from dir_store import DirStore

    rank, size = int(sys.argv[4]), int(sys.argv[5])
    store = DirStore(os.path.join(directory, "store"))
else:
    import torch.distributed as dist

    if kind == "env":
        store, rank, size = next(dist.rendezvous("env://"))
    else:
        rank, size = int(sys.argv[4]), int(sys.argv[5])
        store = dist.FileStore(os.path.join(directory, "store"), size)
    store = dist.PrefixStore("default_pg", store)
victim = {"die-after-hello": size - 1, "die-before-hello": size - 1, "die-creating-segment": 0,
          "exit": size - 1}.get(mode)


def die():
    marks.make("fault")
    os.kill(os.getpid(), signal.SIGKILL)


def hook():
    """Make the victim die at its point inside init."""
    if mode == "die-after-hello":
        dpcore.setup.store_wire.StoreWire.settle = lambda wire, boot: die()
    elif mode == "die-before-hello":
        dpcore.setup.store_wire.StoreWire.send = lambda wire, obj, peers, tag: die()
    elif mode == "die-creating-segment":
        original = dpcore.setup.bootstrap.Group.on_every_rank

        def on_every_rank(node, step, what):
            if what.startswith("init: create shared memory /"):
                kept.append(step())  # made now; kept alive until the SIGKILL, never unlinked
                die()
            return original(node, step, what)
        dpcore.setup.bootstrap.Group.on_every_rank = on_every_rank
    elif mode == "other-host" and rank == 1:
        dpcore.setup.bootstrap.host_id = lambda: "elsewhere/another-boot"


def values(n, seed):
    """Integer-valued floats unique to every element and rank: a misplaced chunk cannot pass."""
    return (np.arange(n, dtype=np.float64) * 7 + 1000 * seed + 3) % 4093


def check_collectives(comm):
    assert (comm.rank, comm.size, comm.local_size, comm.transport) == (rank, size, size, "shm")
    for n in (0, 1, 5, 1000, 100003):  # one_shot and ring sizes, uneven shards
        mine = values(n, rank).astype(np.float32)
        everyone = [values(n, r).astype(np.float32) for r in range(size)]
        for op, reduce in (("sum", np.sum), ("max", np.max), ("min", np.min)):
            want = reduce(everyone, axis=0)
            assert np.array_equal(comm.all_reduce(mine, op=op), want), (n, op)
            start, stop = dpcore.shard_range(n, size, rank)
            assert np.array_equal(comm.reduce_scatter(mine, op=op), want[start:stop]), (n, op)
        shard = mine[slice(*dpcore.shard_range(n, size, rank))]
        whole = np.concatenate([e[slice(*dpcore.shard_range(n, size, r))]
                                for r, e in enumerate(everyone)])
        assert np.array_equal(comm.all_gather(shard), whole), n
        for root in range(size):
            buf = values(n, rank).astype(np.int64)
            assert np.array_equal(comm.broadcast(buf, root=root), values(n, root)), (n, root)
    buf = comm.alloc(4096, np.int32)
    assert buf.shape == (4096,) and not buf.any()
    owner = buf
    while isinstance(owner, np.ndarray):
        owner = owner.base
    owner = owner.obj if isinstance(owner, memoryview) else owner
    assert isinstance(owner, dpcore._C.SharedBuffer), owner  # memory the peers map
    buf[:] = np.arange(4096) + rank
    assert np.array_equal(comm.all_reduce(buf, out=buf),
                          size * np.arange(4096) + sum(range(size)))
    comm.barrier()


def collectives():
    with dpcore.init(store=store, rank=rank, size=size) as comm:
        check_collectives(comm)
    # a second communicator on the same store must not take the first one's keys
    with dpcore.init(store=store, rank=rank, size=size) as comm:
        got = comm.all_reduce(np.full(3, rank + 1, np.int64))
        assert np.array_equal(got, np.full(3, size * (size + 1) // 2)), got
    assert "mpi4py.MPI" not in sys.modules
    say(rank, "ok")


kept = []
say(rank, f"pid {os.getpid()}")
if rank == victim or mode == "other-host":
    hook()
try:
    if mode == "collectives":
        collectives()
    elif mode == "trace":  # as tests/scripts/trace_run.py does under mpiexec
        comm = dpcore.init(store=store, rank=rank, size=size)
        x = np.arange(200_003, dtype=np.float32)
        comm.all_reduce(x, out=x, algo="ring")
        comm.all_reduce(x[:5], algo="one_shot")
        comm.broadcast(x, root=comm.size - 1, algo="ring")
        say(rank, "ok")
        sys.exit(0)  # the trace is gathered at exit
    elif mode == "duplicate":
        started = time.time()
        try:
            with dpcore.init(store=store, rank=rank, size=size) as comm:
                comm.all_reduce(np.ones(4))
            say(rank, "ok")
        except Exception as e:  # noqa: BLE001
            marks.make(f"fault-{os.getpid()}", started)
            report_error(rank, marks, f"fault-{os.getpid()}", e)
    elif mode == "exit":
        comm = dpcore.init(store=store, rank=rank, size=size)
        if rank == victim:
            time.sleep(0.5)  # the others are in the all_reduce by now
            marks.make("fault")
            linger.append(2.5)  # so the others hear it from dpcore's atexit hook, not its pid
            sys.exit(0)  # atexit tells the others, without MPI
        comm.all_reduce(np.ones(1 << 16, np.float32))
        say(rank, "no error")
    else:
        dpcore.init(store=store, rank=rank, size=size)
        say(rank, "no error")
except Exception as e:  # noqa: BLE001 (the test checks the type and the message)
    if mode in ("refuse", "other-host"):
        say(rank, f"refused {type(e).__name__}: {' '.join(str(e).split())}")
    else:
        report_error(rank, marks, "fault", e)
sys.stdout.flush()
os._exit(0)
