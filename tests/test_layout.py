"""The link between a multi-rank test and its script (tests/README.md): a test names the program
it launches by a string, run_ok("reductions.py", n) or SCRIPTS / "as_child.py", so a renamed,
misspelt or orphaned script would show only when that test runs. These read the test files'
syntax trees instead: every script a test launches exists in tests/scripts/, and every program
there is launched by some test or imported by one that is."""
import ast
import functools
from pathlib import Path

from mpi_helpers import SCRIPTS

TESTS = Path(__file__).resolve().parent
TEST_FILES = sorted(p for p in TESTS.rglob("test_*.py") if SCRIPTS not in p.parents)
LAUNCHERS = {"run_ok", "run_script"}  # mpi_helpers': the first argument names a script


def script_operand(node, launchers):
    """The expression that names the script node launches, else None: X in SCRIPTS / X, or the
    first argument of a call to one of `launchers`."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) \
            and getattr(node.left, "id", None) == "SCRIPTS":
        return node.right
    if isinstance(node, ast.Call) and node.args \
            and (getattr(node.func, "id", None) or getattr(node.func, "attr", None)) in launchers:
        return node.args[0]
    return None


def forwards_first_parameter(function):
    """Whether a test file's own helper launches the script its first parameter names, as
    test_peer_faults.launch(script, n, ...) does through SCRIPTS / script."""
    if not function.args.args:
        return False
    first = function.args.args[0].arg
    return any(getattr(script_operand(node, LAUNCHERS), "id", None) == first
               for node in ast.walk(function))


@functools.cache
def launched(path):
    """{script name: line} for every script the test file at `path` launches by name."""
    tree = ast.parse(path.read_text(), str(path))
    launchers = LAUNCHERS | {f.name for f in ast.walk(tree)
                             if isinstance(f, ast.FunctionDef) and forwards_first_parameter(f)}
    names = {}
    for node in ast.walk(tree):
        operand = script_operand(node, launchers)
        if isinstance(operand, ast.Constant) and isinstance(operand.value, str):
            names.setdefault(operand.value, node.lineno)
    return names


def imported(path):
    """The top-level module names a script imports."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def test_every_script_a_test_launches_exists():
    missing = [f"{path.relative_to(TESTS)}:{line}: {name}"
               for path in TEST_FILES for name, line in sorted(launched(path).items())
               if not (SCRIPTS / name).is_file()]
    assert not missing, "no such script in tests/scripts/:\n" + "\n".join(missing)


def test_every_script_is_launched_by_a_test_or_shared_by_ones_that_are():
    scripts = {p.stem: p for p in SCRIPTS.glob("*.py")}
    used = {Path(name).stem for path in TEST_FILES for name in launched(path)} & set(scripts)
    assert used, "found no launch at all: has run_ok or SCRIPTS been renamed?"
    todo = list(used)
    while todo:  # what the launched scripts import from their own folder, and so on
        for stem in imported(scripts[todo.pop()]) & (set(scripts) - used):
            used.add(stem)
            todo.append(stem)
    orphans = sorted(f"{stem}.py" for stem in set(scripts) - used)
    assert not orphans, f"tests/scripts/ holds programs no test runs: {orphans}"
