"""Data parallelism over dpcore collectives: flat buffers, DataParallel, the sampler."""
from .ddp import DataParallel
from .flat import FlatParams
from .sampler import DistributedSampler

__all__ = ["DataParallel", "DistributedSampler", "FlatParams"]
