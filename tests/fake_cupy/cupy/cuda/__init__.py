"""The fake CuPy's cupy.cuda: Device, the current stream, the runtime (see ../__init__.py)."""
from . import runtime


class Device:
    def __init__(self, device=None):
        self.id = runtime.current if device is None else device

    def use(self):
        if not 0 <= self.id < runtime.getDeviceCount():
            raise runtime.CUDARuntimeError("cudaErrorInvalidDevice: invalid device ordinal")
        runtime.current = self.id

    def synchronize(self):
        runtime.deviceSynchronize()


class Stream:
    ptr = 0  # the default stream


def get_current_stream():
    return Stream()
