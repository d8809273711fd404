"""Every DPCORE_* setting, read from the environment here and nowhere else (the README's
"Environment" lists them).

load() reads them as they are now, and refuses any that is not what its setting takes with a
ValueError that names it ("DPCORE_SLOT_BYTES=3: ..."); an empty one counts as unset. A
Communicator loads them once, at init, before it sends anything; the shared-memory sizes must be
the same on every rank of a node, so there local rank 0's are everyone's. The ring's slots
default per transport (ring_slots): small ones stay in cache on shared memory, large ones cost
MPI fewer messages. What they add up to, the node's segment, is checked against the free space of
/dev/shm where it is made (csrc/cpu/shm_segment.cc), as every rank then hears.
"""
import difflib
import math
import numbers
import os
import warnings
from dataclasses import dataclass
from typing import Optional

from . import _C

TRANSPORTS = ("auto", "shm", "mpi")
# Far beyond any use, short of exhausting memory with one typo: the shared-memory segment holds
# ranks x slots x slot bytes, and 2 x ranks x one-shot bytes.
MAX_FIFO_SLOTS = 64
MAX_SLOT_BYTES = 64 << 20
MAX_ONE_SHOT_BYTES = 64 << 20
# keeps the C++ side's nanoseconds in range; polling a whole second is already a core burnt
MAX_SPIN_US = 1e6


@dataclass(frozen=True)
class Settings:
    timeout: float = 300.0               # DPCORE_TIMEOUT: seconds a collective may wait (inf)
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
    cuda_emulation: bool = False         # DPCORE_CUDA_EMULATION=1: CUDA arrays on the CPU emulation
    debug: str = "WARN"                  # DPCORE_DEBUG=INFO: what init set up, on stderr
    # DPCORE_READ_PEERS=0: run as where ranks may not read each other's memory (process_vm_readv
    # refused: a container's default seccomp, ptrace_scope 3), staging through shared memory
    read_peers: bool = True
    # The emulation reads two of its own where its streams are made (csrc/cuda/emulated_stream.h):
    # DPCORE_EMULATION_SEED (its delays' seed) and DPCORE_EMULATION_DELAY_US ("HI" or "LO-HI").


def timeout_seconds(value):
    """`value` (dpcore.init's timeout) as seconds: a positive number, or inf for no limit."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"dpcore: timeout must be a number of seconds, not {type(value).__name__}")
    seconds = float(value)
    if not seconds > 0:  # nan too
        raise ValueError(f"dpcore: timeout must be a positive number of seconds or inf, not "
                         f"{value!r}")
    return seconds


# -- what each setting takes: parse(text) returns its value or raises ValueError(why) ----------

def _whole(low, high, unit=""):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"expected a whole number{unit}") from None
        if not low <= value <= high:
            raise ValueError(f"expected {low} to {high}{unit}" if high < math.inf else
                             f"expected {low} or more{unit}")
        return value
    return parse


def _slot_bytes(text):
    element = _C.MAX_ELEMENT_BYTES
    value = _whole(element, MAX_SLOT_BYTES, " bytes")(text)
    if value % element:
        raise ValueError(f"expected a multiple of {element} bytes, so that a ring segment holds "
                         f"whole elements of every dtype")
    return value


def _seconds(text):
    try:
        value = float(text)
    except ValueError:
        raise ValueError("expected a number of seconds") from None
    if not value > 0:
        raise ValueError("expected a positive number of seconds, or inf for no limit")
    return value


def _microseconds(high):
    def parse(text):
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not 0 <= value <= high:  # nan too
            raise ValueError(f"expected microseconds from 0 to {high:.0f}")
        return value
    return parse


def _one_of(*choices):
    def parse(text):
        if text not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}")
        return text
    return parse


def _writable_file(text):
    folder = os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(folder):  # found at init, not when the trace is written, at exit
        raise ValueError(f"the folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise ValueError(f"the folder {folder} cannot be written")
    return text


def _flag(text):
    if text not in ("0", "1"):
        raise ValueError("expected 0 or 1")
    return text == "1"


_READ = {  # Settings field: (the variable's name after DPCORE_, parse)
    "timeout": ("TIMEOUT", _seconds),
    "transport": ("TRANSPORT", _one_of(*TRANSPORTS)),
    "node_size": ("NODE_SIZE", _whole(0, math.inf)),
    "trace": ("TRACE", _writable_file),
    "tune": ("TUNE", _flag),
    # a ring step holds one slot of its incoming FIFO while it waits for one in the outgoing
    "fifo_slots": ("FIFO_SLOTS", _whole(_C.RING_MIN_SLOTS, MAX_FIFO_SLOTS)),
    "slot_bytes": ("SLOT_BYTES", _slot_bytes),
    "one_shot_bytes": ("ONE_SHOT_BYTES", _whole(0, MAX_ONE_SHOT_BYTES, " bytes")),
    "one_shot_max": ("ONE_SHOT_MAX", _whole(0, math.inf, " bytes")),
    "explain_auto": ("EXPLAIN_AUTO", _flag),
    "spin_us": ("SPIN_US", _microseconds(MAX_SPIN_US)),
    "cuda_emulation": ("CUDA_EMULATION", _flag),
    "debug": ("DEBUG", lambda text: _one_of("WARN", "INFO")(text.upper())),  # as NCCL_DEBUG
    "read_peers": ("READ_PEERS", _flag),
}


def setting(field, environ=None):
    """One setting alone (a Settings field name), for what reads it at import: a bad other
    setting then fails init, not `import dpcore`."""
    env = os.environ if environ is None else environ
    name, parse = _READ[field]
    text = env.get(f"DPCORE_{name}")
    if not text:
        return getattr(Settings, field)
    try:
        return parse(text)
    except ValueError as e:
        raise ValueError(f"DPCORE_{name}={text}: {e}") from None


# DPCORE_* variables read elsewhere: the build's switches (setup.py)
BUILD_VARIABLES = ("DPCORE_CUDA", "DPCORE_NATIVE", "DPCORE_BUILD_TYPE")
# read by the CUDA emulation itself, where its streams are made (csrc/cuda/emulated_stream.h)
EMULATION_VARIABLES = ("DPCORE_EMULATION_SEED", "DPCORE_EMULATION_DELAY_US")
_warned: set[str] = set()


def known_variables():
    """Every DPCORE_* variable dpcore reads."""
    return (tuple(f"DPCORE_{name}" for name, _ in _READ.values()) + BUILD_VARIABLES
            + EMULATION_VARIABLES)


def described(environ=None):
    """(variable, its text or None where unset, the default) for every setting, in order."""
    env = os.environ if environ is None else environ
    return [(f"DPCORE_{name}", env.get(f"DPCORE_{name}") or None, getattr(Settings, field))
            for field, (name, _) in _READ.items()]


def load(environ=None):
    """The settings in `environ` (os.environ by default), every one checked; a DPCORE_* variable
    dpcore does not read (a typo) is warned about once."""
    env = os.environ if environ is None else environ
    known = known_variables()
    for name in sorted(set(env) - set(known) - _warned):
        if name.startswith("DPCORE_"):
            _warned.add(name)
            close = difflib.get_close_matches(name, known, n=1)
            warnings.warn(f"{name} is not a dpcore setting, and is ignored" +
                          (f" (did you mean {close[0]}?)" if close else ""), stacklevel=2)
    return Settings(**{field: setting(field, environ) for field in _READ})


# (slots, bytes per slot) of the ring where DPCORE_FIFO_SLOTS and DPCORE_SLOT_BYTES are not set
# On a GPU every step of the ring is a kernel whose end the host waits for (a few microseconds),
# so its segments are large; the CPU emulation of a device keeps them small.
RING_SLOTS = {"shm": (8, 64 << 10), "mpi": (4, 512 << 10), "cuda": (4, 16 << 20),
              "emulated": (4, 64 << 10)}


def ring_slots(settings, transport):
    """(slots, slot bytes) of the ring on `transport` ("shm", "mpi", "cuda" or "emulated")."""
    slots, nbytes = RING_SLOTS[transport]
    return settings.fifo_slots or slots, settings.slot_bytes or nbytes
