"""The fake CuPy's CUDA runtime: FAKE_CUPY_DEVICES devices (default 1) named "Fake GPU"."""
import os

current = None  # the device made current by Device(i).use()


class CUDARuntimeError(RuntimeError):
    pass


def getDeviceCount():
    count = int(os.environ.get("FAKE_CUPY_DEVICES", "1"))
    if count < 1:
        raise CUDARuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")
    return count


def getDeviceProperties(device):
    return {"name": b"Fake GPU", "totalGlobalMem": 1 << 30}


def deviceSynchronize():
    """Host memory: every copy has finished when it returns. Emulated device memory (the
    package's FAKE_CUPY_EMULATED): once the legacy default stream has run what it was given."""
    if os.environ.get("FAKE_CUPY_EMULATED") == "1":
        from dpcore import _C

        _C.emulated_sync(1)
