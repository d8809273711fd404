"""A user's typed program over dpcore's public API. test_types.py type-checks it with mypy, where
each assert_type states what an annotation promises, and runs it on one rank (no mpiexec), where
the asserts check that the values are what the types say."""
from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional

import numpy as np
import numpy.typing as npt

import dpcore
from dpcore import CommError, Communicator, P2POp, Work
from dpcore.nn import Linear
from dpcore.parallel import DataParallel, DistributedSampler

if TYPE_CHECKING:
    from typing_extensions import assert_type

Floats = npt.NDArray[np.float32]


def collectives(comm: Communicator) -> None:
    x: Floats = np.arange(6, dtype=np.float32)
    total = comm.all_reduce(x, op="sum")
    work = comm.all_reduce(x, async_op=True)
    done = work.wait(timeout=10.0)
    reduced = comm.reduce(x, root=0)
    gathered = comm.all_gather(x)
    shard = comm.reduce_scatter(x)
    same = comm.broadcast(x, root=0)
    at_root = comm.gather(x, root=0)
    scattered = comm.scatter(x if comm.rank == 0 else None, np.empty(6, np.float32))
    exchanged = comm.all_to_all(x)
    if TYPE_CHECKING:
        assert_type(total, Floats)
        assert_type(work, Work[Floats])
        assert_type(done, Floats)
        assert_type(reduced, Optional[Floats])  # None off the root
        assert_type(gathered, Floats)
        assert_type(shard, Floats)
        assert_type(same, Floats)
        assert_type(at_root, Optional[Floats])
        assert_type(scattered, Floats)
        assert_type(exchanged, Floats)
    assert reduced is not None and at_root is not None  # one rank: the root
    assert float(total.sum()) == float(done.sum()) == float(reduced.sum()) == 15.0
    assert gathered.shape == shard.shape == at_root.shape == exchanged.shape == (6,)
    assert same is x and scattered.dtype == np.float32
    comm.barrier()
    counts: dict[str, int] = comm.algorithm_calls()
    assert sum(counts.values()) >= 8
    buffer = comm.alloc((2, 3), np.float64)
    if TYPE_CHECKING:
        assert_type(buffer, npt.NDArray)
    assert buffer.shape == (2, 3)


def point_to_point(comm: Communicator) -> None:
    ops: List[P2POp] = [P2POp("send", np.zeros(2), 1)]
    if comm.size > 1:
        works = comm.batch(ops)
        if TYPE_CHECKING:
            assert_type(works, List[Work[Optional[int]]])
        source: int = comm.irecv(np.zeros(2), peer=None).wait()
        print(source)


def training(comm: Communicator) -> None:
    model = Linear(4, 2)
    engine = DataParallel(model, comm, zero_stage=1, lr=0.1)
    sampler = DistributedSampler(8, batch_size=4, rank=comm.rank, size=comm.size)
    for indices, batch in sampler:
        assert len(indices) <= batch
    engine.zero_grad()
    memory: dict[str, int] = engine.memory()
    assert memory["total"] > 0


def main() -> None:
    info = dpcore.build_info()
    assert isinstance(info["version"], str)
    with dpcore.init(timeout=30.0) as comm:
        collectives(comm)
        point_to_point(comm)
        training(comm)
    try:
        comm.all_reduce(np.zeros(1))
    except (CommError, ValueError) as e:  # closed
        print(f"rank {comm.rank}: ok ({type(e).__name__})")


if __name__ == "__main__":
    main()
