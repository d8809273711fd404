"""The ring's schedule as the GPU computes it (csrc/cuda/ring_schedule.cu: algo/ring.h compiled by
nvcc, run by one device thread) equals the CPU's, verb for verb: the templates a CUDA transport
builds on mean the same on both sides. Needs a GPU; the CPU's schedule itself is checked in
tests/test_ring_schedule.py."""
import pytest

import dpcore
from dpcore import _C

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not dpcore.build_info()["cuda_available"],
                                 reason="needs a CUDA build and a GPU")]


def test_device_schedule_equals_host_schedule():
    for coll in ("all_reduce", "reduce_scatter", "all_gather", "broadcast"):
        for n in (2, 3, 5, 8):
            for count in (0, 1, 7, 1000):
                for segment_count in (3, 16):
                    for rank in range(n):
                        counts = [count // n + (r % 2) for r in range(n)] \
                            if coll == "all_gather" else []
                        root = (rank + 1) % n if coll == "broadcast" else 0
                        args = (coll, count, rank, n, segment_count, root, counts)
                        assert _C.cuda_ring_trace(*args) == _C.ring_trace(*args), args
