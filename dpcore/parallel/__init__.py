"""Data parallelism over dpcore collectives: flat buffers, DataParallel (ZeRO stages 0-3), the
sampler, sharded checkpoints."""
from .checkpoint import consolidate
from .engine import DataParallel
from .flat import FlatParams
from .sampler import DistributedSampler
from .shards import Shards

__all__ = ["DataParallel", "DistributedSampler", "FlatParams", "Shards", "consolidate"]
