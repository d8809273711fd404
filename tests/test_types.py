"""The package's types (docs/api.md, "Types"): dpcore/_C.pyi names what the compiled module binds
and every name the package reads from it, so the stub cannot drift from the bindings; and mypy,
with pyproject.toml's settings, passes the package and a typed user's program
(scripts/typed_api.py), and fails the misuses the annotations exist to catch."""
import ast
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dpcore import _C
from mpi_helpers import SCRIPTS

ROOT = Path(__file__).resolve().parents[1]
STUB = ROOT / "dpcore" / "_C.pyi"
SCRIPT = SCRIPTS / "typed_api.py"
# bound only where the module was built with nvcc (build_info()["cuda"])
CUDA_ONLY = {"cuda_reduce", "cuda_ring_trace"}


def _public(name):
    return not name.startswith("_")


def stub_names():
    """{top-level name: None for a function or value, {member names} for a class} in the stub."""
    names = {}
    for node in ast.parse(STUB.read_text()).body:
        if isinstance(node, ast.ClassDef):
            names[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)} | {
                n.target.id for n in node.body
                if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
        elif isinstance(node, ast.FunctionDef):
            names[node.name] = None
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = None
    return {n: members for n, members in names.items() if _public(n)}


def test_the_stub_names_what_the_module_binds():
    stub = stub_names()
    bound = {n for n in dir(_C) if _public(n)}
    optional = set() if _C.build_info()["cuda"] else CUDA_ONLY
    assert bound - set(stub) == set(), "bound by _C, missing from dpcore/_C.pyi"
    assert set(stub) - bound - optional == set(), "in dpcore/_C.pyi, not bound by _C"
    for name, members in stub.items():
        if members is not None and name in bound:
            own = {m for m in vars(getattr(_C, name)) if _public(m)}
            assert own == {m for m in members if _public(m)}, f"_C.{name}'s members"


def names_read_from_C(sources):
    """{(path, line, name)} where a module reads a name of _C: `_C.name` on an imported `_C`,
    or `from .._C import name`."""
    found = set()
    for path, text in sources.items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id == "_C":
                found.add((path, node.lineno, node.attr))
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[-1] == "_C":
                found |= {(path, node.lineno, a.name) for a in node.names}
    return found


def test_every_name_the_package_reads_from_C_is_in_the_stub():
    sources = {str(p.relative_to(ROOT)): p.read_text()
               for p in sorted((ROOT / "dpcore").rglob("*.py"))}
    read = names_read_from_C(sources)
    assert len({name for *_, name in read}) > 20, "found too few: has _C been renamed?"
    stub = stub_names()
    missing = sorted(f"{path}:{line}: _C.{name}" for path, line, name in read
                     if name not in stub)
    assert not missing, "not in dpcore/_C.pyi:\n" + "\n".join(missing)


def test_the_read_check_sees_both_ways_in():
    sources = {"a.py": "from .. import _C\nx = _C.DTYPES\n", "b.py": "from .._C import overlap\n",
               "c.py": "import torch\ny = torch._C.Future\n"}
    assert names_read_from_C(sources) == {("a.py", 2, "DTYPES"), ("b.py", 1, "overlap")}


# Misuses of the public API that its annotations must reject: {line: what mypy reports there}
MISUSES = '''
import numpy as np
import numpy.typing as npt
import dpcore

comm = dpcore.init()
x: npt.NDArray[np.float32] = np.zeros(4, np.float32)
a: npt.NDArray[np.float32] = comm.reduce(x)
b: npt.NDArray[np.float32] = comm.all_reduce(x, async_op=True)
c: int = comm.isend(x, 1).wait()
comm.all_reduce([1.0, 2.0])
comm.send(x, peer="1")
d: str = comm.algorithm_calls()
dpcore.Tensor(x).no_such_method()
'''
EXPECTED = {8: "assignment", 9: "assignment", 10: "assignment", 11: "call-overload",
            12: "arg-type", 13: "assignment", 14: "attr-defined"}


def _mypy(*targets, cwd):
    """mypy with pyproject.toml's settings, its cache in the repository's .mypy_cache (ignored
    by git): a first run reads numpy's and torch's types (~30 s), later ones take seconds."""
    return subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(ROOT / ".mypy_cache"),
                           "--config-file", str(ROOT / "pyproject.toml"), *targets],
                          cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
@pytest.mark.torch
def test_mypy_passes_the_package_and_a_typed_users_program():
    pytest.importorskip("mypy", reason="mypy is not installed (pip install -e '.[test]')")
    if importlib.util.find_spec("torch") is None:  # dpcore.torch's types are torch's
        pytest.skip("torch is not installed: dpcore.torch cannot be type-checked")
    checked = _mypy("dpcore", str(SCRIPT), cwd=ROOT)
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.slow
def test_mypy_rejects_misuses_of_the_public_api(tmp_path):
    pytest.importorskip("mypy", reason="mypy is not installed (pip install -e '.[test]')")
    (tmp_path / "misuse.py").write_text(MISUSES)
    checked = _mypy(str(tmp_path / "misuse.py"), cwd=ROOT)
    found = {int(line): code for line, code in
             re.findall(r"misuse\.py:(\d+): error: .*\[([\w-]+)\]$", checked.stdout, re.M)}
    assert found == EXPECTED, checked.stdout + checked.stderr


@pytest.mark.slow
def test_the_typed_program_runs_as_its_types_say():
    """One rank, no mpiexec: what assert_type promised, the asserts check on the values."""
    ran = subprocess.run([sys.executable, str(SCRIPT)], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert ran.returncode == 0 and "rank 0: ok" in ran.stdout, ran.stdout + ran.stderr
