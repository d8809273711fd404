"""The package's shape, checked: no module reads another module's private names, no source file
grows past ~400 lines without saying why at its top, `import dpcore` loads the call path and not
the trainer or the cost model, and the Backend protocol states every method the compiled backends
bind."""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

import dpcore
from dpcore import _C
from dpcore.comm import backend as protocol

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "dpcore"
MAX_LINES = 400


def _private(name):
    return name.startswith("_") and not name.startswith("__")


def _defined_privates(tree):
    """The private names a module defines: at its top level, in its classes, and as attributes
    it assigns on self."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return {n for n in names if _private(n)}


def private_reads(sources):
    """[(module, line, name)] where a module reads a private name that only another module
    defines (as `obj._name` on anything but self or cls, or `from m import _name`)."""
    trees = {path: ast.parse(text) for path, text in sources.items()}
    defined = {path: _defined_privates(tree) for path, tree in trees.items()}
    everywhere = set().union(*defined.values())
    found = []
    for path, tree in trees.items():
        foreign = everywhere - defined[path]
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in foreign:
                if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                    found.append((path, node.lineno, node.attr))
            elif isinstance(node, ast.ImportFrom):
                found += [(path, node.lineno, a.name) for a in node.names if a.name in foreign]
    return found


def package_sources():
    return {str(p.relative_to(ROOT)): p.read_text() for p in sorted(PACKAGE.rglob("*.py"))}


def test_no_module_reads_another_modules_private_names():
    found = private_reads(package_sources())
    assert not found, "\n".join(f"{path}:{line}: {name}" for path, line, name in found)


def test_the_private_name_check_can_fail():
    """The check sees the ways a module reached into another: a private member of another
    module's object, and a private name imported from it."""
    sources = {"a.py": "class A:\n    def __init__(self):\n        self._pending = []\n"
                       "_TABLE = {}\n",
               "b.py": "def reap(comm):\n    return comm._pending\n",
               "c.py": "from a import _TABLE\n",
               "d.py": "class D:\n    def f(self):\n        return self._pending\n"}
    assert sorted(private_reads(sources)) == [("b.py", 2, "_pending"), ("c.py", 1, "_TABLE")]


def _source_files():
    for folder, patterns in ((PACKAGE, ("*.py",)), (ROOT / "csrc", ("*.h", "*.cc", "*.cu")),
                             (ROOT / "tests", ("*.py", "*.cc")), (ROOT / "benchmarks", ("*.py",))):
        for pattern in patterns:
            yield from folder.rglob(pattern)


def test_no_source_file_is_long_without_a_reason_at_its_top():
    """A file of more than ~400 lines holds more than one idea, unless its first lines say why
    it may not be split ("Longer than ...")."""
    long = []
    for path in _source_files():
        lines = path.read_text().splitlines()
        if len(lines) > MAX_LINES and not any("Longer than" in line for line in lines[:10]):
            long.append(f"{path.relative_to(ROOT)}: {len(lines)} lines")
    assert not long, "\n".join(long)


def test_import_dpcore_loads_the_call_path_alone():
    """The collectives load with the package; the trainer and the cost model on first use."""
    code = ("import sys, dpcore; print(' '.join(sorted(m for m in sys.modules "
            "if m.startswith('dpcore'))))")
    loaded = set(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                                text=True, cwd=ROOT).stdout.split())
    assert "dpcore.comm.communicator" in loaded
    for lazy in ("dpcore.tensor", "dpcore.nn", "dpcore.parallel", "dpcore.cost",
                 "dpcore.cost.formulas", "dpcore.explain", "dpcore.bench", "dpcore.torch"):
        assert lazy not in loaded
    assert dpcore.Tensor is dpcore.tensor.Tensor and dpcore.parallel.DataParallel


@pytest.mark.parametrize("cls, stated", [
    (_C.Backend, protocol.Backend), (_C.Job, protocol.Job), (_C.ShmBackend, protocol.ShmBackend),
    (_C.DeviceBackend, protocol.DeviceBackend)])
def test_the_backend_protocol_states_every_bound_method(cls, stated):
    bound = {n for n in vars(cls) if not n.startswith("_")}
    listed = set()
    for klass in stated.__mro__:  # methods, and properties stated as annotations
        listed |= set(vars(klass)) | set(getattr(klass, "__annotations__", {}))
    assert bound <= listed, f"not in dpcore/comm/backend.py: {sorted(bound - listed)}"
