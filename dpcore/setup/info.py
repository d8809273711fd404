"""DPCORE_DEBUG=INFO: what init set up, on stderr, as NCCL_DEBUG=INFO prints it: each rank's
line (host, pid, transport, its node), and rank 0's lines for the whole job (the nodes, every
setting as it took effect). One write per rank, so the ranks' lines stay whole. Then, as the
collectives run, each rank's algorithm choices: a line the first time its communicator runs a
collective of a dtype and power-of-two size class with an algorithm (csrc/core/choice_log.h,
after prefix())."""
import dataclasses
import os
import socket
import sys


def log_init(boot, nodes, node, transport, settings, timeout):
    where = next(i for i, ranks in enumerate(nodes) if boot.rank in ranks)
    wire = "mpi" if boot.comm is not None else "store"
    lines = [f"rank {boot.rank}/{boot.size}: transport {transport}, bootstrap over {wire}, node "
             f"{where} of {len(nodes)} (local rank {node.rank}/{node.size}), timeout {timeout:g} s"]
    if boot.rank == 0:
        lines.append("nodes: " + "; ".join(f"{i}: ranks {_ranks(r)}" for i, r in enumerate(nodes)))
        lines.append("settings: " + ", ".join(f"{k}={v}" for k, v in
                                              dataclasses.asdict(settings).items()))
    sys.stderr.write("".join(prefix(boot.rank) + line + "\n" for line in lines))
    sys.stderr.flush()


def prefix(rank):
    """What opens each of this rank's INFO lines."""
    return f"{socket.gethostname()}:{os.getpid()} [{rank}] dpcore INFO "


def _ranks(ranks):
    """[0, 1, 2, 3] -> '0-3'; others as a list."""
    if ranks == list(range(ranks[0], ranks[-1] + 1)) and len(ranks) > 2:
        return f"{ranks[0]}-{ranks[-1]}"
    return ",".join(map(str, ranks))
