"""Checkpoint and resume an AMP run, and show the continuation equals the uninterrupted run bit for bit.

    python examples/resume.py

Run A trains for --steps steps without stopping. Run B trains half of them,
saves one checkpoint (model, optimizer, GradScaler, LR scheduler, random
generator and step counter) with mp.save, throws everything away, rebuilds
the objects from a different seed, loads the checkpoint with mp.load and
trains the rest. Every parameter of A and B must then be identical, bit for
bit: that is what "resumable" means. The model has Dropout and BatchNorm and
the loss scaler starts high enough to overflow, so the random stream, the
running statistics and the scale trajectory all have to survive the restart.
"""
from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np
from threadpoolctl import threadpool_limits

import mixprec as mp
from mixprec import nn
from mixprec.nn import functional as F


def make_data(n=512):
    """Two noisy moons in 16 dimensions (a fixed NumPy seed: the data is not part of the run's state)."""
    rng = np.random.default_rng(1234)
    t = rng.random(n) * np.pi
    label = rng.integers(0, 2, n)
    xy = np.stack([np.cos(t) + label, np.sin(t) * (1 - 2 * label) + 0.5 * label], 1)
    x = np.concatenate([xy, rng.normal(0, 0.3, (n, 14))], 1).astype(np.float32)
    return x, label.astype(np.int64)


def build(seed, device, total_steps):
    """Model, optimizer, scheduler and scaler, freshly initialised from ``seed``."""
    mp.manual_seed(seed)
    model = nn.Sequential(nn.Linear(16, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Dropout(0.2),
                          nn.Linear(64, 2)).to(device)
    optimizer = mp.optim.AdamW(model.parameters(), lr=1e-2)
    scheduler = mp.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=total_steps, skip_unstepped=True)
    # a high initial scale and a short growth interval: the scale moves (and steps get skipped) during the run
    scaler = mp.GradScaler(mp.device(device).type, init_scale=2.0 ** 24, growth_interval=10)
    return model, optimizer, scheduler, scaler


def train(state, data, device, start, stop):
    model, optimizer, scheduler, scaler = state
    x, y = data
    model.train()
    for step in range(start, stop):
        idx = mp.randint(0, len(x), (64,)).numpy()  # drawn from mixprec's generator: part of the checkpoint
        xb, yb = mp.tensor(x[idx], device=device), mp.tensor(y[idx], device=device)
        with mp.autocast(mp.device(device).type, dtype=mp.float16):
            loss = F.cross_entropy(model(xb), yb)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
    return loss.item()


def save_checkpoint(path, state, step):
    model, optimizer, scheduler, scaler = state
    mp.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
             "scaler": scaler.state_dict(), "rng": mp.get_rng_state(), "step": step}, path)


def load_checkpoint(path, state, device):
    model, optimizer, scheduler, scaler = state
    ckpt = mp.load(path, map_location=device)
    model.load_state_dict(ckpt["model"])
    optimizer.load_state_dict(ckpt["optimizer"])
    scheduler.load_state_dict(ckpt["scheduler"])
    scaler.load_state_dict(ckpt["scaler"])
    mp.set_rng_state(ckpt["rng"])
    return ckpt["step"]


def main(argv=None):
    threadpool_limits(1, "blas")  # matrices this small: more BLAS threads only contend for the cores
    p = argparse.ArgumentParser(description="checkpoint/resume an AMP run and compare with an uninterrupted one")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--device", default="cuda" if mp.is_cuda_available() else "cpu")
    p.add_argument("--checkpoint", default=None, help="checkpoint path (default: a temporary file)")
    args = p.parse_args(argv)
    data = make_data()
    half = args.steps // 2

    run_a = build(0, args.device, args.steps)
    loss_a = train(run_a, data, args.device, 0, args.steps)

    run_b = build(0, args.device, args.steps)
    train(run_b, data, args.device, 0, half)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.checkpoint or os.path.join(tmp, "run.mpckpt")
        save_checkpoint(path, run_b, half)
        print(f"saved a checkpoint at step {half}: {os.path.getsize(path)} bytes, scale {run_b[3].get_scale():g}")
        del run_b
        run_b = build(99, args.device, args.steps)  # different weights: loading must overwrite everything
        start = load_checkpoint(path, run_b, args.device)
    loss_b = train(run_b, data, args.device, start, args.steps)

    same = all(np.array_equal(pa.numpy(), pb.numpy(), equal_nan=True)
               for pa, pb in zip(run_a[0].state_dict().values(), run_b[0].state_dict().values()))
    stats = run_a[3].statistics()
    print(f"final loss: uninterrupted {loss_a:.6f}, resumed {loss_b:.6f}; "
          f"scale {run_a[3].get_scale():g} vs {run_b[3].get_scale():g}; "
          f"skipped steps in the uninterrupted run: {stats['skipped_steps']}")
    print(f"resumed run equals the uninterrupted run bit for bit: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
