"""DPCORE_TRACE writes one valid Chrome trace: a lane per rank, a span per collective (with what
ran: algorithm, dtype, op) and, for the ring, a span per step whose step numbers follow the
ring's schedule; and the trainer's forward, backward and step. The ranks stream their events as
they go, holding at most _C.TRACE_BATCH: a job killed mid-run leaves them up to its last
collective, which `python -m dpcore.trace merge` makes a trace of."""
import json

import pytest

from dpcore import _C
from mpi_helpers import rank_lines, remove_mpi_shm_leftovers, run_ok, run_python, run_script

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("n", [1, 3])
def test_trace_has_a_lane_per_rank_and_ring_steps(tmp_path, n):
    path = tmp_path / "trace.json"
    run_ok("trace_run.py", n, env={"DPCORE_TRACE": str(path)})
    events = json.loads(path.read_text())["traceEvents"]
    assert not list(tmp_path.glob("*.jsonl"))  # the ranks' files, merged, are removed
    spans = [e for e in events if e["ph"] == "X"]
    lanes = {e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert lanes == set(range(n))
    for rank in range(n):
        collectives = [e for e in spans if e["pid"] == rank and e["tid"] == 0]
        ran = [(e["name"], e["args"].get("algo"), e["args"].get("dtype"), e["args"].get("op"))
               for e in collectives[:3]]
        assert ran == [("all_reduce", "ring", "float32", "sum"),
                       ("all_reduce", "one_shot", "float32", "sum"),
                       ("broadcast", "ring", "float32", None)], ran
        training = [e["name"] for e in spans if e["pid"] == rank and e["tid"] == 2]
        assert training == ["forward", "backward", "step"]
        steps = [e for e in spans if e["pid"] == rank and e["tid"] == 1]
        if n == 1:
            assert steps == []  # one rank copies: no ring
            continue
        # The ring all-reduce (seq 1) runs 2n-1 verbs per round (its 2(n-1) hops: the first verb
        # only sends, the last only receives): send first, recv last, labelled 0 .. 2n-2.
        ring = [e for e in steps if e["args"]["seq"] == 1]
        verbs = 2 * n - 1
        assert len(ring) % verbs == 0
        assert [e["args"]["step"] for e in ring] == list(range(verbs)) * (len(ring) // verbs)
        assert ring[0]["name"] == "send" and ring[verbs - 1]["name"] == "recv"
        # The one-shot all-reduce (seq 2) has no steps; the broadcast chain (seq 3) one per round.
        assert not [e for e in steps if e["args"]["seq"] == 2]
        assert {e["args"]["step"] for e in steps if e["args"]["seq"] == 3} == {0}


@pytest.mark.parametrize("how, n", [("kill", 2), ("exit", 3)])
def test_a_killed_job_leaves_its_events_and_merge_makes_a_trace(tmp_path, how, n):
    path = tmp_path / "trace.json"
    status, output = run_script("trace_killed.py", n, how, check=False,
                                env={"DPCORE_TRACE": str(path), "DPCORE_SLOT_BYTES": "256"})
    remove_mpi_shm_leftovers(output)
    assert status != 0 and not path.exists(), output  # nothing ran at exit
    peaks = rank_lines(output, "peak")
    assert set(peaks) == set(range(n)), output
    assert all(0 < int(p) <= _C.TRACE_BATCH for p in peaks.values()), peaks  # memory bounded
    run_python(["-m", "dpcore.trace", "merge", path])
    assert len(list(tmp_path.glob("trace.rank*.jsonl"))) == n  # kept: merge only reads them
    events = json.loads(path.read_text())["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    for rank in range(n):
        collectives = [e["name"] for e in spans if e["pid"] == rank and e["tid"] == 0]
        # up to the last collective before the kill
        assert collectives == ["all_reduce"] * 4 + ["broadcast"], collectives
        assert [e["name"] for e in spans if e["pid"] == rank and e["tid"] == 2] == ["backward"]
        steps = [e for e in spans if e["pid"] == rank and e["tid"] == 1]
        assert sum(e["args"]["seq"] == 1 for e in steps) > _C.TRACE_BATCH  # streamed in batches
        assert {e["args"]["seq"] for e in steps} == {1, 5}
