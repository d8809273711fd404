"""A mixture-of-experts layer's token dispatch with all_to_all: one expert per rank. Every rank
routes each of its tokens to an expert (the router's top-1), sends every expert its tokens with
one all_to_all of uneven splits (how many go where is itself exchanged first, with an
all_to_all of one count per rank), applies its own expert to what it received, and a second
all_to_all, with the splits turned round, brings the results home. Rank 0 gathers every rank's
output and checks it against one process applying the same experts to every token.

    mpiexec -n 4 python examples/moe_dispatch.py
    mpiexec -n 3 python examples/moe_dispatch.py --out moe.npy   # rank 0 saves the outputs

The values are small integers, so every sum is exact in float32 and the check is exact whatever
order a matrix product adds in.
"""
import argparse

import numpy as np

import dpcore

DIM = 8


def tokens(rank):
    """Rank `rank`'s tokens: a different number on each rank."""
    rng = np.random.default_rng(100 + rank)
    return rng.integers(-4, 5, (12 + 5 * rank, DIM)).astype(np.float32)


def router(experts):
    return np.random.default_rng(0).integers(-2, 3, (DIM, experts)).astype(np.float32)


def expert(e, x):
    """Expert e: relu(x W^T + b), its weights its own."""
    rng = np.random.default_rng(10 + e)
    w = rng.integers(-2, 3, (DIM, DIM)).astype(np.float32)
    b = rng.integers(-2, 3, DIM).astype(np.float32)
    return np.maximum(x @ w.T + b, 0)


def route(x, experts):
    """The expert of every token: the router's highest score (the first, on a tie)."""
    return np.argmax(x @ router(experts), axis=1)


def moe_layer(comm, x):
    n = comm.size
    dest = route(x, n)
    order = np.argsort(dest, kind="stable")           # the tokens grouped by expert
    counts = np.bincount(dest, minlength=n)           # tokens for expert (rank) q
    incoming = comm.all_to_all(counts)                # tokens from rank p, for my expert
    sent, got = (counts * DIM).tolist(), (incoming * DIM).tolist()
    mine = comm.all_to_all(x[order].ravel(), splits=sent, out_splits=got)
    done = expert(comm.rank, mine.reshape(-1, DIM))
    back = comm.all_to_all(done.ravel(), splits=got, out_splits=sent)  # the way they came
    out = np.empty_like(x)
    out[order] = back.reshape(-1, DIM)
    return out


def one_process(n):
    """Every rank's output as one process computes it: each token through its expert."""
    outs = []
    for rank in range(n):
        x = tokens(rank)
        dest = route(x, n)
        out = np.empty_like(x)
        for e in range(n):
            out[dest == e] = expert(e, x[dest == e])
        outs.append(out)
    return np.concatenate(outs)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", help="rank 0 saves every rank's output here (.npy)")
    args = p.parse_args()
    with dpcore.init() as comm:
        out = moe_layer(comm, tokens(comm.rank))
        every = comm.gather(out.ravel(), root=0)      # rank order, uneven lengths
        if comm.rank == 0:
            every = every.reshape(-1, DIM)
            same = np.array_equal(every, one_process(comm.size))
            print(f"{len(every)} tokens on {comm.size} experts; the same output as one "
                  f"process: {'exactly' if same else 'NO'}", flush=True)
            if args.out:
                np.save(args.out, every)


if __name__ == "__main__":
    main()
