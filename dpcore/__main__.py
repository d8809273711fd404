"""python -m dpcore: what this installation is and what it will use, for a bug report or a run to
compare later (as `python -m torch.utils.collect_env`): the version, the build (CUDA, the CPU
tuning), Python and NumPy, the MPI library, the transports this machine can run, the GPUs, and
every DPCORE_* variable (dpcore/_cli/environment.py)."""
from ._cli.args import Parser
from ._cli.environment import summary
from ._cli.errors import run_main


def main(argv=None):
    Parser(prog="python -m dpcore", description=__doc__).parse_args(argv)
    print("\n".join(summary()), flush=True)
    return 0


if __name__ == "__main__":
    run_main(main)
