"""Data parallelism over dpcore collectives: flat buffers, DataParallel (ZeRO stages 0-3), the
sampler, sharded checkpoints."""
from .checkpoint import consolidate
from .ddp import DataParallel
from .flat import FlatParams, Shards
from .sampler import DistributedSampler
from .zero1 import ZeroStage1
from .zero2 import ZeroStage2
from .zero3 import ZeroStage3

__all__ = ["DataParallel", "DistributedSampler", "FlatParams", "Shards", "ZeroStage1",
           "ZeroStage2", "ZeroStage3", "consolidate"]
