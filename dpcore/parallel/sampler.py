"""DistributedSampler: every rank walks the same shuffled global batches and takes its slice.

All ranks draw the epoch's permutation from (seed, epoch), so they agree without talking. Each
global batch of `batch_size` samples splits with `shard_range`, so N ranks together see exactly
the batches one process sees, whatever N, and uneven splits never pad or drop a sample.
"""
from typing import Iterator, Tuple

import numpy as np
import numpy.typing as npt

from ..sharding import shard_range


class DistributedSampler:
    """Yields (local_indices, global_batch_size) for each global batch of an epoch.

    With losses that are means over the batch, weight each rank's summed loss by
    size / global_batch_size: the average of the ranks' gradients is then the full batch's even
    when the local batches differ in length (e.g. the last batch, or B not divisible by N)."""

    def __init__(self, n: int, batch_size: int, rank: int = 0, size: int = 1,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False) -> None:
        self.n, self.batch_size = n, batch_size
        self.rank, self.size = rank, size
        self.shuffle, self.seed, self.drop_last = shuffle, seed, drop_last
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def permutation(self) -> npt.NDArray[np.int64]:
        if not self.shuffle:
            return np.arange(self.n)
        return np.random.default_rng((self.seed, self.epoch)).permutation(self.n)

    def __len__(self) -> int:
        full, rest = divmod(self.n, self.batch_size)
        return full + (1 if rest and not self.drop_last else 0)

    def __iter__(self) -> Iterator[Tuple[npt.NDArray[np.int64], int]]:
        order = self.permutation()
        for b in range(len(self)):
            batch = order[b * self.batch_size:(b + 1) * self.batch_size]
            start, stop = shard_range(len(batch), self.size, self.rank)
            yield batch[start:stop], len(batch)
