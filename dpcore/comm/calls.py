"""What every call of a Communicator shares, whichever mixin states it (communicator.py,
exchanges.py, p2p_calls.py): the path its arrays take, the checks of an `out`, the owner thread,
and the launch on the path's backend."""
from __future__ import annotations

import threading
from contextlib import contextmanager
from threading import get_ident
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional, Tuple

import numpy as np

from .. import _C
from . import ending
from .cuda_arrays import device_view
from .path import Path, View
from .plain import Entry
from .work import InFlight, Work

if TYPE_CHECKING:
    from .backend import Backend
    from .device_path import DevicePath
    from .host_path import HostPath
    from .p2p import PointToPoint

# A function that turns a path's result back into the caller's array type (None: it already is)
Wrap = Optional[Callable[[Any], Any]]


class Calls:
    """The base of dpcore.comm.communicator.Communicator, which sets these in its __init__."""

    rank: int
    size: int
    _backend: Optional[Backend]  # None once closed
    _owner: int  # the thread that may call (threading.get_ident)
    _owner_name: str
    _host: HostPath
    _device: DevicePath
    _in_flight: InFlight
    _plain_calls: _C.PlainCalls  # the one-step call of a user's loop (plain.py)
    _plain: Entry                # its entry: every verb offers its call there first
    _p2p: PointToPoint
    all_gather: Callable[..., Any]  # all_to_all's exchange of the splits

    def _view(self, x: Any, what: str) -> Tuple[Path, View, Wrap]:
        """(the path x takes, x as that path sees it, wrap: a result back into x's type)."""
        view = device_view(x, what)
        if view is not None:
            return self._device, view, None
        return (self._host, *self._host.view(x, what))

    def _output(self, path: Path, a: View, wrap: Wrap, x: Any, out: Any, at: int,
                shape: Tuple[int, ...], any_shape: bool = False) -> Tuple[View, Any]:
        """(out as the path sees it, the result the caller gets) for a result in `shape` (or,
        with any_shape, of as many elements in any shape): a new array where out is None, else
        out, checked to take it. out may share memory with x only in the collective's in-place
        form, starting `at` bytes into x (all_reduce: x's very memory; reduce_scatter: this
        rank's shard): any other overlap would have the collective overwrite input it has still
        to read."""
        if out is None:
            return path.empty(a, shape, wrap)
        o = a if out is x else path.out_view(out, "out")
        if any_shape:
            self._check_out(path, o, a.dtype, shape[0], None, "out")
        else:
            self._check_out(path, o, a.dtype, None, shape, "out")
        offset = path.overlap(a, o)
        if offset is not None and offset != at:
            place = "its very memory" if at == 0 else f"the part that starts {at} bytes into it"
            raise ValueError(f"dpcore: out partly overlaps x (it starts {offset:+d} bytes from "
                             f"x's start); in place, out must be {place}")
        return o, out

    @staticmethod
    def _check_out(path: Path, o: View, dtype: np.dtype[Any], size: Optional[int],
                   shape: Optional[Tuple[int, ...]], what: str) -> None:
        """That `o` (as its path sees it) can take a result of dtype in `shape`, or of `size`
        elements where shape is None, or of any size."""
        if o.dtype != dtype:
            raise TypeError(f"dpcore: {what} has dtype {o.dtype}, expected {dtype}")
        if shape is not None:
            if o.shape != shape:
                raise ValueError(f"dpcore: {what} has shape {o.shape}, expected {shape}")
        elif size is not None and o.size != size:
            raise ValueError(f"dpcore: {what} has {o.size} elements, expected {size}")
        path.check(o, what)
        if not path.writable(o):
            raise ValueError(f"dpcore: {what} is read-only")

    def _checked_backend(self) -> Backend:
        if self._backend is None:
            raise ValueError("dpcore: the communicator is closed")
        if self._owner != get_ident():
            self._claim()  # raises
        return self._backend

    def _claim(self) -> None:
        """A communicator belongs to the thread that created it, as an NCCL communicator to one
        thread: calls from two threads would meet the peers' calls in different orders and
        silently mix their data. (Not the thread of its first call: that may differ from rank
        to rank.)"""
        me = threading.current_thread()
        raise RuntimeError(f"dpcore: this communicator belongs to thread {self._owner_name!r}, "
                           f"which created it; a call from thread {me.name!r} could meet the "
                           f"peers' calls out of order. Create a communicator in the thread "
                           f"that uses it (dpcore.init there, in the same order on every rank)")

    @contextmanager
    def lent_to_this_thread(self) -> Iterator[None]:
        """Within the with-block, this thread makes the calls in the owner's stead: for a thread
        that the owner waits for, such as the one torch's autograd runs a CUDA backward on
        (and DDP's hooks in it) while the thread that called backward() waits. Calls stay in
        one order only if the owner makes none meanwhile, which is the lender's to ensure."""
        owner = self._owner, self._owner_name
        self._set_owner(get_ident(), threading.current_thread().name)
        try:
            yield
        finally:
            self._set_owner(*owner)

    def _set_owner(self, ident: int, name: str) -> None:
        """The thread that may call, here and in the plain calls' entry."""
        self._owner, self._owner_name = ident, name
        self._plain_calls.owner = ident

    def _launch(self, path: Path, coll: int, dtype: int, op: int, root: int, algo: int,
                a: View, out_a: Optional[View], count: int, total: int, result: Any,
                async_op: bool, table: int = 0, keep: Any = None) -> Any:
        """table: the address of the call's uint64 table (all_to_all's splits matrix, scatter's
        pieces' addresses), or 0; keep: what else the call reads (the table itself, scatter's
        pieces), kept alive as the arrays are."""
        if self._backend is None or self._owner != get_ident():
            self._checked_backend()  # raises
        if not async_op:
            try:
                path.run(coll, dtype, op, root, algo, a, out_a, count, total, table)
            except RuntimeError as e:
                self._in_flight.orphan(a, out_a, keep)
                ending.note_failure(e)
                raise
            return result
        self._in_flight.reap()
        work = Work(path.submit(coll, dtype, op, root, algo, a, out_a, count, total, table),
                    result, a, out_a, keep)
        self._in_flight.add(work)  # keeps the arrays alive even if the caller drops the Work
        return work
