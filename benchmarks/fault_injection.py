#!/usr/bin/env python3
"""Fault injection: how long the survivors of a dead or stalled rank take to get their error.

    python benchmarks/fault_injection.py                        # 20 trials per cell
    python benchmarks/fault_injection.py --trials 3 --ranks 2,3 --transports mpi --timeout 10
    python benchmarks/fault_injection.py --detail --json faults.json

Run from the repository root, not under mpiexec: for every transport (shm; mpi:
DPCORE_TRANSPORT=mpi; nodes: DPCORE_NODE_SIZE=2 virtual nodes, which at 2 ranks is one node, so
shared memory) and rank count, each trial launches
`mpiexec -disable-auto-cleanup -n K python fault_injection.py child worker ...`. The workload
is dpcore.init(), comm.alloc(), a few collectives of random kinds and sizes, one training step of
a DataParallel engine (ZeRO stage 1) and engine.save(). One random rank faults at one random
point (init, alloc, collective #k, save) with one random fault: SIGKILL, SIGSTOP (never
resumed), an uncaught exception, or sys.exit(3); a signal comes either right before the rank's
call or, from a timer thread, up to 20 ms into it.

The faulting rank writes the fault's time.time() to a file; each survivor writes the time of
its error (any exception) and the error itself. A survivor that has not raised --limit seconds
after the fault (default DPCORE_TIMEOUT + 10) counts as a hang, and the trial's whole session
(mpiexec, the ranks) is killed. Afterwards the /dev/shm/dpcore-* segments the job's ranks made
and left are counted and removed (MPICH's own segments too, uncounted: no rank reaches
MPI_Finalize).

The table, per transport and rank count: trials, survivors, how many raised, the median and
largest seconds from the fault to a survivor's error, hangs, and dpcore segments left in
/dev/shm. With --detail, a line per trial.
"""
import argparse
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve()
DEV_SHM = Path("/dev/shm")
TRANSPORTS = {"shm": {}, "mpi": {"DPCORE_TRANSPORT": "mpi"}, "nodes": {"DPCORE_NODE_SIZE": "2"}}
FAULTS = ("kill", "stop", "raise", "exit")
COLLECTIVES = 6  # collective points #0..#5
# pip's mpich puts mpiexec beside the interpreter
MPIEXEC = next((str(p) for p in [Path(sys.executable).parent / "mpiexec"] if p.exists()),
               "mpiexec")


# -- the harness ----------------------------------------------------------------------------

def main():
    args = parse_args()
    rng = random.Random(args.seed)
    results = []
    for transport in args.transports:
        for ranks in args.ranks:
            for trial in range(args.trials):
                plan = make_plan(rng, ranks)
                result = run_trial(args, transport, ranks, plan)
                results.append(result)
                if args.detail:
                    print(detail_line(result), flush=True)
    print_table(results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=20, help="per transport and rank count")
    p.add_argument("--ranks", default="2,3,4", help="rank counts, e.g. 2,3,4")
    p.add_argument("--transports", default="shm,mpi,nodes", help="of shm, mpi, nodes")
    p.add_argument("--timeout", type=float, default=10, help="DPCORE_TIMEOUT (seconds)")
    p.add_argument("--limit", type=float, default=None,
                   help="seconds after the fault before a survivor counts as hung "
                        "(default: timeout + 10)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--detail", action="store_true", help="a line per trial")
    p.add_argument("--json", help="write every trial's result here")
    args = p.parse_args()
    args.ranks = [int(k) for k in args.ranks.split(",")]
    args.transports = args.transports.split(",")
    unknown = set(args.transports) - set(TRANSPORTS)
    if unknown:
        p.error(f"unknown transports {sorted(unknown)}; choose from {', '.join(TRANSPORTS)}")
    if args.limit is None:
        args.limit = args.timeout + 10
    return args


def make_plan(rng, ranks):
    """Who faults, where, how, and (for a signal) how many seconds into the call, or None."""
    point = rng.choice(["init", "alloc", "collective", "save"])
    if point == "collective":
        point = f"collective {rng.randrange(COLLECTIVES)}"
    fault = rng.choice(FAULTS)
    delay = None
    if fault in ("kill", "stop") and rng.random() < 0.5:
        delay = rng.uniform(0, 0.02)
    return {"rank": rng.randrange(ranks), "point": point, "fault": fault, "delay": delay,
            "seed": rng.randrange(1 << 30)}


def run_trial(args, transport, ranks, plan):
    """Launch one faulty job; wait for every survivor's report, or the limit; clean up."""
    with tempfile.TemporaryDirectory(prefix="dpcore-faults-") as tmp:
        before = dpcore_segments()
        env = dict(os.environ, DPCORE_TIMEOUT=str(args.timeout), OMP_NUM_THREADS="1",
                   OPENBLAS_NUM_THREADS="1", **TRANSPORTS[transport])
        cmd = [MPIEXEC, "-disable-auto-cleanup", "-n", str(ranks), sys.executable, str(HERE),
               "child", sys.executable, str(HERE), "worker", tmp, json.dumps(plan)]
        with open(os.path.join(tmp, "output"), "w") as log:
            job = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                   start_new_session=True)
            survivors = [r for r in range(ranks) if r != plan["rank"]]
            wait_for_reports(job, tmp, survivors, args.limit)
            kill_session(job.pid)
            job.wait()
        reports = {r: read_json(os.path.join(tmp, f"report.{r}")) for r in survivors}
        fault_time = read_json(os.path.join(tmp, "fault"))
        pids = {read_json(os.path.join(tmp, f"pid.{r}")) for r in range(ranks)}
        leftovers = remove_leftovers(tmp, ranks, before, pids)
        with open(os.path.join(tmp, "output")) as f:
            output = f.read()
    return {"transport": transport, "ranks": ranks, "plan": plan, "fault_time": fault_time,
            "reports": {str(r): v for r, v in reports.items()}, "leftovers": leftovers,
            "output_tail": output[-2000:]}


def wait_for_reports(job, tmp, survivors, limit):
    """Until every survivor has reported, the job has ended, or `limit` seconds have passed
    since the fault (or since the start plus 60 s for the job to get there)."""
    start = time.monotonic()
    while job.poll() is None:
        if all(os.path.exists(os.path.join(tmp, f"report.{r}")) for r in survivors):
            return
        fault = read_json(os.path.join(tmp, "fault"))
        waited = time.time() - fault if fault is not None else time.monotonic() - start - 60
        if waited > limit:
            return
        time.sleep(0.05)


def kill_session(sid):
    """SIGKILL every process of session `sid`: mpiexec, its proxy and the ranks."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            if int(stat[stat.rindex(")") + 2:].split()[3]) == sid:
                os.kill(int(entry.name), signal.SIGKILL)
        except (OSError, ValueError):
            pass  # gone meanwhile, or not ours


def dpcore_segments():
    return {p.name for p in DEV_SHM.glob("dpcore-*")}


def remove_leftovers(tmp, ranks, before, pids):
    """Remove what the job left in /dev/shm; return the names of dpcore's (those a rank of this
    job created: dpcore-PID-..., since other jobs may run meanwhile)."""
    time.sleep(0.2)  # the killed ranks' mappings go with them
    left = sorted(n for n in dpcore_segments() - before if int(n.split("-")[1]) in pids)
    for r in range(ranks):
        for name in (read_json(os.path.join(tmp, f"mpishm.{r}")) or []):
            unlink(DEV_SHM / name)
    for name in left:
        unlink(DEV_SHM / name)
    return left


def unlink(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (FileNotFoundError, ValueError):
        return None


# -- the report -------------------------------------------------------------------------------

def outcome(result):
    """(seconds from the fault to each survivor's error, hangs, survivors that finished)."""
    seconds, hangs, finished = [], 0, 0
    for report in result["reports"].values():
        if report is None:
            hangs += 1
        elif report.get("error") is None:
            finished += 1
        elif result["fault_time"] is not None:
            seconds.append(report["time"] - result["fault_time"])
    return seconds, hangs, finished


def print_table(results):
    print(f"{'transport':>9} {'ranks':>5} {'trials':>6} {'survivors':>9} {'raised':>6} "
          f"{'median_s':>8} {'max_s':>7} {'hangs':>5} {'finished':>8} {'shm_left':>8}")
    cells = {}
    for r in results:
        cells.setdefault((r["transport"], r["ranks"]), []).append(r)
    for (transport, ranks), trials in cells.items():
        seconds, hangs, finished, survivors, left = [], 0, 0, 0, 0
        for t in trials:
            s, h, f = outcome(t)
            seconds += s
            hangs += h
            finished += f
            survivors += len(t["reports"])
            left += len(t["leftovers"])
        median = f"{statistics.median(seconds):.2f}" if seconds else "-"
        largest = f"{max(seconds):.2f}" if seconds else "-"
        print(f"{transport:>9} {ranks:>5} {len(trials):>6} {survivors:>9} {len(seconds):>6} "
              f"{median:>8} {largest:>7} {hangs:>5} {finished:>8} {left:>8}")


def detail_line(result):
    plan = result["plan"]
    delay = "" if plan["delay"] is None else f" +{plan['delay'] * 1000:.0f}ms"
    seconds, hangs, finished = outcome(result)
    shown = " ".join(f"{s:.2f}" for s in seconds) or "-"
    errors = {(v.get("error") or "")[:90] for v in result["reports"].values() if v}
    return (f"{result['transport']:>5} n={result['ranks']} rank {plan['rank']} "
            f"{plan['fault']:>5} at {plan['point']}{delay}: raised after {shown} s; "
            f"hangs {hangs}, finished {finished}, shm left {len(result['leftovers'])}"
            + "".join(f"\n        {e}" for e in sorted(errors) if e))


# -- inside the job ---------------------------------------------------------------------------

def child(argv):
    """Run argv as a child and exit with its status (a signal as 128 + n). Hydra kills every
    rank as soon as one of its direct children dies by a signal, even with -disable-auto-cleanup,
    and tells the others of a dead rank with SIGUSR1, whose default action is to terminate:
    ignored here and, inherited, in the rank (tests/scripts/as_child.py does the same)."""
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    status = subprocess.call(argv, close_fds=False)  # the rank needs hydra's PMI socket
    sys.exit(status if status >= 0 else 128 - status)


def worker(tmp, plan_json):
    """One rank's workload; the planned rank faults at the planned point."""
    from mpi4py import MPI

    plan = json.loads(plan_json)
    rank = MPI.COMM_WORLD.Get_rank()
    write_json(os.path.join(tmp, f"pid.{rank}"), os.getpid())
    with open("/proc/self/maps") as f:
        mapped = set(re.findall(r"/dev/shm/(mpich_shm\S*)", f.read()))
    write_json(os.path.join(tmp, f"mpishm.{rank}"), sorted(mapped))

    def at(point):
        if rank == plan["rank"] and plan["point"] == point:
            inject(tmp, plan)

    try:
        workload(plan, at, tmp)
        report = {"time": time.time(), "error": None}
        if _timer is not None:
            _timer.join()  # the call ended first: the fault still comes, before the rank leaves
    except Exception as e:  # noqa: BLE001 (whatever a survivor gets is the result)
        if _faulted:
            raise
        report = {"time": time.time(), "error": f"{type(e).__name__}: {' '.join(str(e).split())}"}
    write_json(os.path.join(tmp, f"report.{rank}"), report)
    os._exit(0)  # MPI_Finalize would wait for the faulty rank


def workload(plan, at, tmp):
    import numpy as np

    import dpcore
    import dpcore.nn as nn
    import dpcore.optim as optim
    from dpcore import Tensor
    from dpcore.parallel import DataParallel

    rng = random.Random(plan["seed"])  # the same on every rank: the same calls
    at("init")
    comm = dpcore.init()
    at("alloc")
    buf = comm.alloc(1 << 16, np.float32)
    for k in range(COLLECTIVES):
        n = rng.choice([1, 100, 10_000, 1 << 18, 1 << 20])
        kind = rng.choice(["all_reduce", "reduce_scatter", "all_gather", "broadcast", "barrier"])
        x = buf[:n] if n <= buf.size and rng.random() < 0.5 else np.ones(n, np.float32)
        at(f"collective {k}")
        if kind == "all_reduce":
            comm.all_reduce(x)
        elif kind == "reduce_scatter":
            comm.reduce_scatter(x)
        elif kind == "all_gather":
            comm.all_gather(x[:max(1, n // comm.size)])
        elif kind == "broadcast":
            comm.broadcast(x, root=rng.randrange(comm.size))
        else:
            comm.barrier()
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    engine = DataParallel(model, comm, zero_stage=1, optimizer=optim.SGD, lr=0.1)
    x = np.random.default_rng(comm.rank).standard_normal((8, 16)).astype(np.float32)
    loss = nn.functional.cross_entropy(engine(Tensor(x)), np.arange(8) % 4)
    loss.backward()
    engine.step()
    at("save")
    engine.save(os.path.join(tmp, "ckpt"))
    comm.barrier()


def inject(tmp, plan):
    """The fault: now, or `delay` seconds later from a timer (for a signal: into the call)."""
    global _faulted, _timer

    def fault():
        write_json(os.path.join(tmp, "fault"), time.time())
        if plan["fault"] == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        elif plan["fault"] == "stop":
            os.kill(os.getpid(), signal.SIGSTOP)
        elif plan["fault"] == "raise":
            raise RuntimeError("injected fault")  # worker() lets it through: uncaught
        else:
            sys.exit(3)

    _faulted = True
    if plan["delay"] is not None:
        _timer = threading.Timer(plan["delay"], fault)
        _timer.start()
    else:
        fault()


_faulted = False  # this rank has injected its fault: its exceptions are not a survivor's
_timer = None     # the fault to come, from a timer thread


def write_json(path, value):
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(value, f)
    os.replace(tmp, path)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        child(sys.argv[2:])
    elif len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(sys.argv[2], sys.argv[3])
    else:
        main()
