"""Pipeline parallelism with send and recv: a two-stage model, stage 0 on rank 0 and stage 1 on
rank 1. Every step cuts the batch into micro-batches; rank 0 runs stage 0 on each and sends the
activations on, rank 1 runs stage 1 and the loss, and sends back the gradient of each
activation, with which rank 0 finishes the backward pass (all forwards, then all backwards, as
GPipe). The trained weights are bit for bit those of one process training the whole model on
the same micro-batches: the same arithmetic in the same order, only on two ranks.

    mpiexec -n 2 python examples/pipeline_parallel.py            # prints the loss per step
    mpiexec -n 2 python examples/pipeline_parallel.py --out w.npz  # and saves the weights
"""
import argparse

import numpy as np

import dpcore
from dpcore import Tensor, nn
from dpcore.nn import functional as F
from dpcore.optim import SGD

IN, HIDDEN, OUT = 8, 32, 4


def build():
    """Both stages, initialised the same way in every process."""
    nn.manual_seed(0)
    return (nn.Sequential(nn.Linear(IN, HIDDEN), nn.Tanh()),
            nn.Sequential(nn.Linear(HIDDEN, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, OUT)))


def batches(steps, micro, rows):
    """For each step, its micro-batches: (x, y) pairs of `rows` rows, a noisy linear target."""
    rng = np.random.default_rng(1)
    truth = rng.standard_normal((IN, OUT)).astype(np.float32)
    for _ in range(steps):
        xs = rng.standard_normal((micro, rows, IN)).astype(np.float32)
        yield [(x, x @ truth + np.float32(0.1) * rng.standard_normal((rows, OUT),
                                                                      dtype=np.float32))
               for x in xs]


def loss_of(out, y, micro):
    """The micro-batch's share of the step's loss: the mean over the micro-batches."""
    return F.mse_loss(out, Tensor(y)) * np.float32(1 / micro)


def stage0(comm, model, steps, micro, rows, lr):
    opt = SGD(model.parameters(), lr=lr)
    for step in batches(steps, micro, rows):
        acts = [model(Tensor(x)) for x, _ in step]
        sends = [comm.isend(a.data, peer=1, tag=m) for m, a in enumerate(acts)]
        for m, a in enumerate(acts):  # the gradients come back in micro-batch order
            grad = np.empty_like(a.data)
            comm.recv(grad, peer=1, tag=m)
            a.backward(grad)
        for work in sends:
            work.wait()
        opt.step()
        opt.zero_grad()


def stage1(comm, model, steps, micro, rows, lr):
    opt = SGD(model.parameters(), lr=lr)
    for i, step in enumerate(batches(steps, micro, rows)):
        total, sends = 0.0, []
        for m, (_, y) in enumerate(step):
            act = np.empty((rows, HIDDEN), np.float32)
            comm.recv(act, peer=0, tag=m)
            h = Tensor(act, requires_grad=True)
            loss = loss_of(model(h), y, micro)
            loss.backward()
            total += loss.item()
            sends.append(comm.isend(h.grad, peer=0, tag=m))
        for work in sends:
            work.wait()
        opt.step()
        opt.zero_grad()
        print(f"step {i:3d}  loss {total:.5f}", flush=True)


def one_process(steps, micro, rows, lr):
    """The same training without a pipeline: the reference the two ranks must match."""
    first, second = build()
    opt = SGD([*first.parameters(), *second.parameters()], lr=lr)
    for step in batches(steps, micro, rows):
        for x, y in step:
            loss_of(second(first(Tensor(x))), y, micro).backward()
        opt.step()
        opt.zero_grad()
    return weights(first, second)


def weights(first, second):
    return {**{f"stage0.{k}": v for k, v in first.state_dict().items()},
            **{f"stage1.{k}": v for k, v in second.state_dict().items()}}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--micro", type=int, default=4, help="micro-batches per step")
    p.add_argument("--rows", type=int, default=16, help="rows per micro-batch")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--out", help="rank 0 saves both stages' trained weights here (.npz)")
    args = p.parse_args()
    with dpcore.init() as comm:
        if comm.size != 2:
            raise SystemExit("pipeline_parallel.py: run it on 2 ranks (mpiexec -n 2)")
        first, second = build()
        run = (args.steps, args.micro, args.rows, args.lr)
        if comm.rank == 0:
            stage0(comm, first, *run)
            for param in second.parameters():  # stage 1's trained weights, from rank 1
                comm.recv(param.data, peer=1)
        else:
            stage1(comm, second, *run)
            for param in second.parameters():
                comm.send(param.data, peer=0)
        if comm.rank == 0:
            trained = weights(first, second)
            same = all(np.array_equal(trained[k], v) for k, v in one_process(*run).items())
            print(f"the same weights as one process: {'bit for bit' if same else 'NO'}",
                  flush=True)
            if args.out:
                np.savez(args.out, **trained)


if __name__ == "__main__":
    main()
