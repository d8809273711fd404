"""How a buffer of n elements splits into one shard per rank."""
from typing import Tuple


def shard_range(n: int, size: int, rank: int) -> Tuple[int, int]:
    """(start, stop) of rank's shard: numpy.array_split's convention, the first n % size
    shards one element longer. Never pads, never requires divisibility."""
    if size <= 0 or not 0 <= rank < size:
        raise ValueError(f"shard_range: rank {rank} is not in [0, {size})")
    base, extra = divmod(n, size)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)
