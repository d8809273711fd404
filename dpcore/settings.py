"""Every DPCORE_* setting, read from the environment here and nowhere else (the README's
"Environment" lists them).

load() reads them as they are now. A Communicator loads them once, at init; the shared-memory
sizes must be the same on every rank of a node, so there local rank 0's are everyone's. The
ring's slots default per transport (ring_slots): small ones stay in cache on shared memory, large
ones cost MPI fewer messages.
"""
import os
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Settings:
    timeout: float = 300.0               # DPCORE_TIMEOUT: seconds a collective may wait
    transport: str = "auto"              # DPCORE_TRANSPORT: auto, shm or mpi
    node_size: int = 0                   # DPCORE_NODE_SIZE: k ranks a virtual node (0: off)
    trace: Optional[str] = None          # DPCORE_TRACE: Chrome trace file
    tune: bool = True                    # DPCORE_TUNE=0: auto's fixed thresholds, no timing
    fifo_slots: Optional[int] = None     # DPCORE_FIFO_SLOTS: the ring's slots per link
    slot_bytes: Optional[int] = None     # DPCORE_SLOT_BYTES: a slot: the ring's segment
    one_shot_bytes: int = 256 << 10      # DPCORE_ONE_SHOT_BYTES: one_shot's slot per rank
    one_shot_max: Optional[int] = None   # DPCORE_ONE_SHOT_MAX: auto's one_shot limit, forced
    explain_auto: bool = False           # DPCORE_EXPLAIN_AUTO=1: print auto's choices
    spin_us: float = 100.0               # DPCORE_SPIN_US: shared memory's polling, then sleep


def load(environ=None):
    """The settings in `environ` (os.environ by default)."""
    env = os.environ if environ is None else environ

    def get(name, parse, default):
        value = env.get(f"DPCORE_{name}")
        return default if value is None else parse(value)

    default = Settings()
    return Settings(
        timeout=get("TIMEOUT", float, default.timeout),
        transport=get("TRANSPORT", str, default.transport),
        node_size=get("NODE_SIZE", int, default.node_size),
        trace=get("TRACE", str, default.trace) or None,
        tune=get("TUNE", lambda v: v != "0", default.tune),
        # a ring step holds one slot of its incoming FIFO while it waits for one in the
        # outgoing: the ring needs at least 2
        fifo_slots=get("FIFO_SLOTS", lambda v: max(2, int(v)), default.fifo_slots),
        slot_bytes=get("SLOT_BYTES", int, default.slot_bytes),
        one_shot_bytes=get("ONE_SHOT_BYTES", int, default.one_shot_bytes),
        one_shot_max=get("ONE_SHOT_MAX", int, default.one_shot_max),
        explain_auto=get("EXPLAIN_AUTO", lambda v: v not in ("", "0"), default.explain_auto),
        spin_us=get("SPIN_US", _spin_us, default.spin_us),
    )


# A bound that keeps the C++ side's nanoseconds in range; polling a whole second is already a core
# burnt for nothing.
MAX_SPIN_US = 1e6


def _spin_us(text):
    """DPCORE_SPIN_US: microseconds a waiting rank polls before it sleeps, 0 to MAX_SPIN_US."""
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not 0 <= value <= MAX_SPIN_US:
        raise ValueError(f"DPCORE_SPIN_US={text!r}: expected microseconds from 0 to "
                         f"{MAX_SPIN_US:.0f}")
    return value


# (slots, bytes per slot) of the ring where DPCORE_FIFO_SLOTS and DPCORE_SLOT_BYTES are not set
RING_SLOTS = {"shm": (8, 64 << 10), "mpi": (4, 512 << 10)}


def ring_slots(settings, transport):
    """(slots, slot bytes) of the ring on `transport` ("shm" or "mpi")."""
    slots, nbytes = RING_SLOTS[transport]
    return settings.fifo_slots or slots, settings.slot_bytes or nbytes
