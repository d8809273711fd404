"""gather, scatter and all_to_all: the Communicator's collectives that move shards between ranks
(csrc/algo/exchange.h), their checks written once over the Path, as the Communicator's own
(communicator.py), over the helpers every call shares (calls.py)."""
from __future__ import annotations

from typing import Any, Literal, Optional, Sequence, overload

import numpy as np

from ..arrays import A
from .. import _C
from ..dtypes import ALL_TO_ALL, DTYPES, GATHER, SCATTER, dtype_code
from .calls import Calls
from .choice import AUTO, choose, root_rank
from .path import Path, View
from .pieces import checked as checked_pieces
from .splits import even, row
from .splits import matrix as exchanged_splits
from .work import Work


class Exchanges(Calls):
    """Mixed into dpcore.comm.communicator.Communicator."""

    @overload
    def gather(self, s: A, root: int = ..., out: Optional[A] = ..., algo: str = ...,
               async_op: Literal[False] = ...) -> Optional[A]: ...
    @overload
    def gather(self, s: A, root: int = ..., out: Optional[A] = ..., algo: str = ..., *,
               async_op: Literal[True]) -> Work[Optional[A]]: ...

    def gather(self, s: Any, root: int = 0, out: Any = None, algo: str = "auto",
               async_op: bool = False) -> Any:
        """Every rank's shard s (read flat), concatenated in rank order, on the root: a new 1-D
        array, or out (which may hold the root's shard at its place: in place). Shards may
        differ in length; a root that passes no out learns them first (a header-only round,
        which the other ranks' gather meets). Other ranks return None, and their out must be
        None."""
        done = self._plain(GATHER, s, out, root, None, algo, async_op)
        if done is not NotImplemented:  # a user's loop's call, checked and run in one step
            return done
        path, a, wrap = self._view(s, "shard")
        dtype = dtype_code(a.dtype)
        path.check(a, "shard")
        root = root_rank(root, self.size, "gather")
        code = choose(algo, "gather", a.nbytes, path.rules)
        if self.rank != root:
            if out is not None:
                raise ValueError(f"dpcore: gather's out is the root's (rank {root}); rank "
                                 f"{self.rank} passes out=None")
            return self._launch(path, GATHER, dtype, 0, root, code, a, a, a.size, 0, None,
                                async_op)
        # with out, the shards' lengths come in the gather's own headers; without, before it
        if out is None:
            self._checked_backend()  # raises once closed
            self._in_flight.reap()
            total = sum(path.exchange_counts(GATHER, root, dtype, a.size, a))
            out_a, out = path.empty(a, (total,), wrap)
        else:
            out_a = self._gather_out(path, a, out)
        # an out of another size: refused by every rank alike (csrc/core/call.h)
        return self._launch(path, GATHER, dtype, 0, root, code, a, out_a, a.size, out_a.size,
                            out, async_op)

    def _gather_out(self, path: Path, a: View, out: Any) -> View:
        out_a = path.out_view(out, "out")
        self._check_out(path, out_a, a.dtype, None, None, "out")
        offset = path.overlap(out_a, a)  # in place: the shard whole, on an element
        if offset is not None and not (0 <= offset and offset + a.nbytes <= out_a.nbytes
                                       and offset % out_a.dtype.itemsize == 0):
            raise ValueError(f"dpcore: the shard partly overlaps out (it starts {offset:+d} "
                             f"bytes from out's start); in place, it must be its rank's own "
                             f"slice of out")
        return out_a

    @overload
    def scatter(self, x: Optional[A], out: A, root: int = ..., algo: str = ...,
                async_op: Literal[False] = ...) -> A: ...
    @overload
    def scatter(self, x: Optional[A], out: A, root: int = ..., algo: str = ..., *,
                async_op: Literal[True]) -> Work[A]: ...

    def scatter(self, x: Any, out: Any, root: int = 0, algo: str = "auto",
                async_op: bool = False) -> Any:
        """This rank's shard of root's x (read flat) into out, in place; returns out. x is the
        root's alone (None elsewhere), and holds the sum of every rank's out.size elements, in
        rank order (shards may differ in length). On the host, x may also be a list of one
        array per rank, x[q] for rank q, all of one size (each rank's out holds one): taken
        where they lie, not copied together first."""
        done = self._plain(SCATTER, x, out, root, None, algo, async_op)
        if done is not NotImplemented:  # as gather's
            return done
        if type(x) is list and type(root) is int and root == self.rank and algo == "auto":
            # the root's pieces, checked in one step as well (_C.piece_table)
            table = _C.piece_table(x, out, self.size)
            dtype = DTYPES.get(out.dtype) if table is not None else None
            if table is not None and dtype is not None:
                return self._launch(self._host, SCATTER, dtype, 0, root, AUTO, x[0], out,
                                    self.size * out.size, out.size, out, async_op, table[1],
                                    (table[0], tuple(x)))  # x may change
        path, o, _ = self._view(out, "out")
        root = root_rank(root, self.size, "scatter")
        pieces = None
        if self.rank != root:
            if x is not None:
                raise ValueError(f"dpcore: scatter's x is the root's (rank {root}); rank "
                                 f"{self.rank} passes x=None")
            a, count = o, 0
        elif x is None:
            raise ValueError(f"dpcore: scatter's root (rank {root}) passes its x")
        elif isinstance(x, (list, tuple)):
            if path is not self._host:
                raise TypeError("dpcore: scatter takes x as a list on the host; on the device, "
                                "pass one array (the pieces concatenated)")
            pieces = checked_pieces(path, x, o, self.size)
            a, count = pieces.views[0], self.size * pieces.views[0].size
        else:
            a = path.out_view(x, "x")
            path.check(a, "x")
            if path.overlap(a, o) is not None:
                raise ValueError("dpcore: scatter's out overlaps x; pass a buffer of its own")
            count = a.size
        self._check_out(path, o, a.dtype, None, None, "out")
        return self._launch(path, SCATTER, dtype_code(a.dtype), 0, root,
                            choose(algo, "scatter", count * a.dtype.itemsize, path.rules), a, o,
                            count, o.size, out, async_op,
                            0 if pieces is None else pieces.table.ctypes.data, pieces)

    @overload
    def all_to_all(self, x: A, out: Optional[A] = ..., splits: Optional[Sequence[int]] = ...,
                   out_splits: Optional[Sequence[int]] = ..., algo: str = ...,
                   async_op: Literal[False] = ...) -> A: ...
    @overload
    def all_to_all(self, x: A, out: Optional[A] = ..., splits: Optional[Sequence[int]] = ...,
                   out_splits: Optional[Sequence[int]] = ..., algo: str = ..., *,
                   async_op: Literal[True]) -> Work[A]: ...

    def all_to_all(self, x: Any, out: Any = None, splits: Optional[Sequence[int]] = None,
                   out_splits: Optional[Sequence[int]] = None, algo: str = "auto",
                   async_op: bool = False) -> Any:
        """x read flat: splits[q] elements to rank q, in rank order (None: x.size / n each);
        out_splits[p] elements from rank p (None: learned). out: a new 1-D array of
        sum(out_splits) elements (equal splits: x's shape), or the given one (not x). With
        splits or out_splits, every rank passes them: one small all_gather exchanges them, and
        splits that disagree between ranks raise CommError on every rank."""
        if splits is None and out_splits is None:
            done = self._plain(ALL_TO_ALL, x, out, 0, None, algo, async_op)
            if done is not NotImplemented:  # as gather's
                return done
        path, a, wrap = self._view(x, "x")
        dtype = dtype_code(a.dtype)
        path.check(a, "x")
        code = choose(algo, "all_to_all", a.nbytes, path.rules)
        matrix, shape, exchanges = None, a.shape, splits is not None or out_splits is not None
        mine = row(splits, out_splits, a.size, self.size) if exchanges else even(a.size,
                                                                                 self.size)
        if out is not None:  # where out_splits are learned, every rank checks out's size (call.h)
            out_a, result = path.out_view(out, "out"), out
            takes = (a.size if not exchanges else
                     None if out_splits is None else int(mine[self.size:].sum()))
            self._check_out(path, out_a, a.dtype, takes, None, "out")
            if path.overlap(a, out_a) is not None:
                raise ValueError("dpcore: all_to_all's out overlaps x; pass a buffer of its own")
        if exchanges:
            rows = self.all_gather(mine, out=np.empty(2 * self.size ** 2, np.int64))
            matrix = exchanged_splits(rows, self.size)
            shape = (int(matrix[:, self.rank].sum()),)
        if out is None:
            out_a, result = path.empty(a, shape, wrap)
        return self._launch(path, ALL_TO_ALL, dtype, 0, 0, code, a, out_a, a.size, out_a.size,
                            result, async_op, 0 if matrix is None else matrix.ctypes.data, matrix)

