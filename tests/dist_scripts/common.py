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



# ---- FP8 delayed scaling across ranks ----
FP8_STEPS = 3
FP8_BATCH = 8           # rows per rank; with 8 outputs the loss is a mean over 64 values (a power of two)
FP8_LR = 0.125


def fp8_model():
    mp.manual_seed(5)
    return mp.nn.Sequential(mp.nn.Linear(16, 32), mp.nn.ReLU(), mp.nn.Linear(32, 8))


def fp8_recipe(reduce_amax=True):
    return mp.amp.DelayedScaling(amax_history_len=4, reduce_amax=reduce_amax)


def fp8_batch(rank: int, step: int):
    """Rank ``rank``'s (input, target) at ``step``: inputs grow with the rank and targets shrink with it, so
    the input amaxes peak on the last rank and the gradient amaxes on the first."""
    rng = np.random.default_rng(1000 * step + rank)
    x = rng.standard_normal((FP8_BATCH, 16)).astype(np.float32) * np.float32(1 + rank)
    t = rng.standard_normal((FP8_BATCH, 8)).astype(np.float32) * np.float32(20.0 / (1 + rank))
    return x, t


def fp8_state(model) -> np.ndarray:
    """Each Linear's (3, 1 + history) block: its scales, then its amax histories (rows input, weight, grad)."""
    return np.stack([np.concatenate([m.fp8_scale.numpy()[:, None], m.fp8_amax_history.numpy()], axis=1)
                     for m in model if isinstance(m, mp.nn.Linear)])


def fp8_reference(world: int) -> np.ndarray:
    """One process trains on the concatenated batches with loss world * mean: every row's gradient is the one
    its rank sees, and every amax the maximum over the ranks; SGD with lr / world then takes DDP's step.
    Returns the FP8 state after each step."""
    model = fp8_model()
    opt = mp.optim.SGD(model.parameters(), lr=FP8_LR / world)
    states = []
    for step in range(FP8_STEPS):
        x, t = (np.concatenate(parts) for parts in zip(*[fp8_batch(r, step) for r in range(world)]))
        opt.zero_grad()
        with mp.amp.fp8_autocast(recipe=fp8_recipe()):
            loss = ((model(mp.tensor(x)) - mp.tensor(t)) ** 2).mean() * world
        loss.backward()
        opt.step()
        states.append(fp8_state(model))
    return np.stack(states)
