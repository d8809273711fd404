"""`python -m dpcore.train`'s training on the array module named first (numpy, strict or cupy:
tests/array_modules.py), the other arguments the command's. --device picks numpy or cupy; this
also runs the loop on strict_xp, which has no device name, so that any NumPy-only step of it
fails here as it would on a GPU."""
import sys
from pathlib import Path

import dpcore
from dpcore import train
from dpcore._cli.errors import run_main

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: array_modules, strict_xp
from array_modules import module  # noqa: E402


def main(argv):
    args = train.parse_args(argv[1:])
    with dpcore.init() as comm:
        train.train(args, comm, module(argv[0], comm.local_rank))
    return 0


if __name__ == "__main__":
    run_main(main, sys.argv[1:])
