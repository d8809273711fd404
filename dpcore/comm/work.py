"""Work: the handle of an async collective, as torch.distributed returns."""


class Work:
    """The result of an `async_op=True` call: valid after `wait()`.

    Holds the input and output arrays, so they stay alive while the collective runs."""

    def __init__(self, job, result, *keep_alive):
        self._job = job
        self._result = result
        self._keep_alive = keep_alive

    def wait(self, timeout=None):
        """Block until the collective is done and return its result. Raises the collective's
        CommError if it failed, TimeoutError if `timeout` seconds pass first."""
        if not self._job.wait(-1.0 if timeout is None else float(timeout)):
            raise TimeoutError(f"dpcore: collective not done after {timeout} s (still running)")
        self._keep_alive = ()
        return self._result

    def done(self):
        return self._job.done()

    def failed(self):
        """Done, with an error (which wait() raises)."""
        return self._job.failed()


class DoneWork(Work):
    """A Work whose collective already ran (transports without a background thread)."""

    class _Finished:
        def wait(self, timeout):
            return True

        def done(self):
            return True

        def failed(self):
            return False

    def __init__(self, result):
        super().__init__(self._Finished(), result)


class InFlight:
    """The arrays of a communicator's async calls in flight, and of calls that failed, kept for
    good: over MPI a send of a failed call may still read its buffer when a late peer comes."""

    def __init__(self):
        self._pending = []
        self._orphans = []

    def add(self, work):
        self._pending.append(work)

    def orphan(self, *arrays):
        self._orphans.append(arrays)

    def reap(self):
        """Forget the calls that are done, keeping the arrays of those that failed."""
        if self._pending:
            self._orphans += [w._keep_alive for w in self._pending if w.failed()]
            self._pending = [w for w in self._pending if not w.done()]

    def failed(self):
        """Whether a call of these failed (an async one, perhaps never waited for)."""
        return bool(self._orphans) or any(w.failed() for w in self._pending)

    def clear(self):
        self._pending = []
