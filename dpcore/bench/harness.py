"""The nccl-tests harness (src/common.cu), once for all collectives.

For each size from -b to -e (times -f): allocate, fill exact inputs, then for out-of-place and
in-place call once untimed (--algo auto: _C.TUNER_SETTLE_CALLS times, until its tuner has tried
both algorithms), time ITERS x -m back-to-back calls after a barrier (-z 1: a barrier after
each) and keep the slowest rank's time (MPI MAX of the elapsed times; nccl-tests' -a chooses
another: blocks.AVERAGES); -C 1 prints rank 0's time until its calls returned instead. -r all
sweeps once per root, -N 2 twice (after one warm-up). With --compare mpi the same buffers go
through MPI's own collective (with --device cuda, NCCL's: compare.py), alternating with ours
block by block, with the same -m and -z; with --repeat R each block runs R times and the medians
are reported. With -c 1 the data are re-initialised and the collective runs once
more, and every rank counts the elements whose bits differ from the result it computed itself;
#wrong is the sum over ranks.

algbw = size / time (size as nccl-tests prints it); busbw = algbw * the collective's factor.

The buffers live where --device puts them (devices.py: host memory, or this rank's GPU); the
harness reaches them only through that object, so --device cuda runs this same code. There a
block of calls ends when the device has finished them (timed() synchronizes). With --floor (always
with --device cuda) every in-place block alternates with one of the copy floor (floor.py): a
plain copy of as many bytes as the ring moves through memory, on every rank at once.

Beside each row: the algorithm that ran most of the in-place timed calls (for --algo auto, as the
communicator picked them: the tuner may switch between ring and direct) and, when
a fitted cost model exists (dpcore.cost.load(), or --model FILE), pred_us (the model's time for
that algorithm and size) and model_err% = (pred_us - in-place time) / in-place time. --plot
draws busbw against size (plot.py).
"""
import os
import socket
import statistics

import numpy as np

from .. import _C
from .._cli.environment import provenance
from ..dtypes import parse_dtype
from ..sharding import shard_range
from .blocks import timed, timed_block
from .patterns import Case
from .compare import MpiReference, open_nccl
from .devices import HostArrays
from .floor import achieved, floor_bytes
from .options import DEFAULT_ITERS, iters_for, sizes
from .table import (FLOOR_LARGE_BYTES, LARGE_BYTES, algo_used, bits, columns, format_row,
                    model_columns, table_header)


def buffers(coll, case, in_place, empty):
    """(send, recv) as nccl-tests lays them out: in place, the smaller is the rank's shard of
    the larger (reduce_scatter and scatter: out = x[start:stop]; all_gather and gather:
    s = out[start:stop]), which is also where NCCL wants it. empty(count, dtype) makes each
    buffer."""
    if not (in_place or coll.in_place_only) or coll.out_of_place_only:
        return empty(case.send_count, case.dtype), empty(case.recv_count, case.dtype)
    big = empty(max(case.send_count, case.recv_count), case.dtype)
    if case.send_count == case.recv_count:
        return big, big
    small = min(case.send_count, case.recv_count)
    start, stop = shard_range(big.size, case.n, case.rank)
    assert stop - start == small
    view = big[start:stop]
    return (big, view) if case.send_count > case.recv_count else (view, big)


class Bench:
    """One run: a communicator, an MPI communicator for timing and comparison, the options, and
    where the buffers live (devices.py)."""

    def __init__(self, comm, coll, args, arrays=None):
        from mpi4py import MPI

        self.comm, self.coll, self.args = comm, coll, args
        self.arrays = arrays or HostArrays()
        self.mpi = MPI.COMM_WORLD.Dup()
        self.max_op = MPI.MAX
        self.n, self.rank = self.mpi.Get_size(), self.mpi.Get_rank()
        self.rows = []
        # what the numbers were measured with (the header's line, --json's "environment")
        self.provenance = provenance() if self.rank == 0 else None
        self.model, self.model_info, self.model_path = None, None, None  # {algo: Params}
        self._pool, self._pool_used = None, 0  # --one-buffer's two buffers; how many a row took
        self.floor = args.floor
        # what runs beside dpcore (compare.py), or None; why NCCL does not, where it cannot
        self.reference, self.left_out = None, None
        if args.compare == "mpi":
            self.reference = MpiReference(self.mpi)
        elif args.compare == "nccl":
            self.reference, self.left_out = open_nccl(self.arrays, self.mpi)

    def close(self):
        if self.reference is not None:
            self.reference.close()
        self.mpi.Free()

    def use_model(self, params, info, path):
        self.model, self.model_info, self.model_path = params, info, path

    def say(self, text=""):
        if self.rank == 0:
            print(text, flush=True)

    # -- measuring ----------------------------------------------------------------------------

    def _buffers(self, case, in_place, empty=None):
        return buffers(self.coll, case, in_place, empty or self.arrays.empty)

    def _front_of_pool(self, count, dtype):
        """--one-buffer: the front of one of two buffers allocated once at -e's size (with room
        for the elements a count rounds up to), as nccl-tests' send and receive buffers."""
        if self._pool is None:
            self._pool = [self.arrays.pool(self.args.maxbytes + 4096) for _ in range(2)]
        buf = self._pool[self._pool_used]
        self._pool_used += 1
        return buf[:count * dtype.itemsize].view(dtype)

    def _shared_empty(self, count, dtype):
        """-R 1's buffers: comm.alloc is collective and wants the same size on every rank, so
        each rank takes the longest rank's count (shards differ by one) and uses its own."""
        return self.comm.alloc(self.mpi.allreduce(count, op=self.max_op), dtype)[:count]

    def _fill(self, case, send, recv, expected):
        """Poison the output (every element wrong), then write the input (which may overlap)."""
        if expected is not None:
            def poison(out):
                bits(out)[...] = bits(expected) ^ 1
            self.arrays.fill(recv, poison)
        self.arrays.fill(send, lambda x: self.coll.init(x, case))

    def _wrong(self, case, send, recv, expected):
        self._fill(case, send, recv, expected)
        self.coll.run(self.comm, send, recv, case)
        self.arrays.synchronize()
        local = 0
        if expected is not None:  # None: this rank receives nothing (a non-root's gather)
            got = self.arrays.to_host(recv)
            local = int(np.count_nonzero(bits(got) != bits(expected)))
        return self.mpi.allreduce(local)

    def measure(self, case, in_place, floor=None):
        """{time, ref_time, floor_time, wrong} for one placement of one row, times in seconds;
        ref: --compare's library; floor: a call that copies the floor's bytes, or None. -R 1:
        comm.alloc's buffers on the host; on a GPU, ordinary ones registered for the row."""
        args = self.args
        on_host = self.arrays.name == "cpu"
        empty = (self._shared_empty if args.register and on_host else
                 self._front_of_pool if args.one_buffer else self.arrays.empty)
        self._pool_used = 0
        send, recv = self._buffers(case, in_place, empty)
        registered = []  # -R 1 on a GPU: the ordinary buffers, mapped by every peer
        try:
            if args.register and not on_host:
                registered = [self.comm.register(b) for b in (send, recv) if b is not None]
            return self._measure(case, in_place, send, recv, floor)
        finally:
            for registration in registered:
                self.comm.deregister(registration)

    def _measure(self, case, in_place, send, recv, floor):
        args, coll, ref, sync = self.args, self.coll, self.reference, self.arrays.synchronize
        expected = coll.expected(case) if args.check > 0 else None
        self._fill(case, send, recv, expected)
        ours = lambda: coll.run(self.comm, send, recv, case)  # noqa: E731
        compare = ref is not None and ref.supports(coll, case)
        ref_send, ref_recv = send, recv
        if compare and args.register:
            ref_send, ref_recv = self._buffers(case, in_place)
            self._fill(case, ref_send, ref_recv, None)
        theirs = lambda: ref.run(coll, ref_send, ref_recv, case, in_place)  # noqa: E731
        iters = iters_for(args, max(case.send_count, case.recv_count) * case.dtype.itemsize)
        # auto's tuner starts each new kind of call with a run of both algorithms: those run
        # untimed, or a big row (2-4 calls a block) would time the tuner's trial of the slower
        for _ in range(_C.TUNER_SETTLE_CALLS if args.algo == "auto" else 1):
            ours()
        if compare:
            theirs()
        if floor:
            floor()
        times, cpu_times, ref_times, floor_times = [], [], [], []
        before = self.comm.algorithm_calls()
        block = dict(agg=args.agg_iters, blocking=args.blocking)  # -m, -z: for both libraries
        for _ in range(max(args.repeat, 1)):  # alternate: ours, MPI, floor, ours, MPI, ...
            t, cpu = timed_block(self.mpi, ours, iters, args.average, sync, **block)
            times.append(t)
            cpu_times.append(cpu)
            if compare:
                ref_times.append(timed_block(self.mpi, theirs, iters, args.average, sync,
                                             **block)[0])
            if floor:
                floor_times.append(timed(self.mpi, floor, iters, args.average, sync))
        ran = {a: k - before.get(a, 0) for a, k in self.comm.algorithm_calls().items()}
        wrong = None
        for _ in range(args.check):
            wrong = self._wrong(case, send, recv, expected)
            if wrong:
                break
        median = lambda t: statistics.median(t) if t else None  # noqa: E731
        return {"time": median(times), "cpu_time": median(cpu_times), "iters": iters,
                "wrong": wrong,
                "ref_time": median(ref_times), "floor_time": median(floor_times),
                "algo": max(ran, key=ran.get) if any(ran.values()) else None}

    def warm_up(self, case_for):
        """nccl-tests' warm-up: -w calls at the largest, then the smallest size."""
        swept = list(sizes(self.args))
        for nbytes in (swept[-1], swept[0]) if swept else ():
            case = case_for(nbytes)
            send, recv = self._buffers(case, in_place=False)
            self.arrays.fill(send, lambda x: self.coll.init(x, case))
            ref = self.reference
            for _ in range(self.args.warmup_iters):
                try:
                    self.coll.run(self.comm, send, recv, case)
                except ValueError:  # e.g. past -a one_shot's limit; the sweep will say so
                    break
                if ref is not None and ref.supports(self.coll, case):
                    ref.run(self.coll, send, recv, case, False)
            self.arrays.synchronize()

    # -- one (dtype, op, root) sweep, as nccl-tests' TimeTest -------------------------------------

    def time_test(self, dtype_text, op, root):
        """One sweep of the sizes (-N times after one warm-up), as nccl-tests' TimeTest; root:
        the rank, or -1 for a collective without one."""
        coll, args = self.coll, self.args
        dtype = parse_dtype(dtype_text)
        op_name = op if coll.reduces else "none"

        def case_for(nbytes):
            count = nbytes // dtype.itemsize
            return Case(dtype, op, max(root, 0), args.algo, self.n, self.rank, count,
                        coll.sizes(count, self.n))

        self.warm_up(case_for)
        cycle = 0
        while args.run_cycles == 0 or cycle < args.run_cycles:  # -N 0: until killed
            for nbytes in sizes(args):
                self.rows.append(self.time_row(case_for(nbytes), op_name, root, cycle))
            cycle += 1

    def time_row(self, case, op_name, root, cycle):
        """One row: out-of-place and in-place, printed, and returned for --json."""
        coll, args = self.coll, self.args
        factor = coll.bus_factor(self.n)
        ref = self.reference
        size = max(case.send_count, case.recv_count) * case.dtype.itemsize
        row = {"collective": coll.name, "nranks": self.n, "size": size,
               "count": case.count_column, "type": case.dtype_name, "redop": op_name,
               "root": root, "algo": args.algo, "transport": self.comm.transport,
               "device": self.arrays.name, "cycle": cycle}
        floor = None
        if self.floor:
            row["floor_bytes"] = floor_bytes(coll.name, self.n, size)
            floor = self.arrays.copy_call(row["floor_bytes"]) if row["floor_bytes"] else None
        for label, in_place in (("oop", False), ("ip", True)):
            m = self.measure(case, in_place, floor if in_place else None)
            row[f"{label}_algo"] = m["algo"]
            row[f"{label}_iters"] = m["iters"]
            row.update(columns(label, size, m["time"], factor))
            if args.report_cputime:  # -C: the time column only; bandwidths stay the wall's
                row[f"{label}_cputime_us"] = m["cpu_time"] * 1e6
            row[f"{label}_wrong"] = m["wrong"]
            if ref is not None:  # ratio = our busbw / theirs = their time / ours
                row.update(columns(f"{label}_{ref.name}", size, m["ref_time"], factor))
                row[f"{label}_ratio"] = (m["ref_time"] / m["time"]
                                         if m["ref_time"] and m["time"] else None)
        if self.floor:
            t = m["floor_time"]
            row["floor_time_us"] = t * 1e6 if t else None
            row["floor_copy_gbps"] = row["floor_bytes"] / t / 1e9 if t else None
            reached = achieved(t, m["time"])
            row["ip_floor%"] = reached * 100 if reached is not None else None
        row["algo_used"] = row["ip_algo"] or algo_used(self.comm, coll.name, size, args.algo)
        if self.model is not None:
            row.update(model_columns(self.model, coll.name, row))
        self.say(format_row(row, ref and ref.name, self.model is not None, self.floor,
                            args.report_cputime))
        return row

    # -- header and summary -------------------------------------------------------------------

    def header(self):
        a = self.args
        step = f"{a.stepfactor}(factor)" if a.stepfactor > 1 else f"{a.stepbytes}(bytes)"
        iters = a.iters if a.iters is not None else f"{DEFAULT_ITERS}(auto)"
        ref = self.reference
        compare = ref.name if ref else "none"
        if self.left_out:
            compare += f" (NCCL left out: {self.left_out})"
        self.say(f"# dpcore.bench {self.coll.name}  nranks {self.n}  minBytes {a.minbytes} "
                 f"maxBytes {a.maxbytes} step: {step} warmup iters: {a.warmup_iters} "
                 f"iters: {iters} agg iters: {a.agg_iters} validation: {a.check} "
                 f"algo: {a.algo} "
                 f"compare: {compare} repeat: {a.repeat} "
                 f"register: {a.register} one-buffer: {int(a.one_buffer)}"
                 f"{f' device: {self.arrays.name}' if self.arrays.name != 'cpu' else ''}"
                 f"{' floor: 1' if self.floor else ''}"
                 f"{' blocking: 1' if a.blocking else ''}"
                 f"{' cputime: 1' if a.report_cputime else ''}"
                 f"{f' cycles: {a.run_cycles}' if a.run_cycles != 1 else ''}")
        if self.rank == 0:
            self.say("# " + "  ".join(f"{k} {v}" for k, v in self.provenance.items()
                                       if k != "settings") +
                     "".join(f"  {k}={v}" for k, v in self.provenance["settings"].items()))
        self.say("#")
        self.say("# Using devices")
        c = self.comm
        line = (f"#  Rank {self.rank:2d} Pid {os.getpid():6d} on {socket.gethostname():>10s} "
                f"transport {c.transport} local rank {c.local_rank}/{c.local_size}")
        if self.arrays.describe():
            line += f" {self.arrays.describe()}"
        lines = self.mpi.gather(line, root=0)
        if self.rank == 0:
            print("\n".join(lines), flush=True)
        self.say("#")
        if self.coll.out_of_place_only:
            self.say(f"# {self.coll.name} does not run in place: both columns time separate "
                     "buffers")
        for line in self.model_info or ():
            self.say(line)
        self.say(table_header(ref and ref.name, self.model is not None, self.floor,
                              a.report_cputime))

    def summary(self):
        wrong = sum(r[f"{p}_wrong"] or 0 for r in self.rows for p in ("oop", "ip"))
        bws = [r[f"{p}_busbw"] for r in self.rows for p in ("oop", "ip")]
        avg = sum(bws) / len(bws) if bws else 0.0
        self.say(f"# Out of bounds values : {wrong} {'FAILED' if wrong else 'OK'}")
        self.say(f"# Avg bus bandwidth    : {avg:g}")
        result = {"wrong": wrong, "avg_busbw": avg}
        ref = self.reference
        if ref is not None:
            theirs = [r[f"{p}_{ref.name}_busbw"] for r in self.rows for p in ("oop", "ip")
                      if r.get(f"{p}_{ref.name}_busbw") is not None]
            ref_avg = sum(theirs) / len(theirs) if theirs else None
            self.say(f"# Avg {ref.label} bus bandwidth: "
                     f"{'n/a' if ref_avg is None else format(ref_avg, 'g')}"
                     f"   ({ref.label} columns: in-place; out-of-place ones are in --json)")
            result[f"avg_{ref.name}_busbw"] = ref_avg
        reached = [(r["size"], r["ip_floor%"]) for r in self.rows
                   if r.get("ip_floor%") is not None]
        if reached:
            text = f"median {statistics.median(p for _, p in reached):.0f} % over " \
                f"{len(reached)} sizes"
            large = [p for s, p in reached if s >= FLOOR_LARGE_BYTES]
            if large:
                text += f", least {min(large):.0f} % from {FLOOR_LARGE_BYTES >> 20} MiB up"
                result["min_floor%_large"] = min(large)
            self.say(f"# Copy floor reached   : {text} (in place)")
            result["median_floor%"] = statistics.median(p for _, p in reached)
        errors = [(r["size"], abs(r["model_err%"])) for r in self.rows
                  if r.get("model_err%") is not None]
        if errors:
            large = [e for s, e in errors if s >= LARGE_BYTES]
            text = f"median |model_err%| {statistics.median(e for _, e in errors):.0f} % " \
                f"over {len(errors)} sizes"
            if large:
                text += f", {statistics.median(large):.0f} % from {LARGE_BYTES >> 10} KiB up"
            self.say(f"# Model error          : {text}")
            result["median_abs_model_err%"] = statistics.median(e for _, e in errors)
        self.say("#")
        return result
