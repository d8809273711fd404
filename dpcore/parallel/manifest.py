"""What a committed checkpoint version must look like, checked before anything is loaded from it.

The manifest is meta.json's "files": the sha256 of every file the save wrote (each writer hashes
its arrays as it writes them and lists them in its rank file; rank 0 hashes the rank files and
writes meta.json last). meta.json carries the sha256 of its own other fields as "checksum". A
reader therefore trusts nothing it has not checked:

  latest      a plain file naming a plain directory v-<hex> inside the checkpoint's directory
              (no symbolic link, no absolute path, no ..)
  meta.json   its checksum, then the type of every field (step an int, shapes lists of ints, ...)
  rank files  their checksums, ranges inside the buffer that together cover it exactly once
  .npy files  plain files whose header says one float dimension as long as the writer's ranges
              and whose size matches it; then (verify) their checksums and finite values

Every failure is a ValueError that names the file and what is wrong with it.
"""
import hashlib
import json
import math
import os
import re
import stat

import numpy as np

FORMAT = "dpcore-zero-checkpoint/2"
VERSION = re.compile(r"v-[0-9a-f]+")
KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SHA256 = re.compile(r"[0-9a-f]{64}")


def digest(obj):
    """sha256 of a JSON document, independent of key order."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def file_digest(filename):
    sha = hashlib.sha256()
    with open(filename, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


class HashingFile:
    """A binary file that hashes what is written through it (np.save writes through it)."""

    def __init__(self, f):
        self.f, self.sha = f, hashlib.sha256()

    def write(self, data):
        self.sha.update(data)
        return self.f.write(data)


def plain_file(filename):
    """`filename` if it is a regular file and no symbolic link."""
    try:
        mode = os.lstat(filename).st_mode
    except FileNotFoundError:
        raise ValueError(f"{filename} is missing") from None
    if not stat.S_ISREG(mode):
        what = "a symbolic link" if stat.S_ISLNK(mode) else "not a plain file"
        raise ValueError(f"{filename} is {what}")
    return filename


def version_dir(path):
    """The directory that path/latest names: a plain v-<hex> directory inside `path`."""
    latest = plain_file(os.path.join(path, "latest"))
    with open(latest, "rb") as f:
        name = f.read(256).decode(errors="replace").strip()
    if not VERSION.fullmatch(name):
        raise ValueError(f"{latest} names {name!r}, not a version directory v-<hex> inside {path}")
    full = os.path.join(path, name)
    if os.path.islink(full) or not os.path.isdir(full):
        raise ValueError(f"{latest} names {name}, which is "
                         f"{'a symbolic link' if os.path.islink(full) else 'not a directory'} "
                         f"(a version is a plain directory inside {path})")
    return full


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def check_meta(meta, where):
    """meta.json's checksum, then the type of each field the loader uses."""
    def need(ok, what):
        if not ok:
            raise ValueError(f"{where}: {what}")
    need(isinstance(meta, dict) and meta.get("format") == FORMAT, f"not a {FORMAT} checkpoint")
    need(meta.get("checksum") == digest({k: v for k, v in meta.items() if k != "checksum"}),
         "checksum differs from its contents (damaged or changed since the save)")
    size, count = meta.get("world_size"), meta.get("count")
    need(_is_int(size) and size >= 1, f"world_size {size!r} is not a positive int")
    need(meta.get("zero_stage") in (0, 1, 2, 3) and _is_int(meta["zero_stage"]),
         f"zero_stage {meta.get('zero_stage')!r} is not 0, 1, 2 or 3")
    need(_is_int(count) and count >= 0, f"count {count!r} is not an int >= 0")
    need(isinstance(meta.get("dtype"), str), f"dtype {meta.get('dtype')!r} is not a name")
    for p in _list(meta, "params", need):
        need(isinstance(p, list) and len(p) == 4 and isinstance(p[0], str)
             and isinstance(p[1], list) and all(_is_int(d) and d >= 0 for d in p[1])
             and _is_int(p[2]) and _is_int(p[3]) and 0 <= p[2] <= p[3] <= count
             and p[3] - p[2] == math.prod(p[1]),
             f"parameter {p!r} is not [name, shape, start, stop] inside the buffer")
    writers = _list(meta, "writers", need)
    need(writers and all(_is_int(r) and 0 <= r < size for r in writers)
         and len(set(writers)) == len(writers), f"writers {writers!r} are not distinct ranks")
    scale = meta.get("loss_scale")
    need(scale is None or (_is_number(scale) and scale > 0),
         f"loss_scale {scale!r} is not a positive number")
    opt = meta.get("optimizer")
    need(isinstance(opt, dict) and isinstance(opt.get("class"), str)
         and isinstance(opt.get("scalars"), dict), "optimizer is not {class, scalars, arrays}")
    step = opt["scalars"].get("step", 0)
    need(_is_int(step) and step >= 0, f"optimizer step is {step!r}, not an int >= 0")
    for key, value in opt["scalars"].items():
        need(_is_number(value), f"optimizer scalar {key} is {value!r}, not a finite number")
    arrays = _list(opt, "arrays", need)
    need(all(isinstance(k, str) and KEY.fullmatch(k) and k != "params" for k in arrays),
         f"optimizer arrays {arrays!r} are not names")
    need(isinstance(meta.get("extra", {}), dict), f"extra {meta.get('extra')!r} is not a dict")
    files = meta.get("files")
    need(isinstance(files, dict) and all(isinstance(v, str) and SHA256.fullmatch(v)
                                         for v in files.values()), "files is not {name: sha256}")
    expected = {name for r in writers for name in writer_files(r, arrays)}
    need(set(files) == expected, f"files lists {sorted(set(files) - expected)} beyond and lacks "
                                 f"{sorted(expected - set(files))} of what its writers wrote")


def _list(doc, key, need):
    need(isinstance(doc.get(key), list), f"{key} is not a list")
    return doc[key]


def writer_files(rank, arrays):
    """The files writer `rank` writes: its rank file, then one .npy per key."""
    return [f"rank{rank}.json"] + [f"rank{rank}.{key}.npy" for key in ["params", *arrays]]


def check_rank_file(doc, where, count, arrays):
    """A writer's rank file: its ranges (inside the buffer) and the arrays it wrote."""
    ranges = doc.get("ranges") if isinstance(doc, dict) else None
    if not (isinstance(ranges, list) and all(
            isinstance(r, list) and len(r) == 2 and all(_is_int(x) for x in r)
            and 0 <= r[0] <= r[1] <= count for r in ranges)):
        raise ValueError(f"{where}: ranges {ranges!r} are not [start, stop] pairs inside the "
                         f"buffer of {count} elements")
    if doc.get("arrays") != sorted(["params", *arrays]):
        raise ValueError(f"{where}: arrays {doc.get('arrays')!r}, meta.json says "
                         f"{sorted(['params', *arrays])}")
    return ranges


def check_cover(pieces, count, where):
    """pieces (start, stop, ...) from every writer cover [0, count) exactly once."""
    at = 0
    for start, stop, *_ in sorted(p for p in pieces if p[0] < p[1]):
        if start != at:
            what = "overlap" if start < at else "leave a gap"
            raise ValueError(f"{where}: the writers' ranges {what} at element {min(start, at)}")
        at = stop
    if at != count:
        raise ValueError(f"{where}: the writers' ranges end at {at}, not at {count}")


def check_npy(filename, length):
    """A plain .npy file holding one float dimension of `length` elements, nothing more."""
    plain_file(filename)
    try:
        with open(filename, "rb") as f:
            version = np.lib.format.read_magic(f)
            read = {(1, 0): np.lib.format.read_array_header_1_0,
                    (2, 0): np.lib.format.read_array_header_2_0}[version]
            shape, _, dtype = read(f)
            data_at = f.tell()
    except Exception as e:  # an empty, truncated or foreign file: what NumPy said
        raise ValueError(f"{filename} is not a .npy array ({type(e).__name__}: {e})") from None
    if dtype.kind != "f" or len(shape) != 1:
        raise ValueError(f"{filename} holds {dtype} of shape {shape}, not one float dimension")
    if shape[0] != length:
        raise ValueError(f"{filename} holds {shape[0]} elements, its writer's ranges "
                         f"{length}")
    if os.path.getsize(filename) != data_at + length * dtype.itemsize:
        raise ValueError(f"{filename} is {os.path.getsize(filename)} bytes, its header says "
                         f"{data_at + length * dtype.itemsize}")


def verify(filename, sha256):
    """The file's checksum; for an array also that every value is finite (reads it whole)."""
    if file_digest(plain_file(filename)) != sha256:
        raise ValueError(f"{filename}: checksum differs from the manifest's (damaged or changed "
                         "since the save)")
    if filename.endswith(".npy"):
        a = np.load(filename, mmap_mode="r")
        for i in range(0, a.size, 1 << 20):
            if not np.isfinite(a[i:i + (1 << 20)]).all():
                raise ValueError(f"{filename} holds values that are not finite (NaN or inf)")
