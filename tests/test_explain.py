"""dpcore.explain: every schedule, for n = 1..8, counts each rank's input once per chunk, ends with
every rank holding what it should, and costs what dpcore.cost says."""
import pytest

from dpcore.cost import ALGORITHMS, COLLECTIVES, cost
from dpcore.cost.formulas import algorithms
from dpcore import collectives
from dpcore.explain import ScheduleError, Simulation, Step, Transfer, simulate
from dpcore.explain import schedules
from dpcore.explain.__main__ import main
from dpcore.explain.render import render
from mpi_helpers import run_python

RANKS = range(1, 9)


def local_sizes(n):
    return [k for k in range(1, n + 1) if n % k == 0]


@pytest.mark.parametrize("n", RANKS)
@pytest.mark.parametrize("algo", ALGORITHMS)
@pytest.mark.parametrize("coll", COLLECTIVES)
def test_every_schedule_completes(coll, algo, n):
    if algo not in algorithms(coll):
        with pytest.raises(ValueError, match=f"{algo} does not run {coll}; its algorithms: "):
            simulate(coll, algo, n)
        return
    roots = range(n) if collectives.get(coll).rooted else [0]
    sizes = local_sizes(n) if algo == "hierarchical" else [None]
    everyone = frozenset(range(n))
    for root in roots:
        for k in sizes:
            sim = simulate(coll, algo, n, root=root, local_size=k)  # check() ran inside
            final = sim.states[-1] if sim.states else sim.initial
            for r in range(n):
                held = final[r]
                if coll == "all_reduce":
                    assert all(c == everyone for c in held)
                elif coll == "reduce_scatter":
                    assert held[r] == everyone
                elif coll == "all_gather":
                    assert held == [frozenset([c]) for c in range(n)]
                elif coll == "reduce" and r == root:
                    assert all(c == everyone for c in held)
                elif coll == "gather" and r == root:
                    assert held == [frozenset([c]) for c in range(n)]
                elif coll == "scatter":
                    assert held[r] == frozenset([root])
                elif coll == "all_to_all":
                    assert [held[p * n + r] for p in range(n)] == \
                        [frozenset([p]) for p in range(n)]
                elif coll == "broadcast":
                    assert held == [frozenset([root])] * len(held)
            if coll in ("all_reduce", "reduce_scatter", "reduce") and n > 1:
                # a chunk's n inputs take at least n-1 additions somewhere
                assert min(sim.reductions) >= n - 1


@pytest.mark.parametrize("n", RANKS)
def test_ring_reduces_every_chunk_exactly_once(n):
    # n-1 additions per chunk in all: each chunk is summed once, on its way around the ring,
    # then only copied
    for coll in ("all_reduce", "reduce_scatter"):
        assert simulate(coll, "ring", n).reductions == [n - 1 if n > 1 else 0] * n


@pytest.mark.parametrize("n", range(2, 9))
def test_ring_follows_ring_h(n):
    # ring.h: at reduce-scatter step k rank r sends chunk r-k-1; all-gather step k sends r-k
    sim = simulate("all_reduce", "ring", n)
    assert len(sim.steps) == 2 * (n - 1) and all(len(s.transfers) == n for s in sim.steps)
    for k, step in enumerate(sim.steps):
        for t in step.transfers:
            r = t.src
            want = (r - k - 1) % n if k < n - 1 else (r - (k - (n - 1))) % n
            assert t.dst == (r + 1) % n and t.pieces == (want,)
            assert t.reduce == (k < n - 1)


@pytest.mark.parametrize("coll", COLLECTIVES)
def test_ring_trace_matches_python_formulas(coll):
    def key(steps):
        return [sorted((t.src, t.dst, t.pieces, t.reduce) for t in s.transfers) for s in steps]

    if "ring" not in algorithms(coll):
        return
    for n in range(2, 9):
        for root in range(n) if collectives.get(coll).rooted else [0]:
            assert key(schedules.ring_from_trace(coll, n, root, 3)) == \
                key(schedules.ring_python(coll, n, root, 3))


@pytest.mark.parametrize("n", RANKS)
@pytest.mark.parametrize("algo", ALGORITHMS)
@pytest.mark.parametrize("coll", COLLECTIVES)
def test_simulated_cost_is_the_formula(coll, algo, n):
    # 840 elements per rank split evenly for every n <= 8; broadcast chains use n segments
    if algo not in algorithms(coll):
        with pytest.raises(ValueError, match=f"{algo} does not run {coll}"):
            cost(coll, algo, 1000, n, local_size=1)
        return
    sim = simulate(coll, algo, n, count=840 * n)
    S = 840 * n * 4
    want = cost(coll, algo, S, n, local_size=sim.local_size, segment=S / n)
    got = sim.cost
    for field in ("steps", "nbytes", "reduced", "inter_steps", "inter_nbytes"):
        assert getattr(got, field) == pytest.approx(getattr(want, field)), field


def test_uneven_and_tiny_counts():
    for count in (0, 1, 5, 1001):
        for algo in ALGORITHMS:
            sim = simulate("all_reduce", algo, 5, count=count, local_size=5)
            assert sum(sim.piece_bytes) == 4 * count


def test_double_counting_is_caught():
    n = 2
    start = {r: [frozenset([r])] * n for r in range(n)}
    goal = {r: [frozenset(range(n))] * n for r in range(n)}
    twice = [Step([Transfer(0, 1, (0,), True)], "add"), Step([Transfer(0, 1, (0,), True)], "again")]
    with pytest.raises(ScheduleError, match="twice"):
        Simulation("all_reduce", "test", n, [4, 4], "chunk", twice, start, goal).run()
    short = [Step([Transfer(0, 1, (0, 1), True)], "half")]
    with pytest.raises(ScheduleError, match="rank 0 ends"):
        Simulation("all_reduce", "test", n, [4, 4], "chunk", short, start, goal).run().check()
    empty = {0: [frozenset([0]), None], 1: [None, None]}
    with pytest.raises(ScheduleError, match="does not hold"):
        Simulation("all_gather", "test", n, [4, 4], "chunk",
                   [Step([Transfer(0, 1, (1,), False)], "x")], empty, goal).run()


def test_render_tells_the_story():
    text = render(simulate("all_reduce", "ring", 4, count=1 << 20))
    assert "step 6 of 6: all-gather" in text and "c3 -> r1" in text
    assert "counted exactly once" in text and "the same." in text
    assert "2(n-1) alpha" in text  # the derivation from dpcore.cost.formulas


@pytest.mark.parametrize("args", [
    ["all_reduce", "--ranks", "4"],
    ["reduce_scatter", "--ranks", "5", "--algo", "recursive_doubling"],
    ["all_gather", "--ranks", "3", "--algo", "binary_tree", "--count", "7"],
    ["broadcast", "--ranks", "6", "--algo", "hierarchical", "--root", "4"],
    ["all_reduce", "--ranks", "4", "--algo", "one_shot"],
    ["reduce", "--ranks", "4", "--root", "2"],
    ["gather", "--ranks", "5", "--algo", "direct", "--count", "11", "--root", "3"],
    ["scatter", "--ranks", "4", "--algo", "recursive_doubling", "--root", "1"],
    ["all_to_all", "--ranks", "3", "--algo", "one_shot"],
])
def test_cli(capsys, args):
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "checked" in out and "summary" in out


def test_cli_says_what_point_to_point_costs(capsys):
    assert main(["sendrecv", "--ranks", "2", "--count", "256"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "T = alpha + S beta" in out and "1 alpha + 1.02 KB beta" in out


def test_cli_refuses_an_algorithm_that_does_not_run_the_collective(capsys):
    with pytest.raises(SystemExit) as refused:
        main(["all_to_all", "--algo", "ring"])
    err = capsys.readouterr().err
    assert refused.value.code == 2 and "ring does not run all_to_all; its algorithms: " \
        "one_shot, direct" in err


def test_cli_refuses_ranks_that_do_not_split_into_nodes(capsys):
    with pytest.raises(SystemExit) as refused:
        main(["all_reduce", "--ranks", "6", "--algo", "hierarchical", "--local-size", "4"])
    assert refused.value.code == 2 and "do not split" in capsys.readouterr().err


def test_cli_runs_as_a_command(capsys):
    """`python -m dpcore.explain` itself, once: what it prints is what main() prints."""
    args = ["all_gather", "--ranks", "3", "--algo", "ring", "--count", "9"]
    _, output = run_python(["-m", "dpcore.explain", *args])
    assert main(args) == 0
    assert output == capsys.readouterr().out and "summary" in output


def test_plot_draws_the_steps(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    png = tmp_path / "ring.png"
    assert main(["all_reduce", "--ranks", "3", "--plot", str(png)]) == 0
    assert "summary" in capsys.readouterr().out  # the text as well
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_legend_names_ranks_the_run_has(capsys):
    for n, example in [(2, '"1" = rank 1\'s alone'), (3, '"02" = ranks 0 and 2 added up'),
                       (4, '"013" = ranks 0, 1 and 3 added up')]:
        main(["all_reduce", "--ranks", str(n)])
        assert example in " ".join(capsys.readouterr().out.split()), n


def test_a_closed_pipe_is_not_an_error():
    import subprocess
    import sys

    done = subprocess.run(f"{sys.executable} -m dpcore.explain broadcast --ranks 3 | head -1",
                          shell=True, capture_output=True, text=True, timeout=120)
    assert done.stdout.startswith("broadcast, ring, 3 ranks"), done
    assert "Error" not in done.stderr, done.stderr


@pytest.mark.parametrize("args, why", [
    (["all_reduce", "--dtype", "banana"], "banana"),
    (["all_reduce", "--count", "-5"], "-5"),
    (["all_reduce", "--ranks", "512"], "512"),
])
def test_cli_refuses_what_it_cannot_draw(capsys, args, why):
    with pytest.raises(SystemExit) as refused:
        main(args)
    err = capsys.readouterr().err
    assert refused.value.code == 2 and why in err and "Traceback" not in err, err
