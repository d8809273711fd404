"""Issue 15: `import dpcore.torch` registers the torch.distributed backend "dpcore", and torch's
own collectives, DistributedDataParallel and FSDP run on it, bit for bit as on gloo in the same
job (tests/scripts/torch_backend.py says what each part checks). One mpiexec job per rank count
checks everything (a torch import costs seconds per rank): 2 ranks started by env://, torch
ranks equal to MPI's; 3 ranks by tcp://, torch ranks the reverse of MPI's (file://, reversed
too, starts the test of a rank that dies)."""
import sys

import pytest

import dpcore
from mpi_helpers import (SCRIPTS, rank_lines, remove_mpi_shm_leftovers, run_mpi, run_ok,
                         run_python)

pytest.importorskip("torch")
pytestmark = pytest.mark.torch


@pytest.mark.mpi
@pytest.mark.parametrize("n, init_method", [(2, "env"), (3, "tcp")])
def test_torch_collectives_ddp_and_fsdp_match_gloo(n, init_method):
    run_ok("torch_backend.py", n, init_method, timeout=240)


@pytest.mark.slow
def test_under_torchrun_the_backend_bootstraps_through_the_store():
    """torchrun sets env:// and starts no MPI: dpcore's communicator comes from torch's store
    (dpcore.init(store=...)), and torch's collectives are exact there too."""
    _, output = run_python(["-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                            "2", SCRIPTS / "torch_torchrun.py"],
                           env={"PMI_RANK": None, "OMPI_COMM_WORLD_RANK": None,
                                "PMIX_RANK": None}, timeout=120)
    assert "rank 0: ok" in output and "rank 1: ok" in output, output


@pytest.mark.mpi
def test_under_plain_mpiexec_env_init_needs_no_code():
    """init_process_group("dpcore") with env:// and nothing set: `import dpcore.torch` read the
    launcher's ranks and set what torchrun would (used to fail: "RANK expected")."""
    _, output = run_mpi(2, [SCRIPTS / "torch_torchrun.py"],
                        env={v: None for v in ("RANK", "WORLD_SIZE", "LOCAL_RANK",
                                               "MASTER_ADDR", "MASTER_PORT")}, timeout=120)
    remove_mpi_shm_leftovers(output)
    assert "rank 0: ok" in output and "rank 1: ok" in output, output


@pytest.mark.mpi
def test_a_rank_killed_in_ddp_training_fails_the_others_backward(tmp_path):
    """dpcore's CommError comes out of torch too: DDP's backward() raises it on the survivor,
    naming the dead rank, within seconds (DPCORE_TIMEOUT is 60 s), instead of hanging."""
    _, output = run_mpi(2, [SCRIPTS / "torch_peer_dies.py", tmp_path],
                        mpiexec_args=["-disable-auto-cleanup"],
                        wrapper=[sys.executable, SCRIPTS / "as_child.py"],
                        timeout=120, check=False)
    remove_mpi_shm_leftovers(output)
    errors = rank_lines(output, "error")
    assert set(errors) == {0}, output
    seconds, message = errors[0].split(" | ", 1)
    assert float(seconds) < 15 and "dpcore" in message and "rank 1" in message, output


@pytest.mark.mpi
def test_mismatches_through_torch_fail_on_every_rank_at_once():
    """Issue 27 (tests/scripts/torch_mismatch.py): broadcast and all_gather_into_tensor of
    tensors of one byte size but different dtypes are a CommError on every rank (the header
    carries the dtype and element count, not bytes; bool and int16 too, which dpcore moves but
    does not reduce); an async call's error through its future is
    one line that carries dpcore's message (torch words it; Work.wait() raises the CommError
    itself); new_group with rank lists that differ between ranks fails where they differ.
    Issue 24: all_to_all_single splits that disagree, sparse tensors of different shapes, and a
    send against a recv of another dtype are a CommError on every rank taking part."""
    output = run_ok("torch_mismatch.py", 3, env={"DPCORE_TIMEOUT": "5"}, timeout=120)
    for case in ("splits", "sparse", "p2p"):
        lines = rank_lines(output, case)
        assert set(lines) == {0, 1, 2}, output
        for rank, line in lines.items():
            seconds, kind, _, message = line.split(" | ")
            if case == "p2p" and rank == 2:
                assert kind == "none", output
                continue
            assert kind == "CommError" and float(seconds) < 5, output
            assert {"splits": "all_to_all", "sparse": "sparse all_reduce",
                    "p2p": "rank"}[case] in message, output
    rank_0s = {"bytes_broadcast": "float32", "bytes_gather": "float64", "bytes_bool": "bool",
               "bytes_int16": "int16"}
    for case in (*rank_0s, "future", "members"):
        lines = rank_lines(output, case)
        assert set(lines) == {0, 1, 2}, output
        for rank, line in lines.items():
            seconds, kind, lines, message = line.split(" | ")
            assert float(seconds) < 2, output
            if case.startswith("bytes"):
                assert kind == "CommError" and "mismatch" in message, output
                assert f"dtype={rank_0s[case]}" in message, output
            elif case == "future":
                assert kind == "RuntimeError" and lines == "1", output
                assert "CommError: dpcore all_reduce #1" in message and "At:" not in message
            elif rank == 2:
                assert kind == "CommError" and "has [1, 2]" in message, output
                assert "global rank 1 has [0, 1]" in message, output
            else:  # ranks 0 and 1 agree on [0, 1]: their group works
                assert kind == "none", output
