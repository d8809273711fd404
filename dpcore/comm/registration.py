"""comm.register: a user's buffer that every peer of the node maps, once (CUDA IPC of the
allocation that holds it, as NCCL's ncclCommRegister), so that algo="direct" reads and writes it
in place, one kernel per call, where without it the device path stages through its ring slots.

The registration holds the array, so its memory cannot go back to CuPy's pool or torch's
caching allocator while a peer maps it (CUDA leaves freeing memory that a peer maps
undefined). deregister, collectively, unmaps it everywhere and lets it go; a registration
dropped without it is kept until the ranks agree on it at the next register, comm.alloc or
close, as comm.alloc's buffers are."""


class Registration:
    """What comm.register(x) returns: x, mapped by every peer until comm.deregister(it), the
    end of a `with` block over it (unless an exception ends the block), or close(). Host
    arrays need none (direct reads them where they are): theirs maps nothing."""

    __slots__ = ("array", "region", "_deregister", "__weakref__")

    def __init__(self, array, region, deregister):
        self.array = array    # None once deregistered
        self.region = region  # the device transport's id; None: a host array's
        self._deregister = deregister

    @property
    def registered(self):
        return self.array is not None and self.region is not None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        # left by an exception, it stays until close(): deregister, collective, could wait on
        # a peer that failed, or one that raised where this rank did not
        if exc_type is None:
            self._deregister(self)

    def __repr__(self):
        state = "registered" if self.registered else "nothing mapped"
        return f"<dpcore.Registration region {self.region}: {state}>"
