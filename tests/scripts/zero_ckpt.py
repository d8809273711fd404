"""Sharded checkpoints under `mpiexec -n K python -m mpi4py zero_ckpt.py MODE DIR STAGE ...`.

Training is 6 steps of AdamW in float64 on the global batches x[12 s : 12 s + 12], each rank
taking its slice, so any K trains the same model up to rounding.

  resume DIR STAGE S [SAVE_AT OUT]  load DIR/ckpt (saved after step S, at another K or stage),
                           train to step 6, compare with DIR/uninterrupted.npz; with SAVE_AT,
                           save at that step to OUT/ckpt (and check that, as below).
  crash DIR STAGE          train 2 steps, save to DIR/ckpt and check it: the consolidated copy
                           equals the state, a fresh engine that loads it continues bit for bit,
                           DIR/uninterrupted.npz keeps where 6 steps end; then save again and
                           get SIGKILLed after the first file written.
  mixed DIR STAGE          float16 mixed precision at STAGE saves (float32 masters, the loss
                           scale); stage 1 at float16 loads and continues bit for bit, a float32
                           engine loads the masters themselves.
"""
import os
import signal
import sys

import numpy as np

import dpcore
import dpcore.nn.functional as F
import dpcore.optim as optim
from dpcore.parallel import DataParallel, checkpoint
from dpcore.tensor import Tensor
from checks import say
from fault_kit import mpi_shm_segments
from ddp_equiv import data, make

STEPS, BATCH = 6, 12
X, Y = data(STEPS * BATCH, np.float64, seed=11)


def engine_for(comm, stage, seed):
    return DataParallel(make(np.float64, seed=seed), comm, zero_stage=stage,
                        optimizer=optim.AdamW, lr=0.01, weight_decay=0.1, bucket_cap_mb=0.002)


def train(engine, comm, first, last):
    for s in range(first, last):
        mine = np.array_split(np.arange(s * BATCH, (s + 1) * BATCH), comm.size)[comm.rank]
        F.cross_entropy(engine(Tensor(X[mine])), Y[mine]).backward()
        engine.step()
        engine.zero_grad()


def save_then_finish(engine, comm, directory, step):
    """Save after `step`, check the copy, train on to the end and keep the result."""
    path = os.path.join(directory, "ckpt")
    engine.save(path)
    saved = engine.state_dict()
    full = checkpoint.consolidate(path)  # every rank may read it: no communication
    assert all(np.array_equal(full["model"][k], v) for k, v in saved.items())
    assert full["optimizer"]["step"] == step, full["optimizer"]["step"]
    twin = engine_for(comm, engine.zero_stage, seed=comm.rank + 100)
    twin.load(path)
    train(engine, comm, step, STEPS)
    train(twin, comm, step, STEPS)
    result, again = engine.state_dict(), twin.state_dict()
    for name in result:  # same world size and stage: exactly the same bits
        assert np.array_equal(result[name], again[name]), f"resumed twin differs on {name}"
    if comm.rank == 0:
        np.savez(os.path.join(directory, "uninterrupted.npz"), **result)
    return result


def resume(comm, directory, stage, step, save_at=None, out=None):
    with np.load(os.path.join(directory, "uninterrupted.npz")) as f:
        expected = dict(f)  # read first: `out` may be `directory`
    engine = engine_for(comm, stage, seed=comm.rank + 7)
    engine.load(os.path.join(directory, "ckpt"))
    if save_at is None:
        train(engine, comm, step, STEPS)
        got = engine.state_dict()
    else:
        train(engine, comm, step, save_at)
        got = save_then_finish(engine, comm, out, save_at)
    for name in got:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-10, atol=1e-10,
                                   err_msg=name)


def crash(comm, directory, stage):
    engine = engine_for(comm, stage, seed=comm.rank)
    train(engine, comm, 0, 2)
    save_then_finish(engine, comm, directory, 2)
    write, victim = checkpoint._write_array, max(engine.checkpoint_writers())

    def write_then_die(filename, array):
        write(filename, array)
        say(comm.rank, f"mpi shm {mpi_shm_segments()}")  # nobody's MPI_Finalize unlinks them
        say(comm.rank, "killed mid-save")
        os.kill(os.getpid(), signal.SIGKILL)
    if comm.rank == victim:
        checkpoint._write_array = write_then_die
    engine.save(os.path.join(directory, "ckpt"))  # the victim dies, the others see it
    raise AssertionError("the save should not have finished")


def mixed(comm, directory, stage):
    from zero_equiv import mlp
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((12, 40)).astype(np.float32), rng.integers(0, 10, 12)
    mine = np.array_split(np.arange(12), comm.size)[comm.rank]

    def steps(engine, n):
        for _ in range(n):
            loss = F.cross_entropy(engine(Tensor(x[mine])), y[mine])
            engine.scale_loss(loss).backward()
            engine.step()
            engine.zero_grad()
    path = os.path.join(directory, "mixed")
    saver = DataParallel(mlp(), comm, zero_stage=stage, bucket_cap_mb=0.01, lr=1e-2,
                         mixed_precision="float16")
    steps(saver, 2)
    saver.mixed.scale = 1024.0
    saver.save(path)
    loader = DataParallel(mlp(5), comm, zero_stage=1, bucket_cap_mb=0.01, lr=1e-2,
                          mixed_precision="float16")
    loader.load(path)
    assert loader.mixed.scale == 1024.0
    plain = DataParallel(mlp(5), comm, zero_stage=2, lr=1e-2)
    plain.load(path)
    full, got = checkpoint.consolidate(path)["model"], plain.state_dict()
    assert all(full[k].dtype == np.float32 and np.array_equal(got[k], full[k]) for k in got)
    steps(saver, 2)
    steps(loader, 2)
    a, b = saver.state_dict(), loader.state_dict()
    assert all(np.array_equal(a[k], b[k]) for k in a), "mixed-precision resume differs"


def main():
    mode, directory, stage = sys.argv[1], sys.argv[2], int(sys.argv[3])
    comm = dpcore.init()
    if mode == "resume":
        rest = [int(sys.argv[5]), sys.argv[6]] if len(sys.argv) > 5 else []
        resume(comm, directory, stage, int(sys.argv[4]), *rest)
    elif mode == "crash":
        crash(comm, directory, stage)
    elif mode == "mixed":
        mixed(comm, directory, stage)
    say(comm.rank, "ok")
    comm.close()


if __name__ == "__main__":
    sys.exit(main())
