"""The Backend protocol: the raw calls a Communicator makes on its transport.

Every backend is a dpcore._C object whose class derives from _C.Backend (ShmBackend,
MpiBackend, HierarchicalBackend: dpcore.transports.connect makes them); all run the same C++
machinery (csrc/core/): call matching, the in-order worker, the algorithms. The Communicator
has checked every argument before it calls; codes are those of dpcore.dtypes.
"""
from typing import List, Protocol, Tuple


class Job(Protocol):
    """An async collective in flight (_C.Job)."""

    def wait(self, timeout: float = -1.0) -> bool:
        """True once done (raising the collective's CommError if it failed); False if
        `timeout` seconds (negative: no limit) passed first."""

    def done(self) -> bool:
        """Whether it finished, without waiting."""


class Backend(Protocol):
    sequence: int  # collectives this backend has started

    def run(self, coll: int, dtype: int, op: int, root: int, algo: int, in_array, out_array,
            count: int, total: int) -> None:
        """One collective, blocking, after any queued ones. in_array and out_array are C-contiguous
        NumPy arrays (out_array is written; broadcast: both are the buffer); count: elements of
        in_array (all_gather: this rank's shard), total: of the all_gather output, else count."""

    def submit(self, coll: int, dtype: int, op: int, root: int, algo: int, in_array, out_array,
               count: int, total: int) -> Job:
        """The same, async: it runs in issue order on a background thread. The caller keeps
        both arrays alive until the Job is done."""

    def exchange_counts(self, dtype: int, mine: int) -> List[int]:
        """Every rank's all_gather shard length (a collective: only headers travel)."""

    def drain(self) -> None:
        """Wait until every queued collective is done."""

    def algo_calls(self) -> List[int]:
        """Collectives run per algorithm code, auto counted as what it ran (after drain)."""

    def set_timeout(self, seconds: float) -> None:
        """How long later collectives may wait for a peer."""

    def enable_trace(self, on: bool) -> None:
        """Record a span per collective and per ring step (DPCORE_TRACE)."""

    def take_trace(self) -> List[Tuple[str, int, int, int, int, int, int, int, int]]:
        """The recorded (name, start_us, duration_us, seq, step, bytes, algo, dtype, op), the
        last three codes or -1 (ring steps), cleared."""
