"""The call path: a Communicator checks each collective's arguments once and hands the call to
the path its arrays take (host_path: NumPy and CPU DLPack arrays; device_path: CUDA arrays), whose
backend matches it with the peers' calls and runs it (csrc/core/).

    communicator.py  Communicator, init: every collective's checks, Work, close
    calls.py         what every call shares: the path an array takes, out's checks, the launch
    choice.py        the shared checks: reduction codes, root, which algorithm (choose)
    path.py          the Path interface both paths implement
    host_path.py     NumPy / DLPack views, launched on the transport's backend
    device_path.py   CUDA views, launched on the device transport's backend; regions
    registration.py  comm.register's Registration: a buffer every peer maps
    host_arrays.py   NumPy views of DLPack arrays, and back
    cuda_arrays.py   CUDA arrays as the device path sees them (pointer, dtype, stream)
    work.py          Work (an async call's handle) and the arrays in flight
    p2p.py           send, recv, isend, irecv, batch: their checks, over the p2p engine
    host_staging.py  CUDA arrays through host memory, for point-to-point
    backend.py       the Backend protocol: what a transport's compiled backend offers
"""
from .communicator import Communicator, init
from .work import Work

__all__ = ["Communicator", "Work", "init"]
