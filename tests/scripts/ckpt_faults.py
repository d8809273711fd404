"""Checkpoints that must not load, and saves that fail on one rank:
`mpiexec -n K python -m mpi4py ckpt_faults.py CASE DIR STAGE`.

Every rank trains 2 steps of AdamW at STAGE on zero_ckpt.py's data, saves DIR/ckpt, and trains
one step more, so that its state differs from the checkpoint's. Then rank 0 damages the
checkpoint as CASE says (the files of the last writer, whose ranges rank 0 never owns at stages
1-3) and every rank loads it, or, for the save_* cases, saves again into a damaged place. Each
rank prints

  rank R: raised TYPE: MESSAGE   or  rank R: no error
  rank R: state unchanged        or  rank R: state changed: WHAT
  rank R: ok                     after one more training step: no rank was left in a collective

CASE (load):
  zero_byte         the last writer's exp_avg.npy emptied to 0 bytes
  zero_byte_sealed  the same, and the manifest's checksums rewritten to match (sealed)
  string_step       meta.json's optimizer step "2" instead of 2, sealed
  other_optimizer   nothing damaged: the engine that loads runs SGD with momentum
  flipped_bit       one bit flipped in the middle of the last writer's params.npy
  nan_params        one parameter NaN, sealed
  long_array        exp_avg_sq.npy one element longer than its ranges, sealed
  latest_absolute   `latest` holds the absolute path of a whole copy outside DIR/ckpt
  latest_parent     `latest` holds ../elsewhere/v-..., the same copy
  latest_symlink    `latest` names v-link, a symbolic link to that copy
CASE (save):
  save_planted_link DIR/ckpt/v-planted is a symbolic link to a directory outside
  save_fails        the last writer's disk fills (OSError) after its first file
"""
import json
import os
import shutil
import sys

import numpy as np

import dpcore
import dpcore.optim as optim
from dpcore.parallel import DataParallel, checkpoint, manifest
from checks import say
from ddp_equiv import make
from zero_ckpt import train


def engine_for(comm, stage, optimizer=optim.AdamW, **kwargs):
    return DataParallel(make(np.float64, seed=comm.rank), comm, zero_stage=stage,
                        optimizer=optimizer, lr=0.01, bucket_cap_mb=0.002, **kwargs)


def snapshot(engine):
    """Copies of everything a load may change: the parameters this rank holds, the optimizer's
    tensors (master weights, if any) and its state."""
    store = engine.param_store
    held = store.param_shard if hasattr(store, "param_shard") else engine.flat.data
    opt = engine.optimizer
    return {"params": held.copy(), "tensors": [t.data.copy() for t in opt.params],
            "state": [{k: (v.copy() if hasattr(v, "copy") else v) for k, v in s.items()}
                      for s in opt.state]}


def differences(before, after):
    found = []
    if not np.array_equal(before["params"], after["params"]):
        found.append("parameters")
    if not all(np.array_equal(a, b) for a, b in zip(before["tensors"], after["tensors"])):
        found.append("optimizer tensors")
    for a, b in zip(before["state"], after["state"]):
        if a.keys() != b.keys() or any(type(a[k]) is not type(b[k]) or
                                       not np.array_equal(a[k], b[k]) for k in a):
            found.append("optimizer state")
            break
    return found


# -- damage (rank 0 alone, between barriers) -------------------------------------------------------

def version_dir(ck):
    with open(os.path.join(ck, "latest")) as f:
        return os.path.join(ck, f.read().strip())


def reseal(vdir):
    """Rewrite the manifest's checksums to match the files as they are now, so that only the
    checks of the contents themselves can catch the damage."""
    meta_file = os.path.join(vdir, "meta.json")
    with open(meta_file) as f:
        meta = json.load(f)
    for name in meta.get("files", {}):
        meta["files"][name] = manifest.file_digest(os.path.join(vdir, name))
    if "checksum" in meta:
        meta["checksum"] = manifest.digest({k: v for k, v in meta.items() if k != "checksum"})
    with open(meta_file, "w") as f:
        json.dump(meta, f)


def edit_meta(vdir, change):
    meta_file = os.path.join(vdir, "meta.json")
    with open(meta_file) as f:
        meta = json.load(f)
    change(meta)
    with open(meta_file, "w") as f:
        json.dump(meta, f)


def outside_copy(directory, vdir):
    """A whole copy of the version, outside the checkpoint's directory."""
    copy = os.path.join(directory, "elsewhere", os.path.basename(vdir))
    shutil.copytree(vdir, copy)
    return copy


def damage(case, directory, writer):
    ck = os.path.join(directory, "ckpt")
    vdir = version_dir(ck)
    mine = lambda key: os.path.join(vdir, f"rank{writer}.{key}.npy")  # noqa: E731
    if case.startswith("zero_byte"):
        open(mine("exp_avg"), "wb").close()
    elif case == "string_step":
        edit_meta(vdir, lambda m: m["optimizer"]["scalars"].update(step="2"))
    elif case == "flipped_bit":
        with open(mine("params"), "r+b") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(size - 20)
            byte = f.read(1)[0]
            f.seek(size - 20)
            f.write(bytes([byte ^ 0x10]))
    elif case == "nan_params":
        a = np.load(mine("params"))
        a[len(a) // 2] = np.nan
        np.save(mine("params"), a)
    elif case == "long_array":
        a = np.load(mine("exp_avg_sq"))
        np.save(mine("exp_avg_sq"), np.append(a, a[-1]))
    elif case == "latest_absolute":
        write_latest(ck, os.path.abspath(outside_copy(directory, vdir)))
    elif case == "latest_parent":
        write_latest(ck, os.path.join("..", "elsewhere", os.path.basename(
            outside_copy(directory, vdir))))
    elif case == "latest_symlink":
        os.symlink(outside_copy(directory, vdir), os.path.join(ck, "v-1234"))
        write_latest(ck, "v-1234")
    elif case == "save_planted_link":
        os.makedirs(os.path.join(directory, "elsewhere"))
        os.symlink(os.path.join(directory, "elsewhere"), os.path.join(ck, "v-planted"))
    if case.endswith("_sealed") or case in ("string_step", "nan_params", "long_array"):
        reseal(vdir)


def write_latest(ck, name):
    with open(os.path.join(ck, "latest"), "w") as f:
        f.write(name)


# -- the run ---------------------------------------------------------------------------------------

def fill_disk_after_one_file():
    write, written = checkpoint._write_array, []

    def write_then_fail(filename, array):
        if written:
            raise OSError(28, "No space left on device", filename)
        written.append(filename)
        return write(filename, array)
    checkpoint._write_array = write_then_fail


def main():
    case, directory, stage = sys.argv[1], sys.argv[2], int(sys.argv[3])
    comm = dpcore.init()
    ck = os.path.join(directory, "ckpt")
    engine = engine_for(comm, stage)
    train(engine, comm, 0, 2)
    engine.save(ck)
    train(engine, comm, 2, 3)
    writer = max(engine.checkpoint_writers())
    comm.barrier()
    if comm.rank == 0:
        damage(case, directory, writer)
    comm.barrier()
    if case == "other_optimizer":
        engine = engine_for(comm, stage, optim.SGD, momentum=0.9)
        train(engine, comm, 0, 1)
    if case == "save_fails" and comm.rank == writer:
        fill_disk_after_one_file()
    before = snapshot(engine)
    try:
        engine.save(ck) if case.startswith("save_") else engine.load(ck)
        say(comm.rank, "no error")
    except Exception as e:
        say(comm.rank, f"raised {type(e).__name__}: {e}".replace("\n", " "))
    changed = differences(before, snapshot(engine))
    say(comm.rank, f"state changed: {', '.join(changed)}" if changed else "state unchanged")
    train(engine, comm, 3, 4)
    say(comm.rank, "ok")
    comm.close()


if __name__ == "__main__":
    sys.exit(main())
