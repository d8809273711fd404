#!/usr/bin/env bash
# The CUDA path on a lent GPU machine, in one call of at most 10 minutes: one global deadline
# (DEADLINE seconds, 540 by default) that every step's limit is cut to; a step that cannot get
# its least time is skipped, not started. Each step runs in a session of its own and, past its
# limit, the whole session is SIGKILLed: mpiexec gives every rank its own process group, so
# killing mpiexec alone would leave ranks holding the GPU.
#
# Gates first, so a machine that cannot run the CUDA path says so instead of passing on skipped
# tests: a working mpiexec (the image has mpi4py but no MPI runtime: MPICH is installed from the
# carried wheel folder .whl, see below), a build of dpcore with CUDA, CuPy, and a GPU.
# Then, in order of what they tell:
#   gpu-tests     tests/gpu: the reduceCopy kernel against CuPy, the ring's schedule on the device
#   collectives-2 the collectives on CuPy arrays, 2 ranks: exact, and bit for bit the host path's
#   direct-2      direct on comm.alloc(device="cuda") buffers written just before the call
#   registered-2  direct on ordinary CuPy buffers registered with comm.register (CUDA IPC of
#                 the pool's allocations, mapped once)
#   collectives-4 4 ranks sharing the GPUs present
#   sanitizer     compute-sanitizer memcheck on a 2-rank run
#   bench         all_reduce from 8 B to 1 GiB beside the device's copy floor, and one size that
#                 is no multiple of 16 elements; then direct on registered buffers (-R 1) from
#                 1 MiB to 1 GiB
#   trainer       the trainer's equivalence on CuPy
#   torch-cuda    the torch backend on CUDA tensors (float16, bfloat16, float32; a side stream;
#                 DDP, whose hooks run on autograd's thread) against gloo, bit for bit
#   peer-killed   rank 1 SIGKILLed in ring all_reduces on CuPy arrays: rank 0 gets a CommError
#                 naming it, within seconds
# The GPU's name, driver, compute mode and MIG mode are recorded first. Logs go into one file,
# $OUT/device_check.log (and the bench's JSON beside it): at most 8 files come back.
#
# Before the call, once, in the repository root (see the device tool's notes):
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
#     --platform manylinux2014_x86_64 -d .whl mpich
# and carry .whl. Usage (from the repository root): bash tests/gpu/device_check.sh
set -uo pipefail
export PYTHONUNBUFFERED=1
out=${OUT:-device_check.out}
mkdir -p "$out"
log="$out/device_check.log"
: >"$log"
start=$SECONDS
deadline=${DEADLINE:-540}
status=0
summary=()

say() { echo "$*" | tee -a "$log"; }

kill_session() {  # SIGKILL every process of session $1 (mpiexec, its proxy, the ranks)
  local sid=$1 pid
  for pid in $(ps -eo pid=,sid= | awk -v s="$sid" '$2 == s {print $1}'); do
    kill -9 "$pid" 2>/dev/null
  done
}

step() {  # step NAME LEAST MOST COMMAND...: at most MOST seconds, skipped with under LEAST left
  local name=$1 least=$2 most=$3
  shift 3
  local left=$((deadline - (SECONDS - start)))
  if [ "$left" -lt "$least" ]; then
    say "=== $name SKIPPED (${left} s left of the deadline, it needs $least)"
    summary+=("$name skipped")
    return
  fi
  local limit=$((most < left ? most : left))
  say "=== $name (limit $limit s)"
  setsid "$@" >>"$log" 2>&1 </dev/null &
  local sid=$! ticks=0
  while kill -0 "$sid" 2>/dev/null; do
    if [ "$ticks" -ge $((limit * 10)) ]; then
      kill_session "$sid"
      say "=== $name TIMED OUT after $limit s: its session was killed"
      summary+=("$name timed-out")
      status=1
      wait "$sid" 2>/dev/null
      return
    fi
    sleep 0.1
    ticks=$((ticks + 1))
  done
  wait "$sid"
  local rc=$?
  if [ "$rc" -eq 0 ]; then
    summary+=("$name ok")
  else
    say "=== $name FAILED (exit $rc)"
    summary+=("$name FAILED")
    status=1
  fi
}

gate() {  # gate WHAT COMMAND...: the steps after it make no sense without it
  local what=$1
  shift
  say "=== gate: $what"
  if ! "$@" >>"$log" 2>&1; then
    say "=== GATE FAILED: $what"
    finish 2
  fi
}

finish() {
  say "=== summary ($((SECONDS - start)) s)"
  local line
  for line in "${summary[@]}"; do say "$line"; done
  exit "${1:-$status}"
}

say "=== the GPU"
nvidia-smi --query-gpu=name,driver_version,compute_mode,mig.mode.current,memory.total \
  --format=csv 2>&1 | tee -a "$log"
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)

if ! command -v mpiexec >/dev/null; then  # the image's mpi4py has no MPI runtime beside it
  if ls .whl/mpich-*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target \
      /tmp/mpich .whl/mpich-*.whl >>"$log" 2>&1
    export PATH=/tmp/mpich/bin:$PATH LD_LIBRARY_PATH=/tmp/mpich/lib:${LD_LIBRARY_PATH:-}
  fi
fi
gate "mpiexec runs 2 ranks of mpi4py" timeout -k 5 60 mpiexec -n 2 python3 -c \
  "from mpi4py import MPI; assert MPI.COMM_WORLD.allreduce(1) == 2; print(MPI.Get_library_version()[:60])"
gate "CuPy sees a GPU" python3 -c \
  "import cupy; n = cupy.cuda.runtime.getDeviceCount(); assert n > 0; print('cupy', cupy.__version__, n, 'GPUs')"
step build 60 300 python3 -m pip install -q --no-build-isolation --no-deps -e .
gate "a dpcore build with CUDA that finds the GPU" python3 -c \
  "import dpcore; i = dpcore.build_info(); print(i); assert i['cuda_available']"

scripts=tests/scripts
cupy="env DEVICE=cupy python3 -m mpi4py"
step gpu-tests 20 90 python3 -m pytest -q -p no:cacheprovider tests/gpu -k "not torch"
step collectives-2 30 150 mpiexec -n 2 $cupy $scripts/device_collectives.py all
step direct-2 20 90 mpiexec -n 2 $cupy $scripts/device_direct.py
step registered-2 15 60 mpiexec -n 2 $cupy $scripts/device_registered.py
step collectives-4 30 120 mpiexec -n 4 $cupy $scripts/device_collectives.py few
step sanitizer 60 150 mpiexec -n 2 env DEVICE=cupy compute-sanitizer --tool memcheck \
  --error-exitcode 9 python3 -m mpi4py $scripts/device_collectives.py few small
step bench 30 120 mpiexec -n 2 python3 -m dpcore.bench all_reduce -b 8 -e 1G -f 4 \
  --device cuda --json "$out/bench-all_reduce.json"
step bench-unaligned 10 45 mpiexec -n 2 python3 -m dpcore.bench all_reduce -d float16 \
  -b 100000006 -e 100000006 --device cuda
step bench-registered 20 90 mpiexec -n 2 python3 -m dpcore.bench all_reduce -b 1M -e 1G -f 4 \
  --device cuda -R 1 --algo direct --json "$out/bench-registered.json"
step trainer 30 120 python3 -m pytest -q -p no:cacheprovider tests/test_ddp.py \
  tests/test_zero.py -k cupy
step torch-cuda 30 150 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_torch_cuda.py
peer_killed() {  # the survivor's line: "rank 0: error SECONDS | CommError: ... rank 1 ..."
  local marks
  marks=$(mktemp -d)
  mpiexec -disable-auto-cleanup -n 2 env DEVICE=cupy python3 $scripts/as_child.py python3 \
    $scripts/peer_dies.py kill during "$marks" 2>&1 | tee "$marks/out"
  grep -q "^rank 0: error .*rank 1" "$marks/out"
}
export -f peer_killed
export scripts
step peer-killed 20 60 bash -c peer_killed
[ "$gpus" -ge 2 ] || say "one GPU: the ranks above share it"
finish
