"""Connecting the device transport (csrc/cuda/device_transport.h): made at a communicator's first
call on CUDA arrays, on every rank at once, as that call is. Each rank allocates its FIFO and
one-shot slots on its GPU and exports them (CUDA IPC); every rank maps every peer's; the host
side is a shared-memory segment like the CPU transport's. Ranks must share one host (IPC)."""
from .. import _C
from ..settings import ring_slots
from .segments import fresh_name, map_everywhere


def connect(boot, node, settings, timeout, device):
    """The _C.DeviceBackend of this rank over `node` (a bootstrap Group), on CUDA device
    `device`, or on the CPU emulation where settings.cuda_emulation."""
    if node.size != boot.size:
        raise ValueError("dpcore: collectives on CUDA arrays need every rank on one host (their "
                         "buffers are mapped through CUDA IPC); between hosts, copy to host "
                         "arrays")
    emulated = settings.cuda_emulation
    if not emulated:  # every rank runs the same build on the same kind of host: all raise
        info = _C.build_info()
        if not info["cuda_available"]:
            raise RuntimeError("dpcore: CUDA arrays need " + (
                "a GPU, and CUDA finds none here" if info["cuda"] else
                "a build with CUDA, and nvcc was not found when dpcore was built (reinstall "
                "it where nvcc is on PATH)"))
    config = None
    if node.rank == 0:  # every rank cuts segments alike: local rank 0's sizes
        config = (fresh_name()[0], *ring_slots(settings, "emulated" if emulated else "cuda"),
                  settings.one_shot_bytes)
    name, slots, slot_bytes, one_shot = node.bcast(config, 0, "cuda init: agree on the slots")
    backend = map_everywhere(node, name, lambda create: _C.DeviceBackend(
        emulated, device, name, create, node.rank, node.size, slots, slot_bytes, one_shot,
        timeout, settings.spin_us))
    handles = node.allgather(backend.handle, "cuda init: exchange the IPC handles")
    node.on_every_rank(lambda: backend.map_peers(handles), "cuda init: map the peers' slots")
    backend.unlink_slots()  # every rank has mapped every peer's: nothing is left to find by name
    return backend
