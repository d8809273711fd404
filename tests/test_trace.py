"""DPCORE_TRACE writes one valid Chrome trace: a lane per rank, a span per collective (with what
ran: algorithm, dtype, op) and, for the ring, a span per step whose step numbers follow the
ring's schedule; and the trainer's forward, backward and step."""
import json

import pytest

from mpi_helpers import run_ok

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("n", [1, 3])
def test_trace_has_a_lane_per_rank_and_ring_steps(tmp_path, n):
    path = tmp_path / "trace.json"
    run_ok("trace_run.py", n, env={"DPCORE_TRACE": str(path)})
    events = json.loads(path.read_text())["traceEvents"]
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
