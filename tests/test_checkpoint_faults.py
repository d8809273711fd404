"""Checkpoints load all or nothing, and a failed save or load fails on every rank.

Each case damages a checkpoint (or the place a save goes) in one way; every rank must raise the
same clear ValueError, none may have changed its parameters or optimizer state, and none may be
left waiting in a collective (each trains one more step afterwards). The damage is done to the
files of the last writer, which rank 0 does not read at stages 1-3, so a check on the reading rank
alone would leave the others loading. Cases marked sealed rewrite the manifest's checksums to
match the damage: the check of the contents themselves must catch it. tests/scripts/ckpt_faults.py
says what each case does.
"""
import re

import pytest

from dpcore.parallel import checkpoint
from mpi_helpers import rank_lines, run_script

# A rank left waiting would raise CommError after 20 s: well before the 90 s the job may take.
ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "DPCORE_TIMEOUT": "20"}

# case -> words the error must contain ({w}: the last writer's rank)
CASES = {
    "zero_byte": ["rank{w}.exp_avg.npy"],
    "zero_byte_sealed": ["rank{w}.exp_avg.npy"],
    "string_step": ["step", "'2'"],
    "other_optimizer": ["AdamW", "SGD"],
    "flipped_bit": ["rank{w}.params.npy", "checksum"],
    "nan_params": ["rank{w}.params.npy", "finite"],
    "long_array": ["rank{w}.exp_avg_sq.npy", "elements"],
    "latest_absolute": ["latest"],
    "latest_parent": ["latest"],
    "latest_symlink": ["latest", "symbolic link"],
    "save_planted_link": ["v-planted", "symbolic link"],
    "save_fails": ["rank {w}", "No space left on device"],
}


def run_case(tmp_path, case, n, stage):
    _, out = run_script("ckpt_faults.py", n, case, tmp_path, stage, env=ENV, timeout=90)
    writer = n - 1 if stage > 0 else 0
    raised = rank_lines(out, "raised")
    assert set(raised) == set(range(n)), f"not every rank raised; output:\n{out}"
    assert len(set(raised.values())) == 1, f"the ranks raised different errors:\n{out}"
    for r, line in raised.items():
        assert line.startswith("ValueError: "), f"rank {r}: {line}\n{out}"
        for word in CASES[case]:
            assert word.format(w=writer) in line, f"rank {r}: no {word!r} in {line}"
    assert rank_lines(out, "state") == {r: "unchanged" for r in range(n)}, out
    ok = {int(r) for r in re.findall(r"^rank (\d+): ok$", out, re.MULTILINE)}
    assert ok == set(range(n)), f"a rank did not train on after the failure:\n{out}"
    return out


@pytest.mark.mpi
@pytest.mark.parametrize("case", [c for c in CASES if not c.startswith("save_")])
def test_a_damaged_checkpoint_loads_on_no_rank(tmp_path, case):
    run_case(tmp_path, case, 2, 1)


@pytest.mark.mpi
@pytest.mark.parametrize("case", ["save_planted_link", "save_fails"])
def test_a_save_that_fails_on_one_rank_fails_on_every_rank(tmp_path, case):
    ck = tmp_path / "ckpt"
    run_case(tmp_path, case, 2, 1)
    # the checkpoint before the failed save is still the latest, whole
    assert checkpoint.consolidate(ck)["optimizer"]["step"] == 2
    assert not any(p.name.startswith(".tmp-") for p in ck.iterdir()), sorted(ck.iterdir())


@pytest.mark.mpi
@pytest.mark.parametrize("case, stage", [("flipped_bit", 3), ("save_fails", 2),
                                         ("zero_byte", 0)])
def test_three_ranks_and_other_stages(tmp_path, case, stage):
    run_case(tmp_path, case, 3, stage)
