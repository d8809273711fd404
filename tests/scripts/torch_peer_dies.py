"""The last rank is SIGKILLed in the middle of DDP training on the dpcore backend: every other
rank's next backward() raises dpcore's CommError naming it within seconds (DPCORE_TIMEOUT is
60 s), never hangs. Started by file:// (a store file in DIR), torch's ranks the reverse of
MPI's: dpcore names ranks as torch numbers them. Each rank first prints 'rank R: mpi shm NAMES'
(the MPI segments it maps, which nobody's MPI_Finalize will remove), each survivor then
'rank R: error SECONDS | MESSAGE'.

Usage: mpiexec -disable-auto-cleanup -n K python as_child.py python torch_peer_dies.py DIR
"""
import os
import re
import signal
import sys
import time

import torch
import torch.distributed as dist
from mpi4py import MPI
from torch.nn.parallel import DistributedDataParallel as DDP

from checks import say
from torch_kit import start
from torch_training import Net

rank, size, _ = start("file", MPI.COMM_WORLD, sys.argv[1])
net = DDP(Net())
for step in range(3):
    if step == 2:
        say(rank, "mpi shm " + " ".join(sorted(set(re.findall(
            r"/dev/shm/(\S+)", open("/proc/self/maps").read())))))
        dist.barrier()
        if rank == size - 1:
            os.kill(os.getpid(), signal.SIGKILL)
    start_time = time.monotonic()
    try:
        net(torch.ones(4, 12), use_side=True).sum().backward()
    except Exception as e:
        message = " ".join(str(e).split())
        say(rank, f"error {time.monotonic() - start_time:.1f} | {message}")
        os._exit(0)  # MPI_Finalize would wait for the dead rank
say(rank, f"trained on after rank {size - 1} died")
os._exit(1)
