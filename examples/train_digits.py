"""Train a small CNN on handwritten digits with automatic mixed precision (autocast + GradScaler).

    pip install ".[examples]" && python examples/train_digits.py

The data is the 8x8 digits set that scikit-learn ships (1,797 images, no
download). The script trains the same network twice from the same seed, once
in plain float32 and once with AMP, prints the test accuracy, the number of
steps the loss scaler skipped and the time per epoch of each run, and writes a
PNG with the AMP run's loss curve and loss-scale trajectory.

What AMP means here, in four lines of the training step:

    with mp.autocast(device_type, dtype=float16):   # matmuls/convs run in float16,
        loss = F.cross_entropy(model(x), y)         # softmax/losses stay in float32
    scaler.scale(loss).backward()                   # multiply the loss so small grads survive float16
    scaler.step(optimizer); scaler.update()         # unscale, skip the step on inf/NaN, adapt the scale

Runs on the GPU when CuPy finds one (--device cuda), otherwise on the CPU.
Data-parallel on several processes (docs/distributed.md), e.g. 4 CPU processes:

    mpirun -n 4 python examples/train_digits.py --distributed
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
from threadpoolctl import threadpool_limits

import mixprec as mp
from mixprec import nn
from mixprec.nn import functional as F


def parse_args(argv=None):
    default_device = "cuda" if mp.is_cuda_available() else "cpu"
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=int, default=20, help="passes over the training set (default 20)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3, help="peak learning rate of AdamW (default 3e-3)")
    p.add_argument("--device", default=default_device, help=f"cpu or cuda (default here: {default_device})")
    # float16 by default on both devices. On a GPU it is what tensor cores run
    # fastest and autocast's CUDA default. On the CPU torch's default would be
    # bfloat16, but bfloat16 has float32's exponent range, so its gradients
    # (almost) never overflow and the loss scaler has nothing to do; float16's
    # narrow range (max 65504) is the case the GradScaler exists for, and a CPU
    # run with it rehearses exactly what happens on a GPU. --dtype bfloat16 works too.
    p.add_argument("--dtype", default="float16", choices=["float16", "bfloat16"], help="autocast dtype")
    p.add_argument("--out", default="train_digits.png", help="where to write the loss/scale plot")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-fp32", action="store_true", help="skip the float32 baseline run (no time comparison)")
    p.add_argument("--distributed", action="store_true",
                   help="one rank per process of an mpirun/torchrun job (nccl on GPUs, mpi on CPUs); "
                        "--batch-size stays the global batch, split evenly across the ranks")
    return p.parse_args(argv)


def load_data(seed):
    """Images scaled to [0, 1] as (N, 1, 8, 8) float32, labels int64; a stratified 80/20 split."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None]
    y = digits.target.astype(np.int64)
    return train_test_split(x, y, test_size=0.2, random_state=seed, stratify=y)


def make_model():
    """Two conv blocks and a small classifier: 1x8x8 -> 16x4x4 -> 32x2x2 -> 10 logits."""
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 2 * 2, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 10))


def train(data, args, amp: bool):
    """One full training run; returns the model, the per-step history and the seconds per epoch."""
    from tqdm import tqdm
    x_train, _, y_train, _ = data
    device = mp.device(args.device)
    dtype = getattr(mp, args.dtype)
    mp.manual_seed(args.seed)  # both runs start from the same weights and see the same batches
    model = make_model().to(device)
    batch, sampler = args.batch_size, None
    if args.distributed:  # each rank trains on its share; backward averages the gradients over the ranks
        dist = mp.distributed
        model = dist.DistributedDataParallel(model)
        sampler = dist.DistributedSampler(len(x_train), shuffle=True, seed=args.seed)
        batch = args.batch_size // dist.get_world_size()
    optimizer = mp.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    steps_per_epoch = -(-(len(sampler) if sampler else len(x_train)) // batch)
    total = args.epochs * steps_per_epoch
    # The warm-up counts real updates: skip_unstepped leaves the schedule where it is
    # when the scaler skipped optimizer.step() because the gradients overflowed.
    warmup = min(50, total // 4 or 1)
    scheduler = mp.optim.lr_scheduler.SequentialLR(optimizer, [
        mp.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=warmup),
        mp.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max(total - warmup, 1))],
        milestones=[warmup], skip_unstepped=True)
    # growth_interval=50 instead of torch's 2000: a run this short would never grow the scale
    scaler = mp.GradScaler(device.type, growth_interval=50, enabled=amp)
    if args.distributed:
        dist.sync_scaler(scaler)  # if any rank overflows, every rank skips the step
    history = {"loss": [], "scale": [], "skipped": []}
    order = np.random.default_rng(args.seed)
    bar = tqdm(total=total, desc=f"{'AMP ' + args.dtype if amp else 'float32':>12}", unit="step", leave=True,
               disable=args.distributed and mp.distributed.get_rank() != 0)
    epoch_times = []
    model.train()
    for epoch in range(args.epochs):
        start = time.perf_counter()
        if sampler:
            sampler.set_epoch(epoch)
        perm = sampler.indices() if sampler else order.permutation(len(x_train))
        for i in range(0, len(perm), batch):
            idx = perm[i:i + batch]
            x = mp.tensor(x_train[idx], device=device)
            y = mp.tensor(y_train[idx], device=device)
            with mp.autocast(device.type, dtype=dtype, enabled=amp):
                loss = F.cross_entropy(model(x), y)  # float32: cross_entropy is on autocast's fp32 list
            optimizer.zero_grad()
            scale = scaler.get_scale()
            scaler.scale(loss).backward()             # (distributed: also averages over the ranks)
            scaler.step(optimizer)                    # skips optimizer.step() if a gradient is inf/NaN
            scaler.update()
            scheduler.step()
            history["loss"].append(loss.item())
            history["scale"].append(scale)
            history["skipped"].append(bool(scaler.last_step_skipped))
            bar.update()
            bar.set_postfix(epoch=epoch + 1, loss=f"{history['loss'][-1]:.3f}", scale=f"{scaler.get_scale():g}")
        epoch_times.append(time.perf_counter() - start)
    bar.close()
    return model, history, epoch_times


def accuracy(model, x, y, args, amp):
    model.eval()
    correct = 0
    with mp.no_grad(), mp.autocast(args.device.split(":")[0], dtype=getattr(mp, args.dtype), enabled=amp):
        for i in range(0, len(x), 256):
            logits = model(mp.tensor(x[i:i + 256], device=args.device))
            correct += int((logits.argmax(dim=1).numpy() == y[i:i + 256]).sum())
    return correct / len(x)


def plot(history, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    steps = np.arange(len(history["loss"]))
    skipped = np.array(history["skipped"])
    scaled = any(s != 1.0 for s in history["scale"]) or skipped.any()
    fig, axes = plt.subplots(2 if scaled else 1, 1, figsize=(8, 6 if scaled else 3.5), sharex=True, squeeze=False)
    ax1 = axes[0, 0]
    ax1.plot(steps, history["loss"], lw=1, label="training loss")
    ax1.set_ylabel("cross entropy")
    ax1.set_yscale("log")
    ax1.set_title(title if scaled else title + " (no loss scaling)")
    ax1.legend()
    if scaled:  # a run without loss scaling (bfloat16) has no scale to draw
        ax2 = axes[1, 0]
        ax2.step(steps, history["scale"], where="post", lw=1.5, label="loss scale")
        if skipped.any():
            ax2.scatter(steps[skipped], np.array(history["scale"])[skipped], color="red", marker="x", zorder=3,
                        label=f"skipped step (inf/NaN gradient), {int(skipped.sum())} in all")
        ax2.set_yscale("log", base=2)
        ax2.set_ylabel("loss scale")
        ax2.legend()
    axes[-1, 0].set_xlabel("optimizer step")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    args = parse_args(argv)
    threadpool_limits(1, "blas")  # matrices this small: more BLAS threads only contend for the cores
    if args.distributed:
        mp.distributed.init_process_group("nccl" if args.device.startswith("cuda") else "mpi")
        args.device = str(mp.distributed.get_device())  # nccl: this rank's own GPU
        if args.batch_size % mp.distributed.get_world_size():
            raise SystemExit(f"--batch-size {args.batch_size} must be a multiple of the "
                             f"{mp.distributed.get_world_size()} ranks")
        if mp.distributed.get_rank() != 0:  # every rank trains; rank 0 reports and plots
            sys.stdout = open(os.devnull, "w")
    data = load_data(args.seed)
    _, x_test, _, y_test = data
    print(f"mixprec {mp.__version__} on {args.device}: {len(data[0])} training and {len(x_test)} test images, "
          f"autocast dtype {args.dtype}")
    times = {}
    if not args.no_fp32:
        model32, _, times["float32"] = train(data, args, amp=False)
        print(f"float32 test accuracy: {accuracy(model32, x_test, y_test, args, amp=False):.4f}")
    model, history, times["amp"] = train(data, args, amp=True)
    if os.path.dirname(args.out):
        os.makedirs(os.path.dirname(args.out), exist_ok=True)
    if not args.distributed or mp.distributed.get_rank() == 0:
        plot(history, args.out, f"AMP ({args.dtype}) on {args.device}: loss and loss scale")
    skipped = sum(history["skipped"])
    print(f"skipped steps: {skipped} of {len(history['skipped'])} (gradient overflow at the current loss scale)")
    for name, t in times.items():
        # the first epoch includes warm-up costs; the median is the steady rate
        print(f"time per epoch, {name:>7}: {np.median(t):.3f} s")
    if args.device.startswith("cpu"):
        print("(on a CPU half precision is emulated, so AMP is not faster here; the arithmetic is the "
              "same as on a GPU, where float16 runs on tensor cores)")
    print(f"wrote {args.out}")
    print(f"AMP ({args.dtype}) test accuracy: {accuracy(model, x_test, y_test, args, amp=True):.4f}")
    if args.distributed:
        mp.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
