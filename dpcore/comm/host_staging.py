"""CUDA arrays through host memory, for point-to-point (dpcore.comm.p2p), whose engine moves host
bytes: a send copies the array to the host first, a receive lands in a host array and is copied
in once it is done. Each copy follows the work queued on the array's stream and is complete when
it returns, as a blocking send or recv is."""
import sys

import numpy as np

from .. import _C


def _library(view):
    return sys.modules.get(type(view.user).__module__.split(".")[0])


def to_host(view):
    """A NumPy copy of the device array `view` (a cuda_arrays.DeviceArray), flat."""
    user = view.user
    if _library(view).__name__ == "torch":
        import torch

        raw = user.detach().contiguous().view(torch.uint8).cpu().numpy()
        return raw.view(view.dtype).reshape(-1)
    return np.ascontiguousarray(user.get()).reshape(-1)  # CuPy, dpcore.emulated: after its stream


def to_device(view, host):
    """Copies the NumPy array `host` into the device array `view`, and waits until it is there."""
    user, library = view.user, _library(view)
    if library.__name__ == "torch":
        import torch

        user.view(-1).view(torch.uint8).copy_(torch.from_numpy(host.view(np.uint8)))
        torch.cuda.current_stream(user.device).synchronize()
        return
    user.set(host.reshape(user.shape))
    if library.__name__ == "cupy":
        with user.device:
            library.cuda.get_current_stream().synchronize()
    else:  # dpcore.emulated: set() lands late, on the array's stream
        _C.emulated_sync(user.stream)
