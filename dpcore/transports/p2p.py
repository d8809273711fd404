"""dpcore's collective algorithms over MPI point-to-point: MPI only carries bytes, the
schedules and every reduction (dpcore._C.reduce) are dpcore's.

Vocabulary as csrc/algo/ring.h: a chunk is one rank's share of the buffer (shard_range), a step
is one hop around the ring, a segment the pipelining unit. The ring needs no segments: one
Sendrecv moves a whole chunk per step, and MPI pipelines a large message itself; the broadcast
chain forwards each segment as soon as it arrives.

    ring, n ranks, S bytes                      rank r: sends to r+1, receives from r-1
    all_reduce      n-1 reduce-scatter steps + n-1 all-gather steps, 2(n-1)/n * S per rank
    reduce_scatter  n-1 steps, (n-1)/n * S        all_gather  n-1 steps, (n-1)/n * S (output)
    broadcast       a chain root -> root+1 -> ..., pipelined in segments of _SEGMENT_BYTES

One shot (small messages): every rank sends its data straight to the ranks that need it, one
step, and reduces in rank order, so every rank computes identical bits; broadcast takes a
binomial tree (log2 n steps). Each chunk of a ring reduction is finished by one rank and then
only copied, so there too every rank gets identical bits.

No MPI call blocks: Link.wait polls the requests against the deadline of the collective in
flight and raises CommError naming the ranks it still waits for.
"""
import os
import time

import numpy as np
from mpi4py import MPI

from .. import _C
from ..sharding import shard_range

CommError = _C.CommError

_HEADER_TAG, _DATA_TAG = 1, 2
_SEGMENT_BYTES = 512 << 10  # the broadcast chain's pipelining unit
COLL_NAMES = ["barrier", "all_reduce", "reduce_scatter", "all_gather", "broadcast"]


class Call:
    """The collective in flight: names it in errors and holds its deadline."""

    def __init__(self, coll, seq, rank, timeout):
        self.name = COLL_NAMES[coll] if 0 <= coll < len(COLL_NAMES) else f"coll{coll}"
        self.seq, self.rank, self.timeout = seq, rank, timeout
        self.deadline = time.monotonic() + timeout

    def error(self, why):
        return CommError(f"dpcore {self.name} #{self.seq} on rank {self.rank}: {why}")


class Link:
    """Point-to-point among the ranks of one MPI communicator. Every wait polls against the
    deadline of `call`, the collective in flight; `ranks` names this communicator's ranks as
    the transport's ranks in error messages."""

    def __init__(self, mpi_comm, ranks):
        self.comm = mpi_comm
        self.rank, self.size = mpi_comm.Get_rank(), mpi_comm.Get_size()
        self.ranks = list(ranks)
        self.call = None
        self._orphans = []  # buffers of requests abandoned at a timeout: MPI may still write

    def isend(self, buf, peer, tag=_DATA_TAG):
        return self.comm.Isend(_bytes(buf), peer, tag), peer, "send to", buf

    def irecv(self, buf, peer, tag=_DATA_TAG):
        return self.comm.Irecv(_bytes(buf), peer, tag), peer, "receive from", buf

    def sendrecv(self, send, dest, recv, source):
        self.wait([self.irecv(recv, source), self.isend(send, dest)])

    def wait(self, pending):
        """Wait for (request, peer, what, buffer) tuples: spin briefly, then yield the core,
        then sleep, since ranks may outnumber cores and MPI progresses only while polled."""
        requests = [p[0] for p in pending]
        polls = 0
        while not MPI.Request.Testall(requests):
            polls += 1
            if polls < 64:
                continue
            if time.monotonic() > self.call.deadline:
                self._give_up(pending)
            if polls < 4096:
                os.sched_yield()
            else:
                time.sleep(0.0005)

    def _give_up(self, pending):
        late = []
        for request, peer, what, buf in pending:
            if not request.Test():
                late.append((self.ranks[peer], what))
                if what == "receive from":
                    request.Cancel()
                self._orphans.append(buf)
        peers = sorted({peer for peer, _ in late})
        detail = ", ".join(f"{what} rank {peer}" for peer, what in late)
        raise self.call.error(f"timed out after {self.call.timeout:g} s waiting for rank"
                              f"{'s' if len(peers) > 1 else ''} "
                              f"{', '.join(map(str, peers))} ({detail})")

    def exchange_headers(self, header):
        """Every rank's header, as an (n, 8) array; also a barrier. Point-to-point rather than an
        MPI allgather, so that a timeout can name the ranks that never arrived."""
        headers = np.empty((self.size, header.size), np.int64)
        headers[self.rank] = header
        pending = []
        for peer in range(self.size):
            if peer != self.rank:
                pending.append(self.irecv(headers[peer], peer, _HEADER_TAG))
                pending.append(self.isend(header, peer, _HEADER_TAG))
        self.wait(pending)
        return headers


def _bytes(a):
    return a.view(np.uint8)  # MPI knows neither float16 nor bfloat16; it only moves bytes


def _ptr(a):
    return a.__array_interface__["data"][0]


def _reduce(dtype, op, a, b, out, divisor=0):
    """out = a op b elementwise (exact overlap of out with a or b is fine)."""
    _C.reduce(dtype, op, _ptr(a), _ptr(b), _ptr(out), out.size, divisor)


def copy(src, dst):
    if src.size and _ptr(src) != _ptr(dst):
        dst[...] = src


def _even_chunks(count, n):
    return [shard_range(count, n, c) for c in range(n)]


def _chunks_from_counts(counts):
    starts = np.concatenate([[0], np.cumsum(counts)]).astype(int)
    return [(int(starts[c]), int(starts[c + 1])) for c in range(len(counts))]


# -- ring ------------------------------------------------------------------------------------

def _ring_reduce_scatter_steps(link, dtype, op, x, chunks, dst, divisor):
    """The n-1 reduce-scatter steps (ring.h: step k sends chunk r-k-1, receives chunk r-k-2);
    afterwards dst holds chunk r, reduced over all ranks by this rank alone."""
    n, r = link.size, link.rank
    nxt, prev = (r + 1) % n, (r - 1) % n
    scratch = np.empty((2, max(hi - lo for lo, hi in chunks)), x.dtype)
    # step 0: push our own data of chunk r-1 to the next rank
    lo, hi = chunks[(r - 1) % n]
    send = x[lo:hi]
    for step in range(n - 1):
        lo, hi = chunks[(r - step - 2) % n]
        recv = scratch[step % 2, :hi - lo]  # the other row is what we are sending
        link.sendrecv(send, nxt, recv, prev)
        if step < n - 2:  # add our data to what arrived and pass the partial result on
            _reduce(dtype, op, recv, x[lo:hi], recv)
            send = recv
        else:  # last step: chunk r is complete here
            _reduce(dtype, op, recv, x[lo:hi], dst, divisor)


def _ring_all_gather_steps(link, out, chunks):
    """The n-1 all-gather steps (step k sends chunk r-k, receives chunk r-k-1), in place in out,
    which already holds chunk r."""
    n, r = link.size, link.rank
    for step in range(n - 1):
        s_lo, s_hi = chunks[(r - step) % n]
        c_lo, c_hi = chunks[(r - step - 1) % n]
        link.sendrecv(out[s_lo:s_hi], (r + 1) % n, out[c_lo:c_hi], (r - 1) % n)


def ring_all_reduce(link, dtype, op, x, out, divisor):
    chunks = _even_chunks(x.size, link.size)
    lo, hi = chunks[link.rank]
    # x is read only in the reduce-scatter steps, so out may be x
    _ring_reduce_scatter_steps(link, dtype, op, x, chunks, out[lo:hi], divisor)
    _ring_all_gather_steps(link, out, chunks)


def ring_reduce_scatter(link, dtype, op, x, out, divisor):
    _ring_reduce_scatter_steps(link, dtype, op, x, _even_chunks(x.size, link.size), out, divisor)


def ring_all_gather(link, shard, out, counts):
    chunks = _chunks_from_counts(counts)
    lo, hi = chunks[link.rank]
    copy(shard, out[lo:hi])
    _ring_all_gather_steps(link, out, chunks)


def chain_broadcast(link, buf, root):
    """root -> root+1 -> ... -> root-1; every segment is passed on as soon as it arrives, all
    receives posted up front so that the segments stream."""
    n, r = link.size, link.rank
    position = (r - root) % n
    rounds = max(1, -(-buf.nbytes // _SEGMENT_BYTES))
    segments = [shard_range(buf.size, rounds, i) for i in range(rounds)]
    recvs = [link.irecv(buf[lo:hi], (r - 1) % n) for lo, hi in segments] if position else []
    sends = []
    for i, (lo, hi) in enumerate(segments):
        if position:
            link.wait([recvs[i]])
        if position < n - 1:
            sends.append(link.isend(buf[lo:hi], (r + 1) % n))
    link.wait(sends)


# -- one shot (small messages: one step, latency rather than bandwidth) -----------------------

def _reduce_in_rank_order(dtype, op, inputs, out, divisor):
    n = len(inputs)
    for i in range(1, n):
        _reduce(dtype, op, out if i > 1 else inputs[0], inputs[i], out,
                divisor if i == n - 1 else 0)


def one_shot_all_reduce(link, dtype, op, x, out, divisor):
    inputs = np.empty((link.size, x.size), x.dtype)
    inputs[link.rank] = x  # a copy: out may be x
    pending = []
    for peer in range(link.size):
        if peer != link.rank:
            pending += [link.irecv(inputs[peer], peer), link.isend(x, peer)]
    link.wait(pending)
    _reduce_in_rank_order(dtype, op, inputs, out, divisor)


def one_shot_reduce_scatter(link, dtype, op, x, out, divisor):
    chunks = _even_chunks(x.size, link.size)
    lo, hi = chunks[link.rank]
    inputs = np.empty((link.size, hi - lo), x.dtype)
    inputs[link.rank] = x[lo:hi]
    pending = []
    for peer in range(link.size):
        if peer != link.rank:
            p_lo, p_hi = chunks[peer]
            pending += [link.irecv(inputs[peer], peer), link.isend(x[p_lo:p_hi], peer)]
    link.wait(pending)
    _reduce_in_rank_order(dtype, op, inputs, out, divisor)


def one_shot_all_gather(link, shard, out, counts):
    chunks = _chunks_from_counts(counts)
    pending = []
    for peer, (lo, hi) in enumerate(chunks):
        if peer != link.rank:
            pending += [link.irecv(out[lo:hi], peer), link.isend(shard, peer)]
    link.wait(pending)
    lo, hi = chunks[link.rank]
    copy(shard, out[lo:hi])


def tree_broadcast(link, buf, root):
    """Binomial tree: position v receives from v - (lowest set bit of v), then sends to
    v + 2^k for the smaller powers of two."""
    n, r = link.size, link.rank
    position = (r - root) % n
    mask = 1
    while mask < n:
        if position & mask:
            link.wait([link.irecv(buf, (r - mask) % n)])
            break
        mask <<= 1
    sends = []
    mask >>= 1
    while mask:
        if position + mask < n:
            sends.append(link.isend(buf, (r + mask) % n))
        mask >>= 1
    link.wait(sends)
