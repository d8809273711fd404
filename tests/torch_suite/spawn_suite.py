"""PyTorch's own distributed test suite (torch.testing._internal.distributed.distributed_test's
DistributedTest._DistTestBase) as PyTorch's test/distributed/test_distributed_spawn.py runs it:
one class, TestDistBackendWithSpawn, whose every test spawns WORLD_SIZE processes that join a
process group of BACKEND (file:// init) and run the test. run.py sets BACKEND, WORLD_SIZE and
TEMP_DIR and collects this file with pytest; read its docstring first.

BACKEND=gloo is torch's suite as torch runs it. BACKEND=dpcore runs the same tests on dpcore's
backend (`import dpcore.torch` here, which the spawned ranks import too), with two changes, both
made before torch's module defines its tests (its skip decorators read them then):
- dpcore has every feature gloo has in DistTestCases.backend_feature ("gpu", "ddp",
  "subgroup", ...: the suite runs many CPU tests under "gpu"), and is a plugin backend;
- the tests torch gates to gloo by name (barrier timeouts, sparse all_reduce, the coalesced
  all_reduce, batch_isend_irecv on CPU, monitored_barrier, ...) run on dpcore too: dpcore's
  backend is meant to run on CPU whatever gloo runs; and so do the CPU all_to_all tests torch
  gates to MPI (gloo skips them). They are gated by the literal comparisons GATES replaces, in
  a copy of torch's source compiled under the module's own name.
"""
import importlib.util
import os
import sys

import torch
from torch.testing._internal.common_distributed import DistTestCases

SUITE = "torch.testing._internal.distributed.distributed_test"
BACKEND = os.environ["BACKEND"]
GLOO_PEERS = ("gloo", "dpcore")
# torch's text -> what it reads on dpcore; each must occur (a torch that words its gates
# differently fails here, loudly, rather than skipping the tests quietly).
GATES = {
    'BACKEND != "gloo"': f"BACKEND not in {GLOO_PEERS!r}",
    'BACKEND == "gloo"': f"BACKEND in {GLOO_PEERS!r}",
    'require_backend_is_available({"gloo"})': f"require_backend_is_available({set(GLOO_PEERS)!r})",
    'BACKEND != "mpi", "Only MPI supports': 'BACKEND not in ("mpi", "dpcore"), "Only MPI supports',
}


def suite_opened_to_dpcore():
    """torch's suite module with GATES applied, registered under its own name (so that
    what the spawned ranks unpickle from it resolves to this copy)."""
    for backends in DistTestCases.backend_feature.values():
        if "gloo" in backends:
            backends.add("dpcore")
    DistTestCases.backend_feature["plugin"].add("dpcore")
    spec = importlib.util.find_spec(SUITE)
    source = open(spec.origin).read()
    for gate, opened in GATES.items():
        if gate not in source:
            raise RuntimeError(f"torch {torch.__version__}'s {spec.origin} has no {gate!r}: "
                               f"update GATES in {__file__}")
        source = source.replace(gate, opened)
    module = importlib.util.module_from_spec(spec)
    sys.modules[SUITE] = module
    exec(compile(source, spec.origin, "exec"), module.__dict__)
    return module


if BACKEND == "dpcore":
    import dpcore.torch  # noqa: F401  (registers the backend, in every spawned rank too)
    suite = suite_opened_to_dpcore()
else:
    suite = importlib.import_module(SUITE)


class TestDistBackendWithSpawn(suite.TestDistBackend, suite.DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()
        torch.backends.cudnn.flags(enabled=True, allow_tf32=False).__enter__()
