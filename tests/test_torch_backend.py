"""Issue 15: `import dpcore.torch` registers the torch.distributed backend "dpcore", and torch's
own collectives, DistributedDataParallel and FSDP run on it, bit for bit as on gloo in the same
job (tests/scripts/torch_backend.py says what each part checks). One mpiexec job per rank count
checks everything (a torch import costs seconds per rank): 2 ranks started by env://, torch
ranks equal to MPI's; 3 ranks by tcp://, torch ranks the reverse of MPI's."""
import pytest

from mpi_helpers import run_ok

pytestmark = pytest.mark.mpi
pytest.importorskip("torch")


@pytest.mark.parametrize("n, init_method", [(2, "env"), (3, "tcp")])
def test_torch_collectives_ddp_and_fsdp_match_gloo(n, init_method):
    run_ok("torch_backend.py", n, init_method, timeout=240)
