"""The direct algorithm (all_gather and broadcast read the peers' buffers with process_vm_readv)
is on wherever the kernel lets ranks of one user read each other's memory, and the correctness
scripts then run it (tests/scripts/gather_broadcast.py adds algo="direct" when comm.direct)."""
from pathlib import Path

import pytest

from mpi_helpers import rank_lines, run_ok


def ptrace_allows_siblings():
    """Yama's ptrace_scope 0 (or no Yama) lets a process read a sibling's memory; 1 and above
    allow only descendants or nobody, and mpiexec's ranks are siblings."""
    scope = Path("/proc/sys/kernel/yama/ptrace_scope")
    return not scope.exists() or scope.read_text().strip() == "0"


@pytest.mark.parametrize("n", [2, 3])
def test_direct_is_available_where_the_kernel_allows_it(n):
    output = run_ok("direct_probe.py", n)
    reported = set(rank_lines(output, "direct").values())
    assert reported == {str(ptrace_allows_siblings())}, output
