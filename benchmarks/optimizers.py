#!/usr/bin/env python3
"""Fused optimizer steps (fused=True) against per-tensor steps, for 10, 100 and 1,000 parameter tensors.

    python benchmarks/optimizers.py                       # the CPU (NumPy twin)
    python benchmarks/optimizers.py --device cuda         # a GPU (the kernels), also vs torch's CUDA fused Adam

The same total number of float32 elements (--numel, default 2**20) is split into N tensors, so that
what changes with N is the per-tensor cost. For SGD with momentum, Adam and AdamW it times one
optimizer.step() (gradients already in place, no GradScaler) per-tensor and fused, and prints the
per-tensor / fused ratio measured in the same process (the variants take turns within each round;
best of --repeat rounds of --number steps). On the CPU the clock is the process's CPU time
(time.process_time; every variant runs single-threaded), so that other jobs on a shared machine
do not count; on a GPU it is wall time around synchronized steps. With torch installed it also times torch's per-tensor
(foreach=False) and fused optimizers on the same tensors, so both libraries' ratios sit side by side.
On a GPU, time comes from CUDA events, and it prints mixprec kernel launches per fused step
(_kernels.launch_count(); a per-tensor step launches CuPy elementwise kernels instead, several per tensor).
"""
from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import mixprec as mp  # noqa: E402
from mixprec import backend  # noqa: E402
from mixprec.backend import availability  # noqa: E402
from mixprec.amp import _kernels  # noqa: E402

try:
    import torch
except ImportError:
    torch = None

COUNTS = (10, 100, 1000)
OPTIMIZERS = {"SGD momentum": ("SGD", dict(lr=0.01, momentum=0.9)), "Adam": ("Adam", dict(lr=1e-3)),
              "AdamW": ("AdamW", dict(lr=1e-3))}


def make_step(framework, cls, kw, arrays, grads, device, fused):
    """A zero-argument function that runs one optimizer step over fresh copies of the arrays."""
    if framework == "mp":
        params = [mp.nn.Parameter(mp.tensor(a, device=device)) for a in arrays]
        for p, g in zip(params, grads):
            p.grad = mp.tensor(g, device=device)
        opt = getattr(mp.optim, cls)(params, fused=fused, **kw)
    else:
        dev = "cuda" if device == "cuda" else "cpu"
        params = [torch.nn.Parameter(torch.tensor(a, device=dev)) for a in arrays]
        for p, g in zip(params, grads):
            p.grad = torch.tensor(g, device=dev)
        opt = getattr(torch.optim, cls)(params, **kw, **(dict(fused=True) if fused else dict(foreach=False)))
    opt.step()  # state made, kernels compiled
    return opt.step


def timed(fns, device, number, repeat):
    """Seconds per step of each function: best of `repeat` rounds of `number` steps, taking turns."""
    sync = backend.cupy_module().cuda.Device().synchronize if device == "cuda" else (lambda: None)
    clock = time.perf_counter if device == "cuda" else time.process_time
    best = {name: float("inf") for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            sync()
            t0 = clock()
            for _ in range(number):
                fn()
            sync()
            best[name] = min(best[name], (clock() - t0) / number)
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--numel", type=int, default=2 ** 20, help="float32 elements in all tensors together")
    ap.add_argument("--number", type=int, default=5, help="steps per timed round")
    ap.add_argument("--repeat", type=int, default=5, help="rounds (the best is kept)")
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args(argv)
    if args.device == "cuda" and availability.cuda_unavailable_reason() is not None:
        print(f"benchmarks/optimizers.py --device cuda: {availability.cuda_unavailable_reason()}", file=sys.stderr)
        return 2
    with_torch = torch is not None and not args.no_torch and (args.device == "cpu" or torch.cuda.is_available())
    if torch is not None and args.device == "cpu":
        torch.set_num_threads(1)  # NumPy's elementwise work is single-threaded too
    print(f"mixprec on {args.device}, {platform.processor() or platform.machine()}, Python "
          f"{platform.python_version()}, NumPy {np.__version__}"
          + (f", torch {torch.__version__}" if with_torch else " (no torch column)"))
    print(f"{args.numel} float32 elements split into N tensors; ms per optimizer.step() "
          f"({'wall' if args.device == 'cuda' else 'CPU'} time), best of {args.repeat} x {args.number}")
    head = f"{'optimizer':>13} {'N':>5} {'per-tensor':>11} {'fused':>8} {'ratio':>6}"
    head += f" {'launches':>9}" if args.device == "cuda" else ""
    head += f" {'torch':>8} {'torch fused':>12} {'ratio':>6} {'fused/torch fused':>18}" if with_torch else ""
    print(head)
    rng = np.random.default_rng(0)
    for label, (cls, kw) in OPTIMIZERS.items():
        for n in COUNTS:
            sizes = np.full(n, args.numel // n)
            arrays = [rng.standard_normal(int(s)).astype(np.float32) for s in sizes]
            grads = [rng.standard_normal(int(s)).astype(np.float32) for s in sizes]
            fns = {"mp": make_step("mp", cls, kw, arrays, grads, args.device, False),
                   "mp fused": make_step("mp", cls, kw, arrays, grads, args.device, True)}
            if with_torch:
                fns["torch"] = make_step("torch", cls, kw, arrays, grads, args.device, False)
                fns["torch fused"] = make_step("torch", cls, kw, arrays, grads, args.device, True)
            t = timed(fns, args.device, args.number, args.repeat)
            row = f"{label:>13} {n:5d} {t['mp'] * 1e3:11.2f} {t['mp fused'] * 1e3:8.2f} {t['mp'] / t['mp fused']:5.1f}x"
            if args.device == "cuda":
                before = _kernels.launch_count()
                fns["mp fused"]()
                row += f" {_kernels.launch_count() - before:9d}"
            if with_torch:
                row += (f" {t['torch'] * 1e3:8.2f} {t['torch fused'] * 1e3:12.2f} "
                        f"{t['torch'] / t['torch fused']:5.1f}x {t['mp fused'] / t['torch fused']:17.2f}x")
            print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
