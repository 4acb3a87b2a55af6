"""The training set-up shared by the MPI worker (one process per rank) and the
single-process reference the tests compare it with: same data, same model,
same batches, same optimizer."""
from __future__ import annotations

import numpy as np

import mixprec as mp
from mixprec.distributed import DistributedSampler

N_SAMPLES = 98          # not a multiple of 4: the sampler pads with repeated indices
N_FEATURES, N_CLASSES = 64, 10   # the digits task's shape: 8x8 images, 10 classes
LOCAL_BATCH = 8
EPOCHS = 2
ACCUM_STEPS = 3         # steps of the gradient-accumulation run (2 micro-batches each)
LR, MOMENTUM = 0.1, 0.9


def make_data():
    rng = np.random.default_rng(1234)
    X = rng.standard_normal((N_SAMPLES, N_FEATURES)).astype(np.float32)
    w = rng.standard_normal((N_FEATURES, N_CLASSES)).astype(np.float32)
    y = (X @ w).argmax(axis=1).astype(np.int64)
    return X, y


def make_model(seed: int):
    mp.manual_seed(seed)
    return mp.nn.Sequential(mp.nn.Linear(N_FEATURES, 32), mp.nn.Tanh(), mp.nn.Linear(32, N_CLASSES))


def loss_fn(logits, y):
    return -mp.log_softmax(logits, dim=1)[mp.arange(len(y)), y].mean()


def make_optimizer(model):
    return mp.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)


def local_batches(rank: int, world: int, epoch: int):
    """Rank ``rank``'s mini-batches (index arrays) for one epoch."""
    sampler = DistributedSampler(N_SAMPLES, num_replicas=world, rank=rank, shuffle=True, seed=7)
    sampler.set_epoch(epoch)
    idx = sampler.indices()
    return [idx[i:i + LOCAL_BATCH] for i in range(0, len(idx), LOCAL_BATCH)]


def flat_params(model) -> np.ndarray:
    return np.concatenate([p.numpy().astype(np.float64).ravel() for p in model.parameters()])


def reference_training(world: int, accumulate: bool = False) -> np.ndarray:
    """One process trains on the concatenation of every rank's batch; returns the final parameters."""
    X, y = make_data()
    model = make_model(seed=100)  # rank 0's initial weights, which DDP broadcasts
    opt = make_optimizer(model)
    for epoch in range(1 if accumulate else EPOCHS):
        per_rank = [local_batches(r, world, epoch) for r in range(world)]
        n_steps = ACCUM_STEPS if accumulate else len(per_rank[0])
        for step in range(n_steps):
            idx = np.concatenate([per_rank[r][step] for r in range(world)])
            opt.zero_grad()
            loss_fn(model(mp.tensor(X[idx])), mp.tensor(y[idx])).backward()
            opt.step()
    return flat_params(model)
