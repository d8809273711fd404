"""python -m dpcore.train's share of the cores: each rank prints its BLAS threads once
share_cores has run (the test sets or unsets OPENBLAS_NUM_THREADS and OMP_NUM_THREADS).

Usage: mpiexec -n K python -m mpi4py blas_share.py
"""
import dpcore
from checks import say
from dpcore import train
from dpcore._cli import blas

with dpcore.init() as comm:
    train.share_cores(comm)
    say(comm.rank, f"threads {blas.threads()}")
    say(comm.rank, "ok")
