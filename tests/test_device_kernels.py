"""The device transport's kernel body (csrc/cuda/reduce_copy.h) in the CPU emulation, where each
CUDA thread is a std::thread: tests/device/kernel_check.cc runs it for every dtype x op, 1-4
sources, 1-2 destinations, every offset class modulo 16 bytes, odd counts and in place, and
compares with the CPU path's loops bit for bit. Built twice: plainly, and under ThreadSanitizer,
which catches what plain runs on x86 forgive (a kernel that signals completion before its block's
barrier, or with a relaxed instead of a release add: both were seen to pass the plain check and
fail here; the end is now the blocks' acq_rel count and the last block's release store). The
plain build also checks the emulation's interprocess events across two devices (checkEvents:
either await left out, 19-20 rounds of 20 came out wrong)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ["tests/device/kernel_check.cc", "csrc/cuda/emulated_device.cc",
           "csrc/cuda/emulated_memory.cc",
           "csrc/cuda/emulated_stream.cc", "csrc/host/reduce.cc",
           "csrc/cpu/shm_segment.cc"]
CXX = os.environ.get("CXX", "g++")

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which(CXX) is None or sys.platform != "linux",
                                 reason=f"needs {CXX} on Linux")]


BUILDS = {"plain": ("-O2",), "thread-sanitizer": ("-O1", "-g", "-fsanitize=thread")}
# what each build's binary runs: every case plain; under ThreadSanitizer (which races look for,
# not values) the quick sample, 1 s instead of 7
RUNS = {"plain": [], "thread-sanitizer": ["quick"]}


def build(directory, *flags):
    """Starts g++ on kernel_check.cc; returns (process, binary)."""
    binary = directory / "kernel_check"
    compile_ = subprocess.Popen([CXX, "-std=c++17", "-Wall", "-Wextra", "-Werror", *flags,
                                 "-Icsrc", "-Icsrc/include", *SOURCES, "-o", str(binary),
                                 "-lpthread", "-lrt"], cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
    return compile_, binary


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """{build: (process, binary)}, both builds started at once: each is one g++ of about 10 s on
    one core, so on two cores the pair takes the time of one."""
    started = {name: build(tmp_path_factory.mktemp(name), *flags) for name, flags in BUILDS.items()}
    yield started
    for compile_, _ in started.values():  # one whose test was deselected, or timed out
        if compile_.poll() is None:
            compile_.kill()
            compile_.communicate()


@pytest.mark.parametrize("name", BUILDS)
def test_kernels_equal_the_cpu_path(builds, name):
    compile_, binary = builds[name]
    output, _ = compile_.communicate(timeout=300)
    assert compile_.returncode == 0, output
    result = subprocess.run([str(binary), *RUNS[name]], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stdout.startswith("ok: "), result.stdout
