"""Static checks of what nvcc emits for the CUDA kernels (csrc/cuda/*.cu), with no GPU needed.

1. Every kernel file compiles for sm_80 and sm_90 with ptxas's -warn-spills and -warn-lmem-usage
   turned into errors: a spilled register or a stack array lives in local memory, which is
   off-chip and turns a bandwidth-bound loop into a latency-bound one.
2. In the disassembly (cuobjdump -sass), every reduceCopyKernel<E, Op> moves data in 128-bit
   global loads and stores (LDG.E.128 / STG.E.128): that is what reduce_copy.h's 16-byte packs
   are for, and a change that breaks them falls back to narrower accesses that still pass every
   correctness test.
3. No kernel in any file touches local memory (LDL / STL), the SASS side of (1).

The last two tests run the checkers on throwaway kernels, so each check is seen to fail when it
should. Where nvcc is missing everything skips; cuobjdump and nvdisasm come from the `test`
extra's NVIDIA wheels.
"""
import importlib.metadata
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
KERNEL_FILES = sorted((ROOT / "csrc" / "cuda").glob("*.cu"))
ARCHS = ["sm_80", "sm_90"]
# The archs CMakeLists.txt builds: real sm_80 and sm_90, plus compute_90 PTX for newer GPUs.
GENCODE = ["-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90",
           "-gencode", "arch=compute_90,code=compute_90"]
FLAGS = ["-std=c++17", "-O3", f"-I{ROOT / 'csrc'}", f"-I{ROOT / 'csrc' / 'include'}",
         "-Xptxas", "-warn-spills,-warn-lmem-usage", "-Werror", "all-warnings"]
# dispatchReduceCopy's reduced dtypes x ops (avg runs sum's kernel), and the copy of uint16 for
# the dtypes moved only (bool and complex64 copy as uint8 and uint64, whose sums exist)
REDUCE_COPY_KERNELS = 10 * 4 + 1


def find_tool(tool, wheel):
    """`tool` on PATH, else the binary NVIDIA's wheel ships (nvidia/cu13/bin/ in 13.x)."""
    if found := shutil.which(tool):
        return found
    try:
        files = importlib.metadata.files(wheel) or []
    except importlib.metadata.PackageNotFoundError:
        return None
    return next((str(f.locate()) for f in files if f.name == tool), None)


# /usr/local/cuda/bin: where CMakeLists.txt looks when PATH has no nvcc.
NVCC = shutil.which("nvcc") or shutil.which("nvcc", path="/usr/local/cuda/bin")
CUOBJDUMP = find_tool("cuobjdump", "nvidia-cuda-cuobjdump")
NVDISASM = find_tool("nvdisasm", "nvidia-cuda-nvdisasm")  # cuobjdump -sass runs it

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(NVCC is None, reason="nvcc not found (PATH, /usr/local/cuda/bin)")]
needs_disassembler = pytest.mark.skipif(
    CUOBJDUMP is None or NVDISASM is None, reason="cuobjdump or nvdisasm not found: "
    "pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm (the test extra)")


def nvcc(source, obj, *flags):
    return subprocess.Popen([NVCC, *flags, "-c", str(source), "-o", str(obj)], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """{file name: (object, nvcc's output, exit code)}, every file compiled at once for both
    archs: cuda_device.cu's 32 kernels alone take most of a minute."""
    out = tmp_path_factory.mktemp("cuda_static")
    jobs = {cu.name: (out / f"{cu.stem}.o", cu) for cu in KERNEL_FILES}
    # --threads 0: one thread per arch, so sm_80 and sm_90 compile side by side.
    running = {name: nvcc(cu, obj, *FLAGS, *GENCODE, "--threads", "0")
               for name, (obj, cu) in jobs.items()}
    return {name: (jobs[name][0], p.communicate(timeout=600)[0], p.returncode)
            for name, p in running.items()}


# A line of cuobjdump -sass: `arch = sm_90`, `Function : <mangled>`, or an instruction such as
# `/*0480*/  @!P0 LDG.E.128 R8, desc[UR14][R8.64] ;` whose opcode we keep.
ARCH_LINE = re.compile(r"^arch = (sm_\d+)")
FUNCTION_LINE = re.compile(r"^\s*Function : (\S+)")
INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?\w+\s+)?([A-Z][A-Z0-9_.]*)")


def disassemble(obj):
    """{(arch, demangled kernel name): [opcode, ...]} for every kernel in an object's cubins."""
    path = os.pathsep.join([os.path.dirname(NVDISASM), os.environ.get("PATH", "")])
    sass = subprocess.run([CUOBJDUMP, "-sass", str(obj)], env=dict(os.environ, PATH=path),
                          capture_output=True, text=True, check=True).stdout
    kernels, arch, name = {}, None, None
    for line in sass.splitlines():
        if m := ARCH_LINE.match(line):
            arch = m[1]
        elif m := FUNCTION_LINE.match(line):
            name = m[1]
            kernels[arch, name] = []
        elif m := INSTRUCTION.match(line):
            kernels[arch, name].append(m[1])
    names = demangle("\n".join(name for _, name in kernels)).splitlines()
    return {(arch, names[i]): ops for i, ((arch, _), ops) in enumerate(kernels.items())}


def demangle(text):
    """`text` with every mangled C++ name in it demangled (c++filt: binutils, as nvcc needs)."""
    return subprocess.run(["c++filt"], input=text, capture_output=True, text=True,
                          check=True).stdout


def has_128_bit(opcodes, verb):
    """LDG.E.128, STG.E.128.SYS, ...: the verb, then a 128 among its modifiers."""
    return any(op.split(".")[0] == verb and "128" in op.split(".")[1:] for op in opcodes)


def pack_problems(opcodes):
    return [f"no 128-bit global {what} ({verb}.*.128)"
            for verb, what in [("LDG", "load"), ("STG", "store")] if not has_128_bit(opcodes, verb)]


def local_memory(opcodes):
    return sorted({op for op in opcodes if op.split(".")[0] in ("LDL", "STL")})


@pytest.fixture(scope="module")
def sass(compiled):
    """{file name: disassemble(object)} for every file that compiled."""
    return {name: disassemble(obj) for name, (obj, _, code) in compiled.items() if code == 0}


@pytest.mark.parametrize("name", [cu.name for cu in KERNEL_FILES])
def test_kernel_file_compiles_with_no_warning_spill_or_local_memory(compiled, name):
    _, output, code = compiled[name]
    assert code == 0 and "warning" not in output.lower(), f"{name} ({code}):\n{demangle(output)}"


@needs_disassembler
def test_every_reduce_copy_kernel_moves_memory_in_128_bit_loads_and_stores(sass):
    assert "cuda_device.cu" in sass, "cuda_device.cu did not compile"
    kernels = {key: ops for key, ops in sass["cuda_device.cu"].items()
               if "reduceCopyKernel<" in key[1]}
    for arch in ARCHS:
        found = sum(a == arch for a, _ in kernels)
        assert found == REDUCE_COPY_KERNELS, f"{arch}: {found} reduceCopyKernel instantiations"
    failures = [f"{arch} {name}: {problem}" for (arch, name), ops in sorted(kernels.items())
                for problem in pack_problems(ops)]
    assert not failures, "\n".join(failures)


@needs_disassembler
def test_no_kernel_uses_local_memory(sass):
    disassembled = {arch for kernels in sass.values() for arch, _ in kernels}
    assert set(ARCHS) <= disassembled, f"only {sorted(disassembled)} disassembled"
    failures = [f"{arch} {name} ({file}): {' '.join(local_memory(ops))}"
                for file, kernels in sorted(sass.items())
                for (arch, name), ops in sorted(kernels.items()) if local_memory(ops)]
    assert not failures, "\n".join(failures)


THROWAWAY = """
__global__ void packCopy(const uint4* src, uint4* dst, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    dst[i] = src[i];
}
__global__ void scalarCopy(const float* src, float* dst, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    dst[i] = src[i];
}
__global__ void localArray(const int* index, float* out) {
  float a[256];  // indexed at run time, too big for registers: a stack frame
  for (int i = 0; i < 256; ++i) a[index[i] & 255] = i;
  out[threadIdx.x] = a[index[threadIdx.x] & 255];
}
"""


def test_ptxas_rejects_local_memory_with_these_flags(tmp_path):
    (tmp_path / "throwaway.cu").write_text(THROWAWAY)
    p = nvcc(tmp_path / "throwaway.cu", tmp_path / "throwaway.o", *FLAGS, "-arch=sm_90")
    output = p.communicate(timeout=120)[0]
    assert p.returncode != 0 and "Local memory used for function" in output, output


@needs_disassembler
def test_the_checkers_tell_packs_from_scalars_and_see_local_memory(tmp_path):
    (tmp_path / "throwaway.cu").write_text(THROWAWAY)
    p = nvcc(tmp_path / "throwaway.cu", tmp_path / "throwaway.o", "-O3", "-arch=sm_90")
    output = p.communicate(timeout=120)[0]
    assert p.returncode == 0, output
    kernels = {name.split("(")[0]: ops for (_, name), ops in
               disassemble(tmp_path / "throwaway.o").items()}
    assert pack_problems(kernels["packCopy"]) == []
    assert pack_problems(kernels["scalarCopy"]) == [
        "no 128-bit global load (LDG.*.128)", "no 128-bit global store (STG.*.128)"]
    assert local_memory(kernels["packCopy"]) == []
    assert set(local_memory(kernels["localArray"])) == {"LDL", "STL"}
