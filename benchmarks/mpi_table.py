#!/usr/bin/env python3
"""Medians of several `dpcore.bench --compare mpi` runs, as the tables in benchmarks/results/:

    python benchmarks/mpi_table.py all_reduce                 # 3 runs on 2 ranks, 16 B - 256 MiB
    python benchmarks/mpi_table.py all_gather --ranks 4 --runs 5 -e 64M
    python benchmarks/mpi_table.py all_reduce --model cost.json   # adds pred_us and model_err%
    python benchmarks/mpi_table.py all_gather -R 1     # dpcore on comm.alloc buffers
    python benchmarks/mpi_table.py broadcast --one-buffer    # buffers allocated once, in huge pages

Each run is one mpiexec job (`--repeat 3`: ours and MPI's blocks alternate three times inside
it); a table row is the median over runs of each column, in place, with the algorithm auto ran
most often. ratio = MPI's time / ours, measured in the same run, so the machine's mood cancels.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections import Counter


def run_once(args, path):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    cmd = ["mpiexec", "-n", str(args.ranks), sys.executable, "-m", "dpcore.bench",
           args.collective, "-b", args.minbytes, "-e", args.maxbytes, "-f", "4",
           "--compare", "mpi", "--repeat", "3", "--json", path]
    cmd += ["--model", args.model] if args.model else []
    cmd += ["-R", str(args.register)] + (["--one-buffer"] if args.one_buffer else [])
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    with open(path) as f:
        return json.load(f)["rows"]


def size_text(nbytes):
    for unit, shift in (("M", 20), ("K", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift}{unit}"
    return str(nbytes)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("collective", choices=["all_reduce", "reduce_scatter", "all_gather",
                                          "broadcast"])
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("-b", "--minbytes", default="16")
    p.add_argument("-e", "--maxbytes", default="256M")
    p.add_argument("--model", default=None, help="fitted cost model (pred_us, model_err%%)")
    p.add_argument("-R", "--register", type=int, choices=[0, 1], default=0,
                   help="1: dpcore's buffers from comm.alloc (the bench's -R)")
    p.add_argument("--one-buffer", action="store_true",
                   help="the bench's --one-buffer: one allocation at -e's size, as nccl-tests")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        runs = [run_once(args, os.path.join(tmp, f"run{i}.json")) for i in range(args.runs)]
    columns = [("ip_time_us", "time_us", ".2f"), ("ip_busbw", "busbw", ".2f"),
               ("ip_mpi_time_us", "mpi_us", ".2f"), ("ip_mpi_busbw", "mpi_busbw", ".2f"),
               ("ip_ratio", "ratio", ".2f")]
    if args.model:
        columns += [("pred_us", "pred_us", ".2f"), ("model_err%", "err%", "+.0f")]
    print(f"{args.collective}, {args.ranks} ranks: in place, medians of {args.runs} runs "
          f"(each --repeat 3)" + (", dpcore on comm.alloc buffers (-R 1)" if args.register
                                  else "") + (", --one-buffer" if args.one_buffer else ""))
    print(f"{'size':>10} {'algo':>8} " + " ".join(f"{name:>9}" for _, name, _ in columns))
    for rows in zip(*runs):
        algo = Counter(r["algo_used"] for r in rows).most_common(1)[0][0]
        cells = []
        for key, _, spec in columns:
            values = [r[key] for r in rows if r.get(key) is not None]
            cells.append(format(statistics.median(values), spec) if values else "-")
        print(f"{size_text(rows[0]['size']):>10} {algo:>8} " +
              " ".join(f"{c:>9}" for c in cells), flush=True)


if __name__ == "__main__":
    main()
