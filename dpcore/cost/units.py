"""Reading and printing the numbers a learner types and reads: sizes, counts, times, rates.

Sizes in bytes use binary suffixes (64K = 65536), as nccl-tests' -b/-e do; counts of things
(parameters, FLOPs) use decimal ones (70B = 70e9). Printed bytes are decimal (1 GB = 1e9 B), as
GB/s and the ZeRO paper are.
"""
import math

_BINARY = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_DECIMAL = {"": 1, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12, "P": 1e15}


def _split(text):
    text = str(text).strip()
    i = len(text)
    while i > 0 and text[i - 1].isalpha():
        i -= 1
    return text[:i], text[i:].upper()


def parse_bytes(text):
    """'64K' -> 65536, '1M' -> 1048576, '1e6' -> 1000000 (a trailing B or iB is ignored; any
    case): the one reading of a size, for the bench's -b/-e and the cost model's --sizes."""
    number, suffix = _split(text)
    value = _number(number, _BINARY.get(suffix.removesuffix("IB").removesuffix("B")))
    if not 0 <= value < math.inf:
        raise ValueError(f"cannot read {text!r} as a size in bytes (examples: 8, 64K, 1M, 2G)")
    return int(value)


def parse_count(text):
    """'70B' -> 70e9, '1.5e9' -> 1.5e9, '150T' -> 150e12: decimal suffixes for big counts,
    which are positive (parameters, tokens, FLOPs)."""
    number, suffix = _split(text)
    value = _number(number, _DECIMAL.get(suffix))
    if not 0 < value < math.inf:
        raise ValueError(f"cannot read {text!r} as a positive number (examples: 70e9, 70B)")
    return value


def _number(number, unit):
    """float(number) * unit, or nan where either is not a number."""
    try:
        return float(number) * unit
    except (TypeError, ValueError):
        return math.nan


def fmt_bytes(n, binary=False):
    """1234567 -> '1.23 MB' (decimal) or '1.18 MiB' (binary)."""
    base, units = (1024, ("B", "KiB", "MiB", "GiB", "TiB")) if binary else \
        (1000, ("B", "KB", "MB", "GB", "TB"))
    n = float(n)
    for unit in units:
        if abs(n) < base or unit == units[-1]:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.3g} {unit}"
        n /= base
    return f"{n} {units[-1]}"  # not reached


def fmt_time(seconds):
    """Seconds -> '12.3 us', '4.56 ms', '1.2 s'."""
    s = abs(seconds)
    if s == 0:
        return "0"
    if s < 1e-3:
        return f"{seconds * 1e6:.3g} us"
    if s < 1:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds:.3g} s"


def fmt_count(x):
    """70e9 -> '70 B', 1.5e12 -> '1.5 T': parameter counts the way papers write them."""
    for value, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(x) >= value:
            return f"{x / value:.4g} {unit}"
    return f"{x:.4g}"


def log2_floor(n):
    return int(n).bit_length() - 1 if n > 0 else 0


def log2_ceil(n):
    return (int(n) - 1).bit_length() if n > 1 else 0
