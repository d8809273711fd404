"""DistributedSampler: every rank walks the same shuffled global batches and takes its slice.

All ranks draw the epoch's permutation from (seed, epoch), so they agree without talking. Each
global batch of `batch_size` samples splits with `shard_range`, so N ranks together see exactly
the batches one process sees, whatever N, and uneven splits never pad or drop a sample.
"""
import numpy as np

from ..sharding import shard_range


class DistributedSampler:
    """Yields (local_indices, global_batch_size) for each global batch of an epoch.

    With losses that are means over the batch, weight each rank's summed loss by
    size / global_batch_size: the average of the ranks' gradients is then the full batch's even
    when the local batches differ in length (e.g. the last batch, or B not divisible by N)."""

    def __init__(self, n, batch_size, rank=0, size=1, shuffle=True, seed=0, drop_last=False):
        self.n, self.batch_size = n, batch_size
        self.rank, self.size = rank, size
        self.shuffle, self.seed, self.drop_last = shuffle, seed, drop_last
        self.epoch = 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def permutation(self):
        if not self.shuffle:
            return np.arange(self.n)
        return np.random.default_rng((self.seed, self.epoch)).permutation(self.n)

    def __len__(self):
        full, rest = divmod(self.n, self.batch_size)
        return full + (1 if rest and not self.drop_last else 0)

    def __iter__(self):
        order = self.permutation()
        for b in range(len(self)):
            batch = order[b * self.batch_size:(b + 1) * self.batch_size]
            start, stop = shard_range(len(batch), self.size, self.rank)
            yield batch[start:stop], len(batch)
