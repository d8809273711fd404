"""python -m dpcore: what this installation is and what it will use, for a bug report or a run to
compare later (as `python -m torch.utils.collect_env`): the version, the build (CUDA, the CPU
tuning), Python and NumPy, the MPI library, the transports this machine can run, the GPUs, and
every DPCORE_* variable. It starts no MPI job (MPI runs as a singleton) and imports no torch."""
import importlib.metadata
import importlib.util
import os
import platform
import shutil
import subprocess
import sys

from ._cli.args import Parser
from ._cli.errors import run_main


def summary():
    """The lines `python -m dpcore` prints."""
    import numpy as np

    import dpcore
    from . import settings

    info = dpcore.build_info()
    where = os.path.dirname(os.path.abspath(dpcore.__file__))
    cuda = f"on (archs {info['cuda_archs']})" if info["cuda"] else "off"
    lines = [f"dpcore {info['version']}{_commit(where)} at {where}",
             f"build: CUDA {cuda}; CPU loops "
             f"{info.get('native') or 'portable (no -march=native)'}",
             f"python {platform.python_version()} ({sys.executable}), numpy {np.__version__}, "
             f"{platform.platform()}",
             f"MPI: {_mpi()}",
             f"transports: shm (ranks of one host); {_transports(info)}",
             f"GPU: {_gpus(info)}",
             "settings (DPCORE_*):"]
    for name, text, default in settings.described():
        lines.append(f"  {name}={text}" if text is not None else
                     f"  {name} unset (default {default})")
    for name in settings.BUILD_VARIABLES:
        if os.environ.get(name):
            lines.append(f"  {name}={os.environ[name]} (a build switch: read by setup.py)")
    unknown = sorted(set(n for n in os.environ if n.startswith("DPCORE_")) -
                     set(settings.known_variables()))
    lines += [f"  {name}={os.environ[name]}: not a dpcore setting, ignored" for name in unknown]
    return lines


def _commit(where):
    """' (commit abc1234)' where the package lies in a git checkout, else ''."""
    try:
        done = subprocess.run(["git", "-C", where, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return ""
    return f" (commit {done.stdout.strip()})" if done.returncode == 0 else ""


def _mpi():
    try:
        import mpi4py
        from mpi4py import MPI  # MPI_Init, as a singleton: a later dpcore.init() needs it
    except ImportError as e:
        return f"none: mpi4py does not import ({e})"
    library = " ".join(MPI.Get_library_version().split("\n")[0].split())
    mpiexec = shutil.which("mpiexec") or "no mpiexec on PATH"
    return f"{library}; mpi4py {mpi4py.__version__}; MPI {'.'.join(map(str, MPI.Get_version()))}" \
           f"; {mpiexec}"


def _transports(info):
    have = ["mpi (between hosts, or DPCORE_TRANSPORT=mpi)" if _installed("mpi4py") else
            "no mpi (mpi4py missing)"]
    have.append("cuda (CUDA arrays)" if info["cuda_available"] else
                "no cuda (" + ("no GPU usable" if info["cuda"] else "a CPU-only build") + ")")
    have.append(f"torch.distributed backend (torch {_version('torch')})" if _installed("torch")
                else "no torch backend (torch missing)")
    return "; ".join(have)


def _gpus(info):
    if shutil.which("nvidia-smi"):
        try:
            done = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                                   "--format=csv,noheader"], capture_output=True, text=True,
                                  timeout=20)
            if done.returncode == 0 and done.stdout.strip():
                return "; ".join(done.stdout.strip().splitlines())
        except (OSError, subprocess.SubprocessError):
            pass
    return "usable" if info["cuda_available"] else "none found"


def _installed(name):
    return importlib.util.find_spec(name) is not None


def _version(name):
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def main(argv=None):
    Parser(prog="python -m dpcore", description=__doc__).parse_args(argv)
    print("\n".join(summary()), flush=True)
    return 0


if __name__ == "__main__":
    run_main(main)
