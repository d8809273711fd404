"""The transports every correctness test runs under, chosen by environment, at the rank counts
that take each of their paths. A test parametrized over CONFIGS runs the same script on each.

    shm-K              K ranks on one node: shared memory (4 ranks share this machine's 2 cores)
    mpi-K              DPCORE_TRANSPORT=mpi: every collective over MPI point-to-point
    nodes-of-1-xK      DPCORE_NODE_SIZE=1: K virtual nodes of one rank, the flat ring over MPI
    nodes-of-2-uneven  3 ranks in nodes of 2 and 1: the flat fallback
    nodes-of-2-x2      2 nodes of 2: all_reduce hierarchical (shared memory inside, MPI across)
"""
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Config:
    ranks: int
    settings: dict = field(default_factory=dict)  # the DPCORE_* that choose the transport
    transport: str = "shm"  # comm.transport
    path: str = "flat"      # "hierarchical": all_reduce through the node's shared memory

    @property
    def shm(self):
        return self.transport == "shm"

    @property
    def env(self):
        """The settings, and what the scripts check they led to (checks.expect_transport)."""
        return {**self.settings, "EXPECT_TRANSPORT": self.transport, "EXPECT_PATH": self.path}


def _mpi(k):
    return Config(k, {"DPCORE_TRANSPORT": "mpi"}, "mpi")


def _nodes(size, k, path="flat"):
    return Config(k, {"DPCORE_NODE_SIZE": str(size)}, "shm+mpi", path)


SHM = {f"shm-{k}": Config(k) for k in (1, 2, 3, 4)}
BETWEEN_NODES = {
    **{f"mpi-{k}": _mpi(k) for k in (1, 2, 3, 4)},
    "nodes-of-1-x2": _nodes(1, 2),
    "nodes-of-1-x3": _nodes(1, 3),
    "nodes-of-2-uneven": _nodes(2, 3),
    "nodes-of-2-x2": _nodes(2, 4, "hierarchical"),
}
CONFIGS = {**SHM, **BETWEEN_NODES}
# Shared memory and one of each path between nodes (MPI alone, hierarchical), for the checks
# whose every case takes seconds of timeouts or waits.
EACH_PATH = {**SHM, **{k: BETWEEN_NODES[k] for k in ("mpi-3", "nodes-of-2-x2")}}
