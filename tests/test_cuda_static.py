"""Static checks of what nvcc emits for the CUDA kernels (csrc/cuda/*.cu), with no GPU needed.

1. Every kernel file compiles for sm_80 and sm_90 with ptxas's -warn-spills and -warn-lmem-usage
   turned into errors: a spilled register or a stack array lives in local memory, which is
   off-chip and turns a bandwidth-bound loop into a latency-bound one.
2. In the disassembly (cuobjdump -sass), every reduceCopyKernel<E, Op> moves data in 128-bit
   global loads and stores (LDG.E.128 / STG.E.128): that is what reduce_copy.h's 16-byte packs
   are for, and a change that breaks them falls back to narrower accesses that still pass every
   correctness test.
3. No kernel in any file touches local memory (LDL / STL), the SASS side of (1).
4. Every kernel whose __launch_bounds__ ask a multiprocessor to hold several blocks at once gets
   registers that let it (cuobjdump -res-usage against the PTX's .maxntid and .minnctapersm),
   and copies (copyKernel, which every copy runs) ask for four: reduceCopy's 74-76 registers
   let a byte copy have three. The other grids are sized by the occupancy calculator at launch.

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


def cuobjdump(obj, *flags):
    """cuobjdump's output on an object (nvdisasm, which -sass runs, on its PATH)."""
    path = os.pathsep.join([os.path.dirname(NVDISASM), os.environ.get("PATH", "")])
    return subprocess.run([CUOBJDUMP, *flags, str(obj)], env=dict(os.environ, PATH=path),
                          capture_output=True, text=True, check=True).stdout


def disassemble(obj):
    """{(arch, demangled kernel name): [opcode, ...]} for every kernel in an object's cubins."""
    sass = cuobjdump(obj, "-sass")
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


# A multiprocessor's registers on sm_80 and sm_90, handed out a warp at a time in units of 256.
REGISTERS_PER_MULTIPROCESSOR = 64 * 1024
REGISTER_UNIT = 256
COPY_BLOCKS = 4  # cuda_device.cu's kCopyBlocksPerMultiprocessor


def blocks_that_fit(registers, threads):
    """Blocks of `threads` threads that a multiprocessor's registers hold at once, each thread
    needing `registers` of them (the occupancy calculator's answer where registers limit)."""
    per_warp = -(-registers * 32 // REGISTER_UNIT) * REGISTER_UNIT
    return REGISTERS_PER_MULTIPROCESSOR // (per_warp * -(-threads // 32))


# cuobjdump -res-usage: ` Function <mangled>:`, then `  REG:56 STACK:0 SHARED:0 ...`
RESOURCE_FUNCTION = re.compile(r"^\s*Function ([^\s:]+):")
RESOURCE_LINE = re.compile(r"^\s*REG:(\d+)\b")
PTX_ENTRY = re.compile(r"\.entry\s+(\w+)\s*\(([^{]*)\{")


def registers(obj):
    """{(arch, mangled kernel name): registers per thread} for every kernel in an object."""
    found, arch, name = {}, None, None
    for line in cuobjdump(obj, "-res-usage").splitlines():
        if m := ARCH_LINE.match(line):
            arch = m[1]
        elif m := RESOURCE_FUNCTION.match(line):
            name = m[1]
        elif (m := RESOURCE_LINE.match(line)) and name:
            found[arch, name] = int(m[1])
    return found


def launch_bounds(obj):
    """{mangled kernel name: (threads, blocks per multiprocessor)} from the PTX's .maxntid and
    .minnctapersm (__launch_bounds__); blocks is 1 where none is asked."""
    bounds = {}
    for name, directives in PTX_ENTRY.findall(cuobjdump(obj, "-ptx")):
        threads = re.search(r"\.maxntid\s+(\d+)", directives)
        blocks = re.search(r"\.minnctapersm\s+(\d+)", directives)
        bounds[name] = (int(threads[1]) if threads else 1024, int(blocks[1]) if blocks else 1)
    return bounds


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
               if "reduceCopyKernel<" in key[1] or "copyKernel(" in key[1]}
    for arch in ARCHS:
        found = sum(a == arch for a, _ in kernels)
        assert found == REDUCE_COPY_KERNELS + 1, f"{arch}: {found} reduceCopyKernel instantiations"
    failures = [f"{arch} {name}: {problem}" for (arch, name), ops in sorted(kernels.items())
                for problem in pack_problems(ops)]
    assert not failures, "\n".join(failures)


@needs_disassembler
def test_every_kernel_has_the_registers_its_launch_bounds_allow(compiled):
    """copyKernel asks four blocks of each multiprocessor and gets them; every kernel that asks
    blocks of it gets them; the register counts are in the message."""
    obj, _, code = compiled["cuda_device.cu"]
    assert code == 0, "cuda_device.cu did not compile"
    bounds, used = launch_bounds(obj), registers(obj)
    copies = [name for name in bounds if "copyKernel" in demangle(name)]
    assert len(copies) == 1 and bounds[copies[0]][1] == COPY_BLOCKS, (copies, bounds)
    for arch in ARCHS:
        assert (arch, copies[0]) in used, f"{arch}: no register count for copyKernel"
    counts = {f"{arch} {demangle(name).split('(')[0]}": (regs, *bounds.get(name, (0, 0)))
              for (arch, name), regs in sorted(used.items())}
    failures = [f"{kernel}: {regs} registers, {threads} threads x {blocks} blocks"
                for kernel, (regs, threads, blocks) in counts.items()
                if threads and blocks_that_fit(regs, threads) < blocks]
    assert not failures, "\n".join(failures) + f"\nall: {counts}"


def test_blocks_that_fit_counts_as_the_occupancy_calculator():
    assert blocks_that_fit(76, 256) == 3  # reduceCopy's byte copy: three where four were sent
    assert blocks_that_fit(64, 256) == 4
    assert blocks_that_fit(65, 256) == 3  # a warp's registers come in units of 256
    assert blocks_that_fit(32, 256) == 8


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
__global__ void __launch_bounds__(128, 3) bounded(const float* src, float* dst) {
  dst[threadIdx.x] = src[threadIdx.x];
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
    bounds = {demangle(name).split("(")[0]: b for name, b in
              launch_bounds(tmp_path / "throwaway.o").items()}
    assert bounds["bounded"] == (128, 3) and bounds["packCopy"] == (1024, 1), bounds
    used = {demangle(name).split("(")[0] for _, name in registers(tmp_path / "throwaway.o")}
    assert {"packCopy", "bounded", "localArray"} <= used, used
