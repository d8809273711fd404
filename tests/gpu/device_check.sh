#!/usr/bin/env bash
# The CUDA path on a lent GPU machine, in one go (under 8 minutes on one H200): build there (no
# registry: no build isolation), then
#   1. the GPU unit tests (tests/gpu): the reduceCopy kernel against CuPy, the ring's schedule
#      computed on the device;
#   2. the collectives on CuPy arrays at 1, 2 and 4 ranks on the GPUs present (several ranks
#      share a GPU where there are fewer): the same script and vectors CI runs on the CPU
#      emulation, against NumPy exactly and bit for bit against the host path; once with 64 KiB
#      ring slots, so large calls take many rounds; direct on comm.alloc(device="cuda") buffers;
#   3. compute-sanitizer (memcheck, synccheck) on a 2-rank run;
#   4. the trainer's equivalence (one process against 2 ranks, every ZeRO stage) on CuPy;
#   5. the bench with the copy floor beside every row (NCCL too where a GPU per rank), and the
#      reduce kernel's bandwidth against CuPy's own add.
# Every step's output goes to stdout and to $OUT (or ./device_check.out) as a file of its own.
# Usage (from the repository root): bash tests/gpu/device_check.sh
set -uo pipefail
export PYTHONUNBUFFERED=1
out=${OUT:-device_check.out}
mkdir -p "$out"
status=0
step() {  # step NAME SECONDS COMMAND...: run with a time limit, keep the output, note failures
  local name=$1 limit=$2
  shift 2
  echo "=== $name"
  timeout -k 5 "$limit" "$@" 2>&1 | tee "$out/$name.txt" | tail -25
  local rc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] || { echo "=== $name FAILED (exit $rc)"; status=1; }
}
nvidia-smi -L | tee "$out/gpus.txt"
gpus=$(nvidia-smi -L | wc -l)
python3 -c "import cupy, numpy; print('cupy', cupy.__version__, 'numpy', numpy.__version__)"
step build 300 python3 -m pip install -q --no-build-isolation --no-deps -e .
python3 -c "import dpcore; print(dpcore.build_info())" || exit 1
scripts=tests/scripts
step gpu-tests 120 python3 -m pytest -q -p no:cacheprovider tests/gpu
for n in 1 2 4; do
  step "collectives-$n" 180 mpiexec -n "$n" env DEVICE=cupy python3 -m mpi4py \
    $scripts/device_collectives.py $([ "$n" = 2 ] && echo all || echo few)
done
step direct-2 120 mpiexec -n 2 env DEVICE=cupy python3 -m mpi4py $scripts/device_direct.py
step collectives-2-small-slots 120 mpiexec -n 2 env DEVICE=cupy DPCORE_SLOT_BYTES=65536 \
  python3 -m mpi4py $scripts/device_collectives.py few
for tool in memcheck synccheck; do
  step "sanitizer-$tool" 240 mpiexec -n 2 env DEVICE=cupy compute-sanitizer --tool "$tool" \
    --error-exitcode 9 python3 -m mpi4py $scripts/device_collectives.py few small
done
step trainer 240 python3 -m pytest -q -p no:cacheprovider tests/test_ddp.py tests/test_zero.py \
  -k cupy
for coll in all_reduce reduce_scatter all_gather; do
  step "bench-$coll" 240 mpiexec -n 2 python3 -m dpcore.bench "$coll" -b 8 -e 1G -f 4 \
    --device cuda --json "$out/bench-$coll.json"
done
[ "$gpus" -ge 2 ] || echo "one GPU: the 2 ranks above share it, and NCCL is left out"
step reduce-kernel 120 python3 tests/gpu/bench_cuda_reduce.py
exit $status
