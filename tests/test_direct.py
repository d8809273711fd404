"""The direct algorithm (every rank reads the peers' buffers with process_vm_readv) is on
wherever the kernel lets ranks of one user read each other's memory, and the correctness scripts
then run it (reductions.py and gather_broadcast.py add algo="direct" when comm.direct); it
reduces in the ring's order, so algo="auto" may switch between the two (same_bits.py)."""
from pathlib import Path

import pytest

from mpi_helpers import rank_lines, run_ok

pytestmark = pytest.mark.mpi


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


@pytest.mark.skipif(not ptrace_allows_siblings(), reason="ranks may not read each other's memory")
@pytest.mark.parametrize("n", [2, 3, 4])
def test_ring_and_direct_give_the_same_bits(n):
    run_ok("same_bits.py", n)
