"""DistributedSampler: each rank's share of a dataset's indices, with torch's semantics.

Every rank draws the same permutation (seeded by ``seed + epoch``) and takes
every ``num_replicas``-th index starting at its rank, so the shares are
disjoint and together cover the dataset. When the length does not divide
evenly, ``drop_last=False`` pads by repeating indices from the start (every
rank gets the same count, a few samples are seen twice) and
``drop_last=True`` drops the tail instead. Call ``set_epoch(e)`` before each
epoch, or every epoch repeats the same order.
"""
from __future__ import annotations

import math

import numpy as np

from . import process_group as _pg


class DistributedSampler:
    """Iterate over this rank's indices into ``dataset`` (anything with ``len()``, or a length)."""

    def __init__(self, dataset, num_replicas: int | None = None, rank: int | None = None, shuffle: bool = True,
                 seed: int = 0, drop_last: bool = False):
        n = dataset if isinstance(dataset, (int, np.integer)) and not isinstance(dataset, bool) else None
        if n is None:
            try:
                n = len(dataset)
            except TypeError:
                raise TypeError(f"DistributedSampler needs a dataset with len() or an int length, "
                                f"got {type(dataset).__name__}") from None
        if n < 0:
            raise ValueError(f"dataset length must be >= 0, got {n}")
        if num_replicas is None:
            num_replicas = _world_or_error("num_replicas", _pg.get_world_size)
        if rank is None:
            rank = _world_or_error("rank", _pg.get_rank)
        if not isinstance(num_replicas, (int, np.integer)) or num_replicas < 1:
            raise ValueError(f"num_replicas must be a positive int, got {num_replicas!r}")
        if not isinstance(rank, (int, np.integer)) or not 0 <= rank < num_replicas:
            raise ValueError(f"invalid rank {rank!r}: rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset_len = int(n)
        self.num_replicas, self.rank = int(num_replicas), int(rank)
        self.shuffle, self.seed, self.drop_last = bool(shuffle), int(seed), bool(drop_last)
        self.epoch = 0
        if self.drop_last and n % self.num_replicas:
            self.num_samples = math.ceil((n - self.num_replicas) / self.num_replicas)
        else:
            self.num_samples = math.ceil(n / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def set_epoch(self, epoch: int) -> None:
        """Reshuffle for this epoch (the same order on every rank, a different one per epoch)."""
        self.epoch = int(epoch)

    def indices(self) -> np.ndarray:
        """This rank's indices for the current epoch, as an int64 array."""
        n = self.dataset_len
        if self.shuffle:
            order = np.random.default_rng(self.seed + self.epoch).permutation(n)
        else:
            order = np.arange(n)
        if self.drop_last:
            order = order[:self.total_size]
        elif self.total_size > n and n > 0:
            order = np.resize(order, self.total_size)  # repeats from the start, as often as needed
        return order[self.rank:self.total_size:self.num_replicas].astype(np.int64)

    def __iter__(self):
        return iter(self.indices().tolist())

    def __len__(self):
        return self.num_samples


def _world_or_error(what, getter):
    if not _pg.is_initialized():
        raise RuntimeError(f"DistributedSampler: pass {what}= or call mp.distributed.init_process_group() "
                           "first")
    return getter()
