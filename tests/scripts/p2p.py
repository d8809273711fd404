"""Point-to-point with exact results (run on every transport by test_p2p.py): send/recv of every
dtype at counts 0, 1, odd and past the mailbox's inline piece (16 KiB), 8 B and 16 MiB, tags,
any source, isend/irecv ring exchanges waited in either order, the batch, and many small
messages in a row whose order must hold, and a send that close() finishes. Every element's
value is unique to (sender, receiver, message, element), so a misplaced or reordered message
cannot pass. With one rank: only the
argument errors (send to oneself).

Usage: python -m mpi4py p2p.py
"""
import time

import numpy as np

import dpcore
from checks import Checker, expect_transport

comm = dpcore.init()
rank, size = comm.rank, comm.size
check = Checker(rank)
expect_transport(comm, check)


def data(dtype, count, src, dst, k=0):
    """Values unique per (src, dst, k, element), exact in every dtype."""
    base = (src * 7 + dst * 3 + k * 11) % 50
    return ((np.arange(count) + base) % 100).astype(dtype)


def refused(call, error):
    try:
        call()
    except error:
        return True
    return False


x = np.ones(4, np.float32)
check.true(refused(lambda: comm.send(x, rank), ValueError), "send to oneself was not refused")
check.true(refused(lambda: comm.recv(x, rank), ValueError), "recv from oneself was not refused")
check.true(refused(lambda: comm.send(x, size), ValueError), "send to rank size was not refused")
check.true(refused(lambda: comm.isend(x, -1), ValueError), "isend to rank -1 was not refused")
check.true(refused(lambda: comm.batch([("send", x, 0)]), TypeError),
           "a batch of tuples was not refused")
if size == 1:
    check.true(refused(lambda: comm.recv(x), ValueError), "recv from any rank, alone")
else:
    peer = (rank + 1) % size
    check.true(refused(lambda: comm.send(x[::2], peer), ValueError), "a strided x was accepted")
    check.true(refused(lambda: comm.send(np.ones(2, complex), peer), TypeError),
               "a complex x was accepted")
    check.true(refused(lambda: comm.send(x, peer, tag=-1), ValueError), "tag -1 was accepted")
    check.true(refused(lambda: comm.send(x, True), ValueError), "peer True was accepted")
    frozen = np.ones(4, np.float32)
    frozen.flags.writeable = False
    check.true(refused(lambda: comm.recv(frozen, peer), ValueError), "a read-only out accepted")
    check.true(refused(lambda: comm.batch([dpcore.P2POp("send", x, peer),
                                           dpcore.P2POp("recv", frozen, peer)]), ValueError),
               "a batch with a read-only out was accepted")

if size > 1:
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    pairs = [(s, d) for s in range(size) for d in range(size) if s != d]
    from checks import DTYPES

    # every dtype and count between every ordered pair, blocking, one pair at a time
    for dtype in DTYPES:
        for count in (0, 1, 3, 1001, 5000, 20011):
            for s, d in pairs:
                if rank == s:
                    comm.send(data(dtype, count, s, d), d)
                elif rank == d:
                    out = np.full(count, 99, dtype)
                    got = comm.recv(out, s)
                    check.equal(out, data(dtype, count, s, d), f"{dtype} x{count} {s}->{d}")
                    check.true(got == s, f"recv returned {got}, expected {s}")
    # 8 B and 16 MiB, N-D, between ranks 0 and 1
    for nbytes in (8, 16 << 20):
        want = data(np.uint8, nbytes, 0, 1).reshape(-1, 8)
        if rank == 0:
            comm.send(want, 1)
        elif rank == 1:
            out = np.zeros_like(want)
            comm.recv(out, 0)
            check.equal(out, want, f"{nbytes} bytes")
    # tags, and any source: rank 0 takes one message from every other rank, in any order
    if rank == 0:
        seen = set()
        for _ in range(size - 1):
            out = np.zeros(100, np.int64)
            src = comm.recv(out, None, tag=5)
            seen.add(src)
            check.equal(out, data(np.int64, 100, src, 0), f"any-source message from {src}")
        check.true(seen == set(range(1, size)), f"any-source sources {sorted(seen)}")
    else:
        comm.send(data(np.int64, 100, rank, 0), 0, tag=5)
    comm.barrier()  # any source takes the next message of any rank: none of the ring's
    # isend/irecv ring exchange, waited sends first and receives first; large and small
    for count in (2, 300_000):
        for sends_first in (True, False):
            out = np.zeros(count, np.float32)
            s = comm.isend(data(np.float32, count, rank, nxt), nxt, tag=1)
            r = comm.irecv(out, prv, tag=1)
            for w in ((s, r) if sends_first else (r, s)):
                result = w.wait()
            check.true(r.wait() == prv and s.wait() is None, "ring: wait() results")
            check.equal(out, data(np.float32, count, prv, rank), f"ring x{count}")
    # the batch, as torch's batch_isend_irecv: sends and receives both ways around the ring
    outs = [np.zeros(5000, np.int32), np.zeros(7, np.int32)]
    works = comm.batch([dpcore.P2POp("send", data(np.int32, 5000, rank, nxt), nxt),
                        dpcore.P2POp("send", data(np.int32, 7, rank, prv, 1), prv),
                        dpcore.P2POp("recv", outs[0], prv),
                        dpcore.P2POp("recv", outs[1], nxt)])
    for w in reversed(works):
        w.wait()
    check.equal(outs[0], data(np.int32, 5000, prv, rank), "batch: from the previous rank")
    check.equal(outs[1], data(np.int32, 7, nxt, rank, 1), "batch: from the next rank")
    # many small messages in a row, mixed with large ones: their order holds
    if rank == 0:
        works = [comm.isend(data(np.float16, 4 if k % 10 else 9000, 0, 1, k), 1, tag=k % 3)
                 for k in range(300)]
        for w in works:
            w.wait()
    elif rank == 1:
        for k in range(300):
            out = np.zeros(4 if k % 10 else 9000, np.float16)
            comm.recv(out, 0, tag=k % 3)
            check.equal(out, data(np.float16, out.size, 0, 1, k), f"message {k} in a row")
    # collectives still work beside point-to-point
    total = comm.all_reduce(np.full(3, rank, np.int64))
    check.equal(total, np.full(3, size * (size - 1) // 2, np.int64), "all_reduce after p2p")

check.finish()
# close() finishes what is pending: rank 0's isend, never waited for, reaches rank 1, late
if rank == 0 and size > 1:
    comm.isend(data(np.float32, 50_000, 0, 1, 7), 1)
elif rank == 1:
    time.sleep(0.3)
    out = np.zeros(50_000, np.float32)
    comm.recv(out, 0)
    assert np.array_equal(out, data(np.float32, 50_000, 0, 1, 7)), "the send close() finished"
comm.close()
