"""torch Work objects for dpcore collectives, and the thread that completes their futures.

A blocking call (async_op=False) has run when the backend returns, so its Work is done at once.
An async call runs on dpcore's worker thread while the caller computes; torch then wants a
Future that completes on its own: DDP's reducer chains `.then()` on `get_future()` and never
calls `Work.wait()`. dpcore's jobs have no callbacks, so one thread per process group, the
completion thread, waits for those whose future was asked for, in that order, and completes
their futures; a Work that is only waited for is finished by its waiter. Callbacks chained
with `.then()` therefore run on that thread; dpcore's collectives still run only on the thread
that created the group (see process_group.py).
"""
import queue
import threading

import torch
import torch.distributed as dist


class Done(dist.Work):
    """A collective that has already run: wait() returns at once."""

    def __init__(self, value):
        super().__init__()
        self._value = value

    def wait(self, timeout=None):
        return True

    def get_future(self):
        future = torch.futures.Future()
        future.set_result(self._value)
        return future

    def is_completed(self):
        return True

    def is_success(self):
        return True

    def exception(self):
        return None

    def result(self):
        return self._value


class Pending(dist.Work):
    """One or more async dpcore collectives (dpcore.Work), issued as one torch call; `then`
    (may be None) runs once after they are done, before anyone sees the result: it copies
    results into place where torch's layout is not dpcore's."""

    def __init__(self, jobs, value, then=None):
        super().__init__()
        self._jobs, self._value, self._then = jobs, value, then
        # torch's consumers (DDP's reducer, in C++) need a future in error state, which a
        # Python Future gets only from a callback that raises: so torch gets a child future of
        # the one the completion thread completes, and the child raises a failure's error.
        # torch words that error "Got the following error when running the callback: " and
        # the error as pybind11 prints it, with every Python frame it passed through, so the
        # callback is torch's own value(), which raises through C alone (see fail): one line.
        # (The error's own type reaches Python only through Work.wait(): a future in error
        # state holds torch's RuntimeError.)
        self._source = torch.futures.Future()
        self._future = self._source.then(torch._C.Future.value)
        self._lock = threading.Lock()
        self._finished, self._error = False, None
        self.results = []  # what each job's wait() returned (an irecv's: the source rank)
        self._completer = None  # set by Completer.track; queued there at the first get_future

    def finish(self, timeout=None):
        """Wait for the collectives and run `then`, once; raise their error, on every call."""
        with self._lock:
            if not self._finished:
                try:
                    for job in self._jobs[len(self.results):]:
                        self.results.append(job.wait(timeout))
                    if self._then is not None:
                        self._then()
                except TimeoutError:  # still running: a later wait may see it through
                    raise
                except BaseException as e:
                    self._error = e
                self._finished, self._jobs = True, ()
        if self._error is not None:
            raise self._error

    def wait(self, timeout=None):
        # torch passes a timedelta; zero is its "no timeout" (kNoTimeout)
        seconds = timeout.total_seconds() if timeout is not None else 0
        self.finish(seconds if seconds > 0 else None)
        return True

    def get_future(self):
        if self._completer is not None:  # from now on the future must complete on its own
            self._completer, completer = None, self._completer
            completer.finish_later(self)
        return self._future

    def is_completed(self):
        # a caller may poll instead of waiting: finish what is done without blocking
        if not self._finished and all(job.done() for job in self._jobs):
            try:
                self.finish()
            except BaseException:  # kept: wait() raises it, exception() returns it
                pass
        return self._finished

    def is_success(self):
        return self._finished and self._error is None

    def exception(self):
        return self._error

    def result(self):
        self.finish()
        return self._value


def _finished_generator():
    yield


# throw() into a generator that has finished raises the exception at once, from C: an unwrap
# function that adds no Python frame to its traceback, so torch's message of it is one line.
_finished = _finished_generator()
for _ in _finished:
    pass
_raise_bare = _finished.throw


def fail(future, error):
    """Complete `future` so that its value() raises `error`, and its child futures fail."""
    future._set_unwrap_func(_raise_bare)
    future.set_result(error.with_traceback(None))


class Completer:
    """The completion thread of one process group: finishes each Pending whose future someone
    asked for, in the order asked, and completes the future with the result or the error. A
    Work only waited for (dist.send, dist.recv, a plain async_op=True then wait()) never passes
    through it: its caller waits for the collective itself, without waking this thread and
    then being woken by it (two thread switches, tens of microseconds a call)."""

    def __init__(self, name):
        self._queue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def track(self, work):
        """Completes work's future once its get_future() is called."""
        work._completer = self
        return work

    def finish_later(self, work):
        self._queue.put(work)

    def _run(self):
        while True:
            work = self._queue.get()
            if work is None:
                return
            try:
                work.finish()
            except BaseException as e:  # the collective's error reaches the future's users
                fail(work._source, e)
            else:
                work._source.set_result(work._value)

    def stop(self):
        """Complete what was given, then end the thread."""
        self._queue.put(None)
        self._thread.join()
