"""--device cuda on a machine without a GPU, as CI is.

Without CuPy, or without a GPU, every rank exits at once with one line that says why. With
tests/fake_cupy on the path (host memory under CuPy's names, NumPy arrays underneath), the bench
runs its own --device cuda code end to end: each rank's GPU (local rank % GPU count, made
current before the first allocation), filling through set() and checking through get(), the copy
floor through device pointers, NCCL left out and why; dpcore's collectives then take the arrays
as host arrays, so every row must still check out exactly. With FAKE_CUPY_EMULATED they are
dpcore.emulated's arrays instead, which dpcore's device path takes as CUDA arrays. NCCL itself cannot run here: the
calls the bench makes to it are replayed under NCCL's documented contract instead. The
GPU-side timings, CuPy's own behaviour and NCCL's are left to a GPU machine
(tests/gpu/device_check.sh, docs/busbw.md).
"""
import ctypes
import functools
import importlib.util
import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from dpcore.bench.collectives import COLLECTIVES, TESTS
from dpcore.bench.compare import NcclReference, nccl_left_out
from dpcore.bench.floor import floor_bytes
from dpcore.bench.harness import buffers
from dpcore.bench.patterns import Case
from dpcore.bench.table import bits
from test_bench import SMALL, bench, check_rows

FAKE_CUPY = Path(__file__).resolve().parent / "fake_cupy"
ERROR = "python -m dpcore.bench: error: --device cuda"


def with_fake_cupy(devices):
    path = os.pathsep.join(filter(None, [str(FAKE_CUPY), os.environ.get("PYTHONPATH")]))
    return {"PYTHONPATH": path, "FAKE_CUPY_DEVICES": str(devices)}


def device_lines(output):
    """{rank: what its line in the header says after 'local rank i/k'}."""
    return {int(line.split()[2]): line.split(" local rank ")[1].split(" ", 1)[1]
            for line in output.splitlines() if line.startswith("#  Rank")}


@pytest.mark.mpi
@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="CuPy is installed")
def test_without_cupy_every_rank_exits_with_one_line(tmp_path):
    output, doc = bench(tmp_path, 2, "all_reduce", "--device", "cuda", status=2)
    assert output.strip().splitlines() == [
        f"{ERROR} needs CuPy (pip install cupy-cuda13x, or dpcore's [cuda] extra): "
        "ModuleNotFoundError: No module named 'cupy'"], output
    assert doc is None


@pytest.mark.mpi
def test_without_a_gpu_every_rank_exits_with_one_line(tmp_path):
    output, doc = bench(tmp_path, 2, "all_gather", "--device", "cuda", status=2,
                        env=with_fake_cupy(0))
    assert output.strip().splitlines() == [
        f"{ERROR} found no usable GPU: CUDARuntimeError: cudaErrorNoDevice: no CUDA-capable "
        "device is detected"], output
    assert doc is None


@pytest.mark.mpi
def test_two_ranks_share_one_gpu_and_nccl_is_left_out(tmp_path):
    """-R 1: the buffers registered for each row (comm.register; the fake's arrays are host
    arrays, whose registrations map nothing) and deregistered after it."""
    output, doc = bench(tmp_path, 2, "all_reduce", *SMALL, "-d", "int32", "--device", "cuda",
                        "-R", "1", env=with_fake_cupy(1))
    check_rows(doc, output, "all_reduce", 2, compare=False)
    header = output.splitlines()[0]
    assert "compare: none (NCCL left out: 2 ranks on a node with 1 GPU, and NCCL refuses two " \
           "ranks on one GPU)" in header and "device: cuda floor: 1" in header, header
    assert device_lines(output) == {0: "cuda device 0 (Fake GPU)", 1: "cuda device 0 (Fake GPU)"}
    assert doc["device"] == "cuda" and doc["compare"] is None and doc["floor"] is True
    assert "2 ranks on a node with 1 GPU" in doc["compare_left_out"]
    for row in doc["rows"]:
        assert row["device"] == "cuda"
        assert row["floor_bytes"] == floor_bytes("all_reduce", 2, row["size"])
        assert row["floor_time_us"] > 0 and row["ip_floor%"] > 0


@pytest.mark.mpi
def test_registered_buffers_run_direct_on_the_emulated_device(tmp_path):
    """-R 1 --algo direct where the fake's arrays are dpcore.emulated's (FAKE_CUPY_EMULATED):
    each row registers ordinary device buffers with comm.register, runs direct on the device
    transport's emulation, checks out exactly and deregisters (with -R 0, direct is refused)."""
    env = {**with_fake_cupy(1), "FAKE_CUPY_EMULATED": "1", "DPCORE_CUDA_EMULATION": "1"}
    output, doc = bench(tmp_path, 2, "all_reduce", *SMALL, "--device", "cuda", "-R", "1",
                        "--algo", "direct", env=env)
    check_rows(doc, output, "all_reduce", 2, compare=False)
    assert doc["rows"] and all(row["oop_algo"] == "direct" for row in doc["rows"]), doc
    output, doc = bench(tmp_path, 2, "all_reduce", *SMALL, "--device", "cuda", "--algo",
                        "direct", env=env)
    assert "# float32 sum: stopped: dpcore: algo 'direct' on CUDA arrays reads the peers' " \
           "buffers" in output and "comm.register" in output and not doc["rows"], output


@pytest.mark.mpi
def test_each_rank_takes_local_rank_modulo_the_gpus(tmp_path):
    output, doc = bench(tmp_path, 3, "reduce_scatter", *SMALL, "-d", "float16", "-o", "max",
                        "--one-buffer", "--device", "cuda", env=with_fake_cupy(2))
    check_rows(doc, output, "reduce_scatter", 3, compare=False)
    assert {r: line.split(" (")[0] for r, line in device_lines(output).items()} == {
        0: "cuda device 0", 1: "cuda device 1", 2: "cuda device 0"}
    assert "3 ranks on a node with 2 GPUs" in doc["compare_left_out"]


def test_one_rank_skips_bfloat16_and_says_why_nccl_is_left_out(tmp_path):
    output, doc = bench(tmp_path, 0, "broadcast", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0",
                        "-d", "all", "--device", "cuda", env=with_fake_cupy(1))
    check_rows(doc, output, "broadcast", 1, compare=False)
    assert doc["compare_left_out"].startswith("CuPy has no NCCL: ImportError"), doc
    if "bfloat16" in output:  # -d all lists it where ml_dtypes is installed
        assert "# bfloat16: skipped: CuPy has no bfloat16 arrays" in output
    assert "bfloat16" not in {row["type"] for row in doc["rows"]}
    assert {"float16", "float32", "int8", "int64"} <= {row["type"] for row in doc["rows"]}


def test_nccl_is_left_out_where_ranks_outnumber_gpus():
    assert nccl_left_out(2, 1) == ("2 ranks on a node with 1 GPU, and NCCL refuses two ranks "
                                   "on one GPU")
    assert "3 ranks on a node with 2 GPUs" in nccl_left_out(3, 2)
    assert nccl_left_out(2, 2) is None and nccl_left_out(4, 8) is None


# -- the NCCL calls, replayed under NCCL's contract ----------------------------------------------

# nccl.h's values, which cupy.cuda.nccl exports under these names
NCCL_H = SimpleNamespace(NCCL_INT8=0, NCCL_UINT8=1, NCCL_INT32=2, NCCL_UINT32=3, NCCL_INT64=4,
                         NCCL_UINT64=5, NCCL_FLOAT16=6, NCCL_FLOAT32=7, NCCL_FLOAT64=8,
                         NCCL_SUM=0, NCCL_PROD=1, NCCL_MAX=2, NCCL_MIN=3,
                         groupStart=lambda: None, groupEnd=lambda: None)
NCCL_DTYPES = {0: np.int8, 1: np.uint8, 2: np.int32, 3: np.uint32, 4: np.int64, 5: np.uint64,
               6: np.float16, 7: np.float32, 8: np.float64}
NCCL_REDUCE = {0: np.add, 1: np.multiply, 2: np.maximum, 3: np.minimum}


class OnDevice(np.ndarray):
    """A host array whose .data.ptr is its address, as a CuPy array's is its device address."""

    @property
    def data(self):
        return SimpleNamespace(ptr=self.__array_interface__["data"][0])


class Recorder:
    """An NcclCommunicator that records each call: (method, arguments)."""

    def __getattr__(self, method):
        return lambda *args: self.calls.append((method, args))

    def __init__(self):
        self.calls = []


def memory(ptr, count, dtype):
    """count elements of dtype at address ptr, as an array over that memory."""
    nbytes = count * np.dtype(dtype).itemsize
    return np.frombuffer((ctypes.c_char * nbytes).from_address(ptr), dtype) if nbytes else \
        np.empty(0, dtype)


def replay(calls):
    """Run one call per rank as NCCL documents it (ncclAllReduce, ncclReduceScatter with
    recvcount, ncclAllGather with sendcount, ncclBroadcast), reading every input before writing
    any output, as in-place calls need."""
    (method, first), n = calls[0], len(calls)
    assert all(m == method for m, _ in calls), calls
    if method == "broadcast":
        send, recv, count, dtype, root, _ = first
        assert all(args[2:5] == (count, dtype, root) for _, args in calls), calls
        data = memory(calls[root][1][0], count, NCCL_DTYPES[dtype]).copy()
        for _, args in calls:
            memory(args[1], count, NCCL_DTYPES[dtype])[...] = data
        return
    count, dtype = first[2], first[3]
    assert all(args[2:-1] == first[2:-1] for _, args in calls), calls  # count, type, op[, root]
    sent = count * n if method == "reduceScatter" else count
    inputs = [memory(args[0], sent, NCCL_DTYPES[dtype]).copy() for _, args in calls]
    if method == "allGather":
        result = np.concatenate(inputs)
    else:
        result = functools.reduce(NCCL_REDUCE[first[4]], inputs)
    for r, (_, args) in enumerate(calls):
        if method == "reduce" and r != first[5]:  # ncclReduce writes the root's recvbuff alone
            continue
        out = result[r * count:(r + 1) * count] if method == "reduceScatter" else result
        memory(args[1], out.size, NCCL_DTYPES[dtype])[...] = out


def replay_sends_and_recvs(per_rank):
    """Each rank's group of ncclSend and ncclRecv: the k-th send from p to q meets the k-th recv
    on q from p, with the same count and type; every send is read before any recv is written."""
    sent = {}
    for p, calls in enumerate(per_rank):
        for method, (ptr, count, dtype, peer, _) in calls:
            assert method in ("send", "recv"), method
            if method == "send":
                data = memory(ptr, count, NCCL_DTYPES[dtype]).copy()
                sent.setdefault((p, peer), []).append((count, dtype, data))
    for q, calls in enumerate(per_rank):
        for method, (ptr, count, dtype, peer, _) in calls:
            if method == "recv":
                want_count, want_dtype, data = sent[(peer, q)].pop(0)
                assert (count, dtype) == (want_count, want_dtype), (peer, q)
                memory(ptr, count, NCCL_DTYPES[dtype])[...] = data
    assert not any(sent.values()), "a send without its recv"


@pytest.mark.parametrize("coll", [*COLLECTIVES, "sendrecv"])
@pytest.mark.parametrize("in_place", [False, True], ids=["oop", "ip"])
@pytest.mark.parametrize("dtype, op", [(np.float32, "sum"), (np.int8, "prod"),
                                       (np.float16, "max"), (np.int64, "min")], ids=str)
def test_the_nccl_calls_give_the_expected_results(coll, in_place, dtype, op):
    """The bench's NCCL calls on its own buffer layouts (harness.buffers), replayed on 3 ranks
    under NCCL's contract, leave on every rank exactly what the bench checks dpcore against:
    right pointers (in place: the rank's shard of the larger buffer), counts, types and ops."""
    coll, n, count = TESTS[coll], 3, 3 * 7 + 2
    cases = [Case(np.dtype(dtype), op, 1, "auto", n, r, count, coll.sizes(count, n))
             for r in range(n)]
    empty = lambda size, dt: np.empty(size, dt).view(OnDevice)  # noqa: E731
    layouts = [buffers(coll, case, in_place, empty) for case in cases]
    comms = [Recorder() for _ in range(n)]
    for case, (send, recv), comm in zip(cases, layouts, comms):
        recv[...] = 0
        coll.init(send, case)
        NcclReference(NCCL_H, comm, 0).run(coll, send, recv, case, in_place)
    if comms[0].calls[0][0] in ("send", "recv"):  # what NCCL has no collective for
        replay_sends_and_recvs([comm.calls for comm in comms])
    else:
        assert all(len(comm.calls) == 1 for comm in comms)
        replay([comm.calls[0] for comm in comms])
    for case, (_, recv) in zip(cases, layouts):
        expected = coll.expected(case)
        if expected is not None:  # a non-root's reduce or gather receives nothing
            assert np.array_equal(bits(recv.view(np.ndarray)), bits(expected)), case.rank
