"""The Path interface: where a collective's arrays live and how a call reaches its backend. The
Communicator writes each collective's checks once over it; HostPath (host_path.py: NumPy and CPU
DLPack arrays) and DevicePath (device_path.py: CUDA arrays) implement it. A view is what a path
sees of an array: a NumPy array on the host, a cuda_arrays.DeviceArray on the device; both have
dtype, shape, size and nbytes."""
from typing import Any, Callable, List, Optional, Protocol, Tuple

from .backend import Job
from .choice import Rules

View = Any


class Path(Protocol):
    rules: Rules  # what its transport can run, for choice.choose

    def view(self, x, what: str) -> Tuple[View, Optional[Callable]]:
        """(x as this path sees it, a function that turns a result view into x's array type, or
        None where the view is already what the caller gets)."""

    def out_view(self, out, what: str) -> View:
        """A caller's `out` as this path sees it; TypeError where it lives on the other side."""

    def check(self, v: View, what: str) -> None:
        """ValueError where the path cannot take v (not C-contiguous; on the device: misaligned,
        or on another GPU than the communicator's)."""

    def writable(self, v: View) -> bool:
        """Whether v may be written."""

    def empty(self, v: View, shape, wrap) -> Tuple[View, Any]:
        """A new array like v in `shape`: (as the path sees it, as the caller gets it)."""

    def overlap(self, a: View, b: View) -> Optional[int]:
        """Where b starts, in bytes from a's start, if their memory overlaps; else None."""

    def run(self, coll: int, dtype: int, op: int, root: int, algo: int, a: View, out: View,
            count: int, total: int, table: int = 0) -> None:
        """The checked call, blocking (dpcore.comm.backend.Backend.run's arguments; table: the
        address of the call's uint64 table in host memory, or 0)."""

    def submit(self, coll: int, dtype: int, op: int, root: int, algo: int, a: View, out: View,
               count: int, total: int, table: int = 0) -> Job:
        """The checked call, queued in issue order; the caller keeps a and out alive."""

    def exchange_counts(self, coll: int, root: int, dtype: int, count: int,
                        shard: View) -> List[int]:
        """Every rank's shard length (a collective of headers only; Backend.exchange_counts)."""

    def algo_calls(self) -> List[int]:
        """Collectives run per algorithm code on this path."""
