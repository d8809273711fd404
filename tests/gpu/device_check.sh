#!/usr/bin/env bash
# The CUDA path on a lent GPU machine, in one go: build there (no registry: no build isolation),
# run the CUDA tests, and time the reduce kernel against CuPy's own elementwise add.
# Usage (from the repository root): bash tests/gpu/device_check.sh
set -uo pipefail
export PYTHONUNBUFFERED=1
nvidia-smi -L
python3 -c "import cupy, numpy; print('cupy', cupy.__version__, 'numpy', numpy.__version__)"
python3 -m pip install -q --no-build-isolation --no-deps -e . 2>&1 | tail -5
python3 -c "import dpcore; print(dpcore.build_info())" || exit 1
python3 -m pytest -q -p no:cacheprovider tests/gpu 2>&1 | tail -5
python3 tests/gpu/bench_cuda_reduce.py
