"""Work: the handle of an async collective, as torch.distributed returns."""
from __future__ import annotations

from typing import Any, Generic, List, Optional, Tuple, TypeVar

from .backend import Job

T = TypeVar("T")


class Work(Generic[T]):
    """The result of an `async_op=True` call: valid after `wait()`, which returns a T.

    Holds the input and output arrays, so they stay alive while the collective runs."""

    def __init__(self, job: Job, result: T, *keep_alive: Any) -> None:
        self._job = job
        self._result = result
        self._keep_alive: Tuple[Any, ...] = keep_alive

    def wait(self, timeout: Optional[float] = None) -> T:
        """Block until the collective is done and return its result. Raises the collective's
        CommError if it failed, TimeoutError if `timeout` seconds pass first."""
        if not self._job.wait(-1.0 if timeout is None else float(timeout)):
            raise TimeoutError(f"dpcore: collective not done after {timeout} s (still running)")
        self._keep_alive = ()
        return self._result

    def done(self) -> bool:
        return self._job.done()

    def failed(self) -> bool:
        """Done, with an error (which wait() raises)."""
        return self._job.failed()


class DoneWork(Work[T]):
    """A Work whose collective already ran (transports without a background thread)."""

    class _Finished:
        def wait(self, timeout: float = -1.0) -> bool:
            return True

        def done(self) -> bool:
            return True

        def failed(self) -> bool:
            return False

    def __init__(self, result: T) -> None:
        super().__init__(self._Finished(), result)


class InFlight:
    """The arrays of a communicator's async calls in flight, and of calls that failed, kept for
    good: over MPI a send of a failed call may still read its buffer when a late peer comes."""

    def __init__(self) -> None:
        self._pending: List[Work[Any]] = []
        self._orphans: List[Tuple[Any, ...]] = []

    def add(self, work: Work[Any]) -> None:
        self._pending.append(work)

    def orphan(self, *arrays: Any) -> None:
        self._orphans.append(arrays)

    def reap(self) -> None:
        """Forget the calls that are done, keeping the arrays of those that failed."""
        if self._pending:
            self._orphans += [w._keep_alive for w in self._pending if w.failed()]
            self._pending = [w for w in self._pending if not w.done()]

    def failed(self) -> bool:
        """Whether a call of these failed (an async one, perhaps never waited for)."""
        return bool(self._orphans) or any(w.failed() for w in self._pending)

    def clear(self) -> None:
        self._pending = []
