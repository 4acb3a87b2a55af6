"""The training set-up shared by the MPI worker (one process per rank) and the
single-process reference the tests compare it with: the digits data and CNN of
examples/train_digits.py, the same batches, the same optimizer."""
from __future__ import annotations

import functools
import os
import sys

import numpy as np

import mixprec as mp
from mixprec.distributed import DistributedSampler

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
import train_digits  # noqa: E402

LOCAL_BATCH = 8
EPOCHS = 2
STEPS = 4               # steps per epoch (the start of each epoch: enough to compare, quick on 2 cores)
LR, MOMENTUM = 0.05, 0.9


@functools.lru_cache(maxsize=None)
def make_data():
    """The example's training split: 1,437 images (not a multiple of 4, so the sampler pads)."""
    x_train, _, y_train, _ = train_digits.load_data(seed=0)
    return x_train, y_train


def make_model(seed: int):
    """The example's CNN, in eval mode: its Dropout draws different masks in different processes,
    which no single-process run could reproduce; everything else trains as usual."""
    mp.manual_seed(seed)
    return train_digits.make_model().eval()


def loss_fn(logits, y):
    return mp.nn.functional.cross_entropy(logits, y)


def make_optimizer(model):
    return mp.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)


def local_batches(rank: int, world: int, epoch: int):
    """Rank ``rank``'s first STEPS mini-batches (index arrays) of one epoch."""
    sampler = DistributedSampler(len(make_data()[1]), num_replicas=world, rank=rank, shuffle=True, seed=7)
    sampler.set_epoch(epoch)
    idx = sampler.indices()
    return [idx[i * LOCAL_BATCH:(i + 1) * LOCAL_BATCH] for i in range(STEPS)]


def flat_params(model) -> np.ndarray:
    return np.concatenate([p.numpy().astype(np.float64).ravel() for p in model.parameters()])


def reference_training(world: int, accumulate: bool = False) -> np.ndarray:
    """One process trains on the concatenation of every rank's batch; returns the final parameters."""
    X, y = make_data()
    model = make_model(seed=100)  # rank 0's initial weights, which DDP broadcasts
    opt = make_optimizer(model)
    for epoch in range(1 if accumulate else EPOCHS):
        per_rank = [local_batches(r, world, epoch) for r in range(world)]
        for step in range(STEPS):
            idx = np.concatenate([per_rank[r][step] for r in range(world)])
            opt.zero_grad()
            loss_fn(model(mp.tensor(X[idx])), mp.tensor(y[idx])).backward()
            opt.step()
    return flat_params(model)

