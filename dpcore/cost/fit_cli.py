"""`python -m dpcore.cost fit`: sweep, fit, show the fit beside the measurements, save."""
import os
import platform
import socket
import time

from . import plots
from .choose import crossover, predict
from .fit import fit_per_algorithm, sweep
from .params import default_path, save
from .units import fmt_bytes, fmt_time


def run_fit(path, quick=False, plot=None):
    import dpcore

    with dpcore.init() as comm:
        if comm.size < 2:
            print("dpcore.cost fit: one rank has nothing to communicate; run it as\n"
                  "  mpiexec -n 2 python -m dpcore.cost fit")
            return 2
        if comm.rank == 0:
            print(f"dpcore.cost fit: timing every algorithm on {comm.size} ranks, "
                  f"{5 if quick else 11} rounds over all sizes (at most about "
                  f"{5 if quick else 30} s of timing)...", flush=True)
        t0 = time.perf_counter()

        def progress(k, rounds):
            if comm.rank == 0:
                print(f"  round {k} of {rounds} done, {time.perf_counter() - t0:.0f} s",
                      flush=True)

        samples = sweep(comm, quick, on_round=progress)
        elapsed = time.perf_counter() - t0
        if comm.rank != 0:
            return 0
        per_algo = fit_per_algorithm(samples)
        print(f"dpcore.cost fit: {comm.size} ranks, transport {comm.transport}, float32 sum, "
              f"median of timed loops, slowest rank ({elapsed:.1f} s)\n")
        print(f"{'algorithm':<10}{'collective':<12}{'size':>10}{'measured':>11}{'model':>11}"
              f"{'error':>8}")
        for s in samples:
            model = predict(s.coll, s.algo, s.nbytes, s.n, per_algo)
            print(f"{s.algo:<10}{s.coll:<12}{fmt_bytes(s.nbytes, binary=True):>10}"
                  f"{fmt_time(s.seconds):>11}{fmt_time(model):>11}"
                  f"{(model - s.seconds) / s.seconds:>+8.0%}")
        print("\nfitted (relative least squares; time = overhead + alpha*steps + beta*bytes + "
              "gamma*reduced bytes,\n  beta_mem instead of beta for the share S/(S+C) of a "
              "buffer of S bytes that misses a cache of C):")
        for key, p in per_algo.items():
            cache = "" if p.cache_bytes is None else \
                f"  beta_mem {p.beta_mem * 1e9:.4f} ns/B  C {fmt_bytes(p.cache_bytes, True)}"
            print(f"  {key:<21} overhead {fmt_time(p.overhead):>8}  alpha "
                  f"{fmt_time(p.alpha):>8}  beta {p.beta * 1e9:.4f} ns/B  gamma "
                  f"{p.gamma * 1e9:.4f} ns/B{cache}")
        print("  (an algorithm alone: fitted on both collectives, which tells gamma from beta; "
              "algorithm/collective:\n  fitted on that collective alone, which predicts it, "
              "as in the table above and the bench's pred_us)")
        print(f"  (the ring's alpha and overhead are told apart only by all_gather's "
              f"{comm.size - 1} step{'s' * (comm.size > 2)} against all_reduce's "
              f"{2 * comm.size - 2}: fit at the rank count you predict for)")
        if {"one_shot", "ring"} <= set(per_algo):
            x = crossover("all_reduce", "one_shot", "ring", comm.size, per_algo)
            if x:
                small, large = ("one_shot", "ring") if predict(
                    "all_reduce", "one_shot", 1, comm.size, per_algo) < predict(
                    "all_reduce", "ring", 1, comm.size, per_algo) else ("ring", "one_shot")
                print(f"\nall_reduce on {comm.size} ranks: {small} is faster below "
                      f"{fmt_bytes(x, binary=True)}, {large} above (algo='auto' switches there "
                      "once this fit is saved; DPCORE_ONE_SHOT_MAX overrides it)")
        save(path, per_algo, ranks=comm.size, transport=comm.transport, dtype="float32",
             host=socket.gethostname(), python=platform.python_version(),
             created=time.strftime("%Y-%m-%dT%H:%M:%S"),
             samples=[list(s) for s in samples])
        print(f"saved to {os.path.abspath(path)}")
        if plot:
            plots.fit(plot, samples, lambda s: predict(s.coll, s.algo, s.nbytes, s.n, per_algo))
            print(f"plot: {plot}")
        if os.path.abspath(path) == os.path.abspath(default_path()):
            print(f"From now on algo='auto' on this machine chooses one_shot or the ring by this "
                  f"fit, in every program (training too); it says so where the ranks are not "
                  f"{comm.size}. Delete the file for the built-in rule.")
    return 0
