"""scatter's x given on the root as a list, one array per rank (torch's scatter_list, mpi4py's
list): checked here, then handed to the backend as it lies, with a table of the pieces'
addresses (csrc/include/dpcore/task.h: Pieces), so that no piece is first copied into one
buffer. Each rank's out must hold one piece: the root's is checked here (the backend takes its
length for the pieces'), the others' by every rank in the call's headers (core/call.cc)."""
from __future__ import annotations

from typing import Any, List, NamedTuple, Sequence

import numpy as np
import numpy.typing as npt

from .path import Path, View


class Pieces(NamedTuple):
    views: List[View]  # as the path sees them, kept alive for the call
    table: npt.NDArray[np.uint64]  # their addresses, in rank order


def checked(path: Path, xs: Sequence[Any], out: View, size: int) -> Pieces:
    """The root's list as Pieces, on the host path: `size` C-contiguous arrays of one dtype
    and size, as long as out and none overlapping it; ValueError or TypeError saying which is
    not."""
    if len(xs) != size:
        raise ValueError(f"dpcore: scatter's x as a list holds one array per rank ({size}), "
                         f"not {len(xs)}")
    views = []
    for q, x in enumerate(xs):
        v = path.out_view(x, f"x[{q}]")
        path.check(v, f"x[{q}]")
        if path.overlap(v, out) is not None:
            raise ValueError(f"dpcore: scatter's out overlaps x[{q}]; pass a buffer of its own")
        views.append(v)
    first = views[0]
    if any(v.dtype != first.dtype or v.size != first.size for v in views):
        raise ValueError(f"dpcore: scatter's x as a list holds arrays of one dtype and size (x[q] "
                         f"for rank q), not {[f'{v.size} x {v.dtype}' for v in views]}; pass "
                         f"one array, read flat, for shards of different lengths")
    if out.size != first.size:  # the peers' outs: checked by every rank in the call's headers
        raise ValueError(f"dpcore: scatter's out holds {out.size} elements, but each piece of "
                         f"x has {first.size}")
    return Pieces(views, np.array([v.ctypes.data for v in views], np.uint64))
