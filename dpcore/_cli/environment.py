"""What this installation is and what it will use: `python -m dpcore` prints it all (summary(),
as `python -m torch.utils.collect_env` does, for a bug report), and the bench records the part
that makes its numbers comparable later (provenance()). Neither starts an MPI job (MPI runs as
a singleton, if at all) nor imports torch."""
import importlib.metadata
import importlib.util
import os
import platform
import shutil
import socket
import subprocess
import sys
import time


def summary():
    """The lines `python -m dpcore` prints."""
    import numpy as np

    import dpcore
    from .. import settings

    info = dpcore.build_info()
    where = os.path.dirname(os.path.abspath(dpcore.__file__))
    cuda = f"on (archs {info['cuda_archs']})" if info["cuda"] else "off"
    sha = commit(where)
    lines = [f"dpcore {info['version']}{f' (commit {sha})' if sha else ''} at {where}",
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


def provenance():
    """{dpcore version and commit, build, MPI library, host, date, the DPCORE_* variables set}:
    what a benchmark's numbers were measured with."""
    import dpcore

    info = dpcore.build_info()
    where = os.path.dirname(os.path.abspath(dpcore.__file__))
    return {"dpcore": info["version"], "commit": commit(where) or None,
            "native": info["native"] or "portable", "cuda": info["cuda"], "mpi": _mpi(),
            "host": socket.gethostname(), "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "settings": {k: v for k, v in sorted(os.environ.items())
                         if k.startswith("DPCORE_")}}


def commit(where):
    """The short commit of the git checkout `where` lies in, or ''."""
    try:
        done = subprocess.run(["git", "-C", where, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


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

