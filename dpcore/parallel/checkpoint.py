"""Sharded checkpoints: every rank writes what it owns; any world size and stage can load them.

A checkpoint is a directory:

    path/latest               the name of the committed version, e.g. "v-5f0c..."
    path/v-5f0c.../meta.json  layout: parameter names, shapes and flat ranges; world size,
                              stage, the optimizer's class and scalar state (Adam's step);
                              the caller's extra (dpcore.train's epoch); the manifest:
                              every file's sha256 (manifest.py)
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

All or nothing, on every rank: a load checks everything (manifest.py: the files' checksums, each
rank verifying its share of them, types, lengths, finite values, the layout and the optimizer)
before it changes anything, and each step of a save ends with the ranks agreeing (_agree) that
it worked. A failure on any rank becomes the same ValueError on every rank, none left waiting in
a collective, and a failed load leaves the parameters and the optimizer as they were.
"""
import json
import os
import secrets
import shutil
from collections import OrderedDict
from typing import Any, Dict

import numpy as np

from . import manifest
from .manifest import FORMAT

MESSAGE_BYTES = 1024  # of the first failing rank's error, sent to the others


# -- save ------------------------------------------------------------------------------------------

def save(engine, path, extra=None):
    """Called on every rank, between steps; `extra` (a JSON dict) goes into meta.json."""
    comm = engine.comm
    token = _shared_token(comm)
    tmp = os.path.join(path, f".tmp-{token}")
    failed = f"checkpoint save to {path} failed"
    first = comm.rank == 0
    # the directory exists before anyone writes into it
    _agree(comm, failed, lambda: _prepare(path, tmp) if first else None)
    try:
        writer = comm.rank in engine.checkpoint_writers()
        _agree(comm, failed, lambda: _write_rank(engine, tmp, comm.rank) if writer else None)
        # every rank's files are written and synced; nobody returns before the commit
        _agree(comm, failed,
               lambda: _commit(path, tmp, f"v-{token}", _meta(engine, tmp, extra or {}))
               if first else None)
    except ValueError:
        if first:
            shutil.rmtree(tmp, ignore_errors=True)
        raise


def _agree(comm, what, work):
    """work() on this rank, then every rank learns whether it failed on any rank; if so, all
    raise the same ValueError: `what`, the first rank that failed, and its error."""
    error, result = None, None
    try:
        result = work()
    except Exception as e:  # anything: a rank that raised alone would leave the others waiting
        error = e
    failed = np.zeros(comm.size, np.int32)
    failed[comm.rank] = error is not None
    failed = comm.all_reduce(failed, op="max")
    if not failed.any():
        return result
    first = int(np.flatnonzero(failed)[0])
    message = np.zeros(MESSAGE_BYTES, np.uint8)
    if comm.rank == first:
        text = str(error) if isinstance(error, ValueError) else f"{type(error).__name__}: {error}"
        encoded = text.encode()[:MESSAGE_BYTES]
        message[:len(encoded)] = np.frombuffer(encoded, np.uint8)
    comm.broadcast(message, root=first)
    text = message.tobytes().rstrip(b"\0").decode(errors="replace")
    raise ValueError(f"{what}: rank {first}: {text}") from error


def _shared_token(comm):
    """A fresh name, rank 0's, known to every rank."""
    token = np.frombuffer(secrets.token_bytes(8), np.uint8).copy()
    comm.broadcast(token, root=0)
    return token.tobytes().hex()


def _prepare(path, tmp):
    """Rank 0: the directory for this save, after checking that the names a commit replaces or
    removes are no symbolic links (removing one would follow it out of `path`)."""
    os.makedirs(path, exist_ok=True)
    for name in os.listdir(path):
        full = os.path.join(path, name)
        if _superseded(name) and os.path.islink(full):
            raise ValueError(f"{full} is a symbolic link: a checkpoint directory holds only the "
                             "versions dpcore wrote there; remove it")
    os.mkdir(tmp)


def _superseded(name):
    """What a commit removes: older versions and what crashed saves left behind."""
    return name.startswith(("v-", ".tmp-", "latest.tmp-"))


def _write_rank(engine, directory, rank):
    """This rank's arrays, then its rank file listing their checksums."""
    arrays = _piece_arrays(engine)
    files = {}
    for key, pieces in sorted(arrays.items()):
        name = f"rank{rank}.{key}.npy"
        files[name] = _write_array(os.path.join(directory, name), _concat(pieces))
    _write_json(os.path.join(directory, f"rank{rank}.json"),
                {"ranges": [list(r) for r in engine.owned], "arrays": sorted(arrays),
                 "files": files})


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


def _meta(engine, directory, extra):
    """meta.json: the layout, the optimizer, the caller's extra, the manifest of every writer's
    files (read from their rank files in `directory`), and its own checksum."""
    opt = engine.optimizer
    meta = {"format": FORMAT, "world_size": engine.comm.size, "zero_stage": engine.zero_stage,
            "count": engine.flat.count, "dtype": np.dtype(engine.flat.dtype).name,
            "params": _layout(engine), "writers": engine.checkpoint_writers(),
            "loss_scale": engine.mixed.scale if engine.mixed is not None else None,
            "optimizer": {"class": type(opt).__name__, "scalars": _scalars(opt),
                          "arrays": _array_keys(opt)}, "extra": extra}
    meta["files"] = {}
    for rank in meta["writers"]:
        name = f"rank{rank}.json"
        meta["files"][name] = manifest.file_digest(os.path.join(directory, name))
        with open(os.path.join(directory, name)) as f:
            meta["files"].update(json.load(f)["files"])
    meta["checksum"] = manifest.digest(meta)
    return meta


def _layout(engine):
    """[name, shape, start, stop] of each parameter in the flat buffer."""
    names = {id(p): name for name, p in engine.module.named_parameters()}
    return [[names[id(p)], list(p.data.shape), *engine.flat.range(i)]
            for i, p in enumerate(engine.flat.params)]


def _write_array(filename, array):
    """Write and sync a .npy file; returns its sha256."""
    with open(filename, "wb") as f:
        hashing = manifest.HashingFile(f)
        np.save(hashing, array)
        f.flush()
        os.fsync(f.fileno())
    return hashing.sha.hexdigest()


def _write_json(filename, obj):
    with open(filename, "w") as f:
        json.dump(obj, f)
        f.flush()
        os.fsync(f.fileno())


def _commit(path, tmp, version, meta):
    _write_json(os.path.join(tmp, "meta.json"), meta)
    os.rename(tmp, os.path.join(path, version))
    pointer = os.path.join(path, f"latest.tmp-{version}")
    with open(pointer, "w") as f:
        f.write(version)
        f.flush()
        os.fsync(f.fileno())
    os.replace(pointer, os.path.join(path, "latest"))  # the commit: one atomic rename
    _fsync_dir(path)
    for name in os.listdir(path):
        if name != version and _superseded(name):
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
    """The committed version under `path`, read by flat range. Opening it checks everything but
    the arrays' contents (manifest.py); verify() checks those."""

    def __init__(self, path):
        self.dir = manifest.version_dir(path)
        meta_file = manifest.plain_file(os.path.join(self.dir, "meta.json"))
        self.meta = _read_json(meta_file)
        manifest.check_meta(self.meta, meta_file)
        files, arrays = self.meta["files"], self.meta["optimizer"]["arrays"]
        self._pieces = []  # (start, stop, rank, offset in that rank's files)
        for rank in self.meta["writers"]:
            rank_file = self._path(f"rank{rank}.json")
            manifest.verify(rank_file, files[f"rank{rank}.json"])
            offset = 0
            for start, stop in manifest.check_rank_file(_read_json(rank_file), rank_file,
                                                        self.meta["count"], arrays):
                self._pieces.append((start, stop, rank, offset))
                offset += stop - start
            for name in manifest.writer_files(rank, arrays)[1:]:
                manifest.check_npy(self._path(name), offset)
        manifest.check_cover(self._pieces, self.meta["count"], self.dir)
        self._files = {}

    def _path(self, name):
        return os.path.join(self.dir, name)

    def arrays(self):
        """The names of the .npy files, in a fixed order."""
        return sorted(name for name in self.meta["files"] if name.endswith(".npy"))

    def verify(self, names):
        """The checksums and finite values of these files (reads each whole)."""
        for name in names:
            manifest.verify(self._path(name), self.meta["files"][name])

    def _file(self, rank, key):
        if (rank, key) not in self._files:
            self._files[rank, key] = np.load(self._path(f"rank{rank}.{key}.npy"), mmap_mode="r")
        return self._files[rank, key]

    def read(self, key, start, stop):
        """Elements [start, stop) of the flat `key` ("params" or an optimizer array)."""
        out = None
        for p_start, p_stop, rank, offset in self._pieces:
            lo, hi = max(start, p_start), min(stop, p_stop)
            if lo < hi:
                src = self._file(rank, key)
                if out is None:
                    out = np.empty(stop - start, src.dtype)
                out[lo - start:hi - start] = src[offset + lo - p_start:offset + hi - p_start]
        return out if out is not None else np.empty(0)


def _read_json(filename):
    try:
        with open(filename, "rb") as f:
            return json.loads(f.read())
    except ValueError as e:  # also a UnicodeDecodeError
        raise ValueError(f"{filename} is not JSON ({e})") from None


# -- load ------------------------------------------------------------------------------------------

def load(engine, path):
    """Called on every rank, between steps: parameters and optimizer state from `path`, or, if
    anything is wrong with it on any rank, the same ValueError on every rank and nothing changed.
    Returns the extra it was saved with."""
    comm = engine.comm
    ck = _agree(comm, f"checkpoint {path} not loaded (nothing changed)",
                lambda: _checked(engine, path, comm.rank, comm.size))
    xp = engine.flat.xp

    def read(key, dtype):
        return lambda start, stop: xp.asarray(ck.read(key, start, stop).astype(dtype))
    engine.load_params(read("params", engine.flat.dtype))
    opt, meta = engine.optimizer, ck.meta["optimizer"]
    for (start, stop), tensor in zip(engine.owned, opt.params):  # master weights, if any
        tensor.data[...] = read("params", tensor.data.dtype)(start, stop)
    if engine.mixed is not None and engine.mixed.dynamic and ck.meta["loss_scale"]:
        engine.mixed.scale = ck.meta["loss_scale"]
    for (start, stop), tensor, state in zip(engine.owned, opt.params, opt.state):
        state.clear()
        state.update(meta["scalars"])
        for key in meta["arrays"]:
            state[key] = read(key, tensor.data.dtype)(start, stop).reshape(tensor.data.shape)
    engine.zero_grad()
    return ck.meta.get("extra", {})


def _checked(engine, path, rank, size):
    """The checkpoint, once this rank has checked all of it that fits the engine and its share
    of the arrays' contents (rank r verifies every size-th file from the r-th)."""
    ck = Checkpoint(path)
    ck.verify(ck.arrays()[rank::size])
    _check_layout(engine, ck.meta)
    saved, mine = ck.meta["optimizer"]["class"], type(engine.optimizer).__name__
    if saved != mine:
        raise ValueError(f"the checkpoint's optimizer is {saved}, the engine's {mine}")
    return ck


def _check_layout(engine, meta):
    mine = _layout(engine)
    if mine != meta["params"]:
        theirs = {name for name, *_ in meta["params"]}
        raise ValueError("checkpoint parameters differ from the model's: only in the model "
                         f"{sorted({n for n, *_ in mine} - theirs)}, only in the checkpoint "
                         f"{sorted(theirs - {n for n, *_ in mine})}, or shapes/order differ")


def consolidate(path: str) -> Dict[str, Any]:
    """One full state dict from a sharded checkpoint, no communicator needed:
    {"model": {name: array}, "optimizer": {scalar: value, array key: {name: array}}}."""
    ck = Checkpoint(path)
    ck.verify(ck.arrays())
    meta = ck.meta

    def by_name(key):
        flat = ck.read(key, 0, meta["count"])
        return OrderedDict((name, flat[start:stop].reshape(shape).copy())
                           for name, shape, start, stop in meta["params"])
    optimizer = dict(meta["optimizer"]["scalars"])
    for key in meta["optimizer"]["arrays"]:
        optimizer[key] = by_name(key)
    return {"model": by_name("params"), "optimizer": optimizer}
