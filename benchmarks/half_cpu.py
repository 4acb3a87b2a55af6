"""CPU half precision: examples/train_digits.py's AMP epoch against its float32 epoch, in one process.

On the CPU mixprec emulates float16/bfloat16 the way a GPU kernel computes them
(widen to float32, compute, round once per op), so AMP can only cost time here;
the goal is that it costs little: an AMP epoch <= 1.3x a float32 epoch.

The workload is train_digits' own: its CNN, its data (scikit-learn's 8x8
digits, 1,437 training images), batch 64, AdamW, a GradScaler (AMP only), every
step of an epoch as the script runs it (without the progress bar). The float32
and the AMP epoch take turns, ``--repeat`` times each after one warm-up epoch of
each; time is CPU time of this process (``time.process_time``), so a busy
machine slows both alike. Printed: the median seconds per epoch of each, and
the median over the rounds of AMP / float32.

    python benchmarks/half_cpu.py [--repeat 7] [--dtype float16]
    python benchmarks/half_cpu.py --profile 20     # cProfile of 20 AMP steps instead
"""
from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))
import mixprec as mp  # noqa: E402
from mixprec.nn import functional as F  # noqa: E402
from train_digits import load_data, make_model  # noqa: E402


class Run:
    """One training run of train_digits (model, AdamW, GradScaler) that trains an epoch per call."""

    def __init__(self, data, amp, dtype, batch=64, seed=0):
        self.x, _, self.y, _ = data
        self.amp, self.dtype, self.batch = amp, getattr(mp, dtype), batch
        mp.manual_seed(seed)
        self.model = make_model()
        self.model.train()
        self.optimizer = mp.optim.AdamW(self.model.parameters(), lr=3e-3, weight_decay=1e-4)
        self.scaler = mp.GradScaler("cpu", growth_interval=50, enabled=amp)
        self.order = np.random.default_rng(seed)

    def step(self, idx):
        x, y = mp.tensor(self.x[idx]), mp.tensor(self.y[idx])
        with mp.autocast("cpu", dtype=self.dtype, enabled=self.amp):
            loss = F.cross_entropy(self.model(x), y)
        self.optimizer.zero_grad()
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return loss.item()

    def epoch(self):
        """CPU seconds for one pass over the training set."""
        perm = self.order.permutation(len(self.x))
        start = time.process_time()
        for i in range(0, len(perm), self.batch):
            self.step(perm[i:i + self.batch])
        return time.process_time() - start


def profile(data, dtype, steps):
    import cProfile
    import pstats
    run = Run(data, amp=True, dtype=dtype)
    run.epoch()  # warm-up
    perm = run.order.permutation(len(run.x))
    prof = cProfile.Profile()
    prof.enable()
    for i in range(steps):
        run.step(perm[(i * run.batch) % len(perm):][:run.batch])
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(30)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7, help="epochs of each run after the warm-up")
    ap.add_argument("--dtype", default="float16", choices=["float16", "bfloat16"], help="autocast dtype")
    ap.add_argument("--profile", type=int, metavar="STEPS", help="cProfile this many AMP steps and stop")
    args = ap.parse_args(argv)
    data = load_data(0)
    if args.profile:
        return profile(data, args.dtype, args.profile)
    print(f"mixprec {mp.__version__}, numpy {np.__version__}, python {platform.python_version()} "
          f"on {platform.machine()}")
    runs = {"float32": Run(data, amp=False, dtype=args.dtype), "amp": Run(data, amp=True, dtype=args.dtype)}
    for run in runs.values():
        run.epoch()  # warm-up
    times = {name: [] for name in runs}
    for _ in range(args.repeat):
        for name, run in runs.items():
            times[name].append(run.epoch())
    ratios = [a / f for a, f in zip(times["amp"], times["float32"])]
    for name, t in times.items():
        label = "float32" if name == "float32" else f"AMP {args.dtype}"
        print(f"{label:>13} epoch: median {statistics.median(t):.3f} s CPU (min {min(t):.3f}, max {max(t):.3f})")
    print(f"AMP / float32: median {statistics.median(ratios):.2f} over {args.repeat} rounds "
          f"(min {min(ratios):.2f}, max {max(ratios):.2f})")


if __name__ == "__main__":
    main()
