"""Sharded checkpoints: every rank writes what it owns; any world size and stage can load them.

A checkpoint is a directory:

    path/latest               the name of the committed version, e.g. "v-5f0c..."
    path/v-5f0c.../meta.json  layout: parameter names, shapes and flat ranges; world size,
                              stage, the optimizer's class and scalar state (Adam's step)
    path/v-5f0c.../rank1.json       the flat ranges rank 1 wrote, in file order
    path/v-5f0c.../rank1.params.npy its parameters there (master weights, if any), then one
    path/v-5f0c.../rank1.exp_avg.npy  file per optimizer array (Adam's moments), same ranges

Everything is addressed in flat coordinates (flat.py), never by rank: a loader at another world
size or stage asks for the ranges it owns now and reads them from whichever files hold them
(memory-mapped, so a rank reads only its part). Stage 0 ranks all hold everything, so rank 0
alone writes it.

Atomic: a save writes into path/.tmp-TOKEN, and only when every rank has written and synced
its files does rank 0 rename that to path/v-TOKEN and then replace path/latest, in one
os.replace, with the new name. A crash at any point before leaves `latest` naming the old
version, whole; a crash after leaves a stale directory that the next save removes.
"""
import json
import os
import secrets
import shutil
from collections import OrderedDict

import numpy as np

FORMAT = "dpcore-zero-checkpoint/1"


# -- save ------------------------------------------------------------------------------------------

def save(engine, path):
    """Called on every rank, between steps."""
    comm = engine.comm
    token = _shared_token(comm)
    tmp = os.path.join(path, f".tmp-{token}")
    if comm.rank == 0:
        os.makedirs(tmp)
    comm.barrier()  # the directory exists before anyone writes into it
    if comm.rank in engine._checkpoint_writers():
        _write_rank(engine, tmp, comm.rank)
    comm.barrier()  # every rank's files are written and synced
    if comm.rank == 0:
        _write_json(os.path.join(tmp, "meta.json"), _meta(engine))
        _commit(path, tmp, f"v-{token}")
    comm.barrier()  # nobody returns before the new checkpoint is the latest


def _shared_token(comm):
    """A fresh name, rank 0's, known to every rank."""
    token = np.frombuffer(secrets.token_bytes(8), np.uint8).copy()
    comm.broadcast(token, root=0)
    return token.tobytes().hex()


def _write_rank(engine, directory, rank):
    arrays = _piece_arrays(engine)
    _write_json(os.path.join(directory, f"rank{rank}.json"),
                {"ranges": [list(r) for r in engine.owned], "arrays": sorted(arrays)})
    for key, pieces in sorted(arrays.items()):
        _write_array(os.path.join(directory, f"rank{rank}.{key}.npy"), _concat(pieces))


def _piece_arrays(engine):
    """{"params": [piece per owned range], "exp_avg": [...], ...}: the optimizer's tensors and
    its per-element state (arrays as long as the tensor), in the order of engine.owned."""
    opt = engine.optimizer
    arrays = {"params": [t.data for t in opt.params]}
    for key in _array_keys(opt):
        arrays[key] = [state[key] for state in opt.state]
    return arrays


def _array_keys(opt):
    state = opt.state[0]
    return sorted(k for k, v in state.items()
                  if hasattr(v, "shape") and v.shape == opt.params[0].data.shape)


def _scalars(opt):
    state = opt.state[0]
    arrays = set(_array_keys(opt))
    return {k: (v.item() if hasattr(v, "item") else v) for k, v in state.items()
            if k not in arrays}


def _concat(pieces):
    return np.concatenate([_host(p).ravel() for p in pieces]) if pieces else np.empty(0)


def _host(a):
    return a.get() if hasattr(a, "get") else np.asarray(a)  # CuPy arrays come to the host


def _meta(engine):
    names = {id(p): name for name, p in engine.module.named_parameters()}
    params = [[names[id(p)], list(p.data.shape), *engine.flat.range(i)]
              for i, p in enumerate(engine.flat.params)]
    opt = engine.optimizer
    return {"format": FORMAT, "world_size": engine.comm.size, "zero_stage": engine.zero_stage,
            "count": engine.flat.count, "dtype": np.dtype(engine.flat.dtype).name,
            "params": params, "writers": engine._checkpoint_writers(),
            "loss_scale": engine.mixed.scale if engine.mixed is not None else None,
            "optimizer": {"class": type(opt).__name__, "scalars": _scalars(opt),
                          "arrays": _array_keys(opt)}}


def _write_array(filename, array):
    with open(filename, "wb") as f:
        np.save(f, array)
        f.flush()
        os.fsync(f.fileno())


def _write_json(filename, obj):
    with open(filename, "w") as f:
        json.dump(obj, f)
        f.flush()
        os.fsync(f.fileno())


def _commit(path, tmp, version):
    os.rename(tmp, os.path.join(path, version))
    pointer = os.path.join(path, f"latest.tmp-{version}")
    with open(pointer, "w") as f:
        f.write(version)
        f.flush()
        os.fsync(f.fileno())
    os.replace(pointer, os.path.join(path, "latest"))  # the commit: one atomic rename
    _fsync_dir(path)
    for name in os.listdir(path):  # older versions and what crashed saves left behind
        if name != version and (name.startswith("v-") or name.startswith(".tmp-")
                                or name.startswith("latest.tmp-")):
            full = os.path.join(path, name)
            shutil.rmtree(full) if os.path.isdir(full) else os.remove(full)


def _fsync_dir(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- read ------------------------------------------------------------------------------------------

class Checkpoint:
    """The committed version under `path`, read by flat range."""

    def __init__(self, path):
        with open(os.path.join(path, "latest")) as f:
            self.dir = os.path.join(path, f.read().strip())
        with open(os.path.join(self.dir, "meta.json")) as f:
            self.meta = json.load(f)
        if self.meta.get("format") != FORMAT:
            raise ValueError(f"{path}: not a {FORMAT} checkpoint")
        self._pieces = []  # (start, stop, rank, offset in that rank's files)
        for rank in self.meta["writers"]:
            with open(os.path.join(self.dir, f"rank{rank}.json")) as f:
                offset = 0
                for start, stop in json.load(f)["ranges"]:
                    self._pieces.append((start, stop, rank, offset))
                    offset += stop - start
        self._files = {}

    def _file(self, rank, key):
        if (rank, key) not in self._files:
            self._files[rank, key] = np.load(os.path.join(self.dir, f"rank{rank}.{key}.npy"),
                                             mmap_mode="r")
        return self._files[rank, key]

    def read(self, key, start, stop):
        """Elements [start, stop) of the flat `key` ("params" or an optimizer array)."""
        out, covered = None, 0
        for p_start, p_stop, rank, offset in self._pieces:
            lo, hi = max(start, p_start), min(stop, p_stop)
            if lo < hi:
                src = self._file(rank, key)
                if out is None:
                    out = np.empty(stop - start, src.dtype)
                out[lo - start:hi - start] = src[offset + lo - p_start:offset + hi - p_start]
                covered += hi - lo
        if covered != stop - start:
            raise ValueError(f"checkpoint {self.dir}: {key}[{start}:{stop}] is not all there "
                             f"({covered} of {stop - start} elements)")
        return out if out is not None else np.empty(0, self.meta["dtype"])


# -- load ------------------------------------------------------------------------------------------

def load(engine, path):
    """Called on every rank, between steps: parameters and optimizer state from `path`."""
    ck = Checkpoint(path)
    _check_layout(engine, ck.meta)
    xp = engine.flat.xp

    def read(key, dtype):
        return lambda start, stop: xp.asarray(ck.read(key, start, stop).astype(dtype))
    engine._load_params(read("params", engine.flat.dtype))
    opt, meta = engine.optimizer, ck.meta["optimizer"]
    for (start, stop), tensor in zip(engine.owned, opt.params):  # master weights, if any
        tensor.data[...] = read("params", tensor.data.dtype)(start, stop)
    if engine.mixed is not None and engine.mixed.dynamic and ck.meta.get("loss_scale"):
        engine.mixed.scale = ck.meta["loss_scale"]
    if meta["class"] != type(opt).__name__:
        raise ValueError(f"checkpoint optimizer {meta['class']}, engine {type(opt).__name__}")
    for (start, stop), tensor, state in zip(engine.owned, opt.params, opt.state):
        state.clear()
        state.update(meta["scalars"])
        for key in meta["arrays"]:
            state[key] = read(key, tensor.data.dtype)(start, stop).reshape(tensor.data.shape)
    engine.zero_grad()


def _check_layout(engine, meta):
    names = {id(p): name for name, p in engine.module.named_parameters()}
    mine = [[names[id(p)], list(p.data.shape), *engine.flat.range(i)]
            for i, p in enumerate(engine.flat.params)]
    if mine != meta["params"]:
        theirs = {name for name, *_ in meta["params"]}
        raise ValueError("checkpoint parameters differ from the model's: only in the model "
                         f"{sorted({n for n, *_ in mine} - theirs)}, only in the checkpoint "
                         f"{sorted(theirs - {n for n, *_ in mine})}, or shapes/order differ")


def consolidate(path):
    """One full state dict from a sharded checkpoint, no communicator needed:
    {"model": {name: array}, "optimizer": {scalar: value, array key: {name: array}}}."""
    ck = Checkpoint(path)
    meta = ck.meta

    def by_name(key):
        flat = ck.read(key, 0, meta["count"])
        return OrderedDict((name, flat[start:stop].reshape(shape).copy())
                           for name, shape, start, stop in meta["params"])
    optimizer = dict(meta["optimizer"]["scalars"])
    for key in meta["optimizer"]["arrays"]:
        optimizer[key] = by_name(key)
    return {"model": by_name("params"), "optimizer": optimizer}
