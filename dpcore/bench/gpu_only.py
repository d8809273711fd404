"""nccl-tests' flags that only mean something with NCCL on GPUs, refused by name: someone who
copies an nccl-tests command line learns which flag dpcore has no use for, and why, rather than
argparse's "unrecognized arguments"."""
import argparse

# (short, long, why dpcore has no use for it)
GPU_ONLY = (
    ("-t", "--nthreads", "dpcore runs one rank per process: start more with mpiexec -n"),
    ("-g", "--ngpus", "dpcore runs one rank per process: start more with mpiexec -n"),
    ("-p", "--parallel_init", "it initialises several GPUs' NCCL communicators from threads"),
    ("-G", "--cudagraph", "it captures the calls in a CUDA graph"),
    ("-y", "--stream_null", "it chooses the CUDA stream"),
    ("-x", "--cta_policy", "it sets NCCL's CTA policy"),
    ("-D", "--device_implementation", "it runs NCCL's device API kernels"),
    ("-V", "--device_cta_count", "it sizes NCCL's device API kernels"),
    ("-M", "--memory_report", "it reports GPU memory"),
)


class _Refuse(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):
        short, long, why = next(f for f in GPU_ONLY if option_string in f[:2])
        parser.error(f"{short}/{long} is GPU-only in nccl-tests ({why})")


def add_gpu_only(parser):
    group = parser.add_argument_group("refused", "nccl-tests' GPU-only flags: " +
                                      " ".join(f"{s}/{l}" for s, l, _ in GPU_ONLY))
    for short, long, _ in GPU_ONLY:
        group.add_argument(short, long, nargs="?", action=_Refuse, help=argparse.SUPPRESS)
