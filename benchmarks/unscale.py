#!/usr/bin/env python3
"""Fused non-finite check + unscale, and GradScaler's per-step cost, on a CUDA GPU.

    python benchmarks/unscale.py                  # all cases
    python benchmarks/unscale.py --repeat 50 --no-torch

Needs CuPy and a usable GPU (it exits with a one-line reason otherwise). For
each case (1 x 256M float32, 1,000 x 1M, 10,000 x 10k elements) it prints:
  copy      the device's copy bandwidth on the same bytes (cupy copyto, D2D): the ceiling;
  kernel    our kernel alone (table already on the device), GB/s and % of copy;
  call      mp.amp.functional.non_finite_check_and_unscale_ as a user calls it (Python
            bookkeeping included: reading every array's pointer to find its cached table);
  torch     torch._amp_foreach_non_finite_check_and_unscale_ on the same arrays (DLPack,
            zero-copy), when torch with CUDA is installed; "ours/torch" > 1 means faster;
  launches  kernels launched per unscale call.
GB/s counts the bytes read plus written (2 x the gradients' size). Times are CUDA-event
times over --repeat calls after a warm-up. Finally, the scaler's whole per-step overhead:
(scale + unscale_ + step + update) minus a plain optimizer.step on the same model, in µs.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

import mixprec as mp  # noqa: E402
from mixprec import backend  # noqa: E402
from mixprec.backend import availability  # noqa: E402
from mixprec.amp import _kernels  # noqa: E402
from mixprec.amp import functional as F  # noqa: E402
from mixprec.amp._layout import chunk_table  # noqa: E402

CASES = [("1 x 256M", 1, 256 * 2 ** 20), ("1,000 x 1M", 1000, 2 ** 20), ("10,000 x 10k", 10_000, 10_000)]


def timed(cp, fn, repeat):
    """Mean seconds per call, by CUDA events around `repeat` calls (after one warm-up call)."""
    fn()
    cp.cuda.Device().synchronize()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    for _ in range(repeat):
        fn()
    end.record()
    end.synchronize()
    return cp.cuda.get_elapsed_time(start, end) / 1e3 / repeat


def load_torch(enabled):
    if not enabled:
        return None, "disabled (--no-torch)"
    try:
        import torch
    except ImportError:
        return None, "torch is not installed"
    if not torch.cuda.is_available():
        return None, "torch has no CUDA"
    return torch, None


def bench_case(cp, torch, name, count, size, repeat):
    grads = [cp.random.standard_normal(size, dtype=np.float32) for _ in range(count)]
    nbytes = 2 * sum(g.nbytes for g in grads)
    found, inv = cp.zeros(1, np.float32), cp.ones(1, np.float32)  # inv = 1: values stay put between repeats
    # the copy ceiling: one device-to-device copy of the same bytes
    total = sum(g.size for g in grads)
    flat, flat_copy = cp.empty(total, np.float32), cp.empty(total, np.float32)
    t_copy = timed(cp, lambda: cp.copyto(flat_copy, flat), repeat)
    flat = flat_copy = None

    runner, device_id = _kernels.cuda_runner(), grads[0].device.id
    pointers = [g.data.ptr for g in grads]
    table = runner.upload(chunk_table((pointers, pointers), [g.size for g in grads], _kernels.CHUNK_SIZE), device_id)
    n_blocks = sum(-(-g.size // _kernels.CHUNK_SIZE) for g in grads)
    kernel = _kernels.unscale_kernel_name("float32", "float32")
    t_kernel = timed(cp, lambda: runner.launch("multi_tensor_unscale.cu", kernel, device_id, n_blocks,
                                               _kernels.THREADS, (table, found, inv)), repeat)

    launches = _kernels.launch_count()
    F.non_finite_check_and_unscale_(grads, found, inv)
    per_call = _kernels.launch_count() - launches
    t_call = timed(cp, lambda: F.non_finite_check_and_unscale_(grads, found, inv), repeat)

    row = {"case": name, "copy": nbytes / t_copy, "kernel": nbytes / t_kernel, "call": nbytes / t_call,
           "t_kernel": t_kernel, "t_call": t_call, "launches": per_call, "torch": None}
    if torch is not None:
        tg = [torch.from_dlpack(g) for g in grads]
        tf, ti = torch.zeros(1, device=tg[0].device), torch.ones(1, device=tg[0].device)
        torch.cuda.synchronize()
        t_torch = timed(cp, lambda: torch._amp_foreach_non_finite_check_and_unscale_(tg, tf, ti), repeat)
        row["torch"], row["t_torch"] = nbytes / t_torch, t_torch
    return row


def scaler_overhead(cp, repeat, n_params=64, size=65536):
    """µs per iteration that GradScaler adds to a plain step (a model with n_params float32 tensors)."""
    params = [mp.randn(size, device="cuda", requires_grad=True) for _ in range(n_params)]
    for p in params:
        p.grad = mp.randn(size, device="cuda")
    opt = mp.optim.SGD(params, lr=0.0)
    loss = mp.ones((), device="cuda")
    s = mp.amp.GradScaler("cuda")

    def scaled_step():
        s.scale(loss)
        s.unscale_(opt)
        s.step(opt)
        s.update()

    def host_time(fn):
        fn()
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        for _ in range(repeat):
            fn()
        cp.cuda.Device().synchronize()
        return (time.perf_counter() - t0) / repeat
    launches = _kernels.launch_count()
    scaled_step()
    fused = _kernels.launch_count() - launches
    t_scaled, t_plain = host_time(scaled_step), host_time(opt.step)
    return (t_scaled - t_plain) * 1e6, t_scaled * 1e6, t_plain * 1e6, fused


def main(argv=None):
    ap = argparse.ArgumentParser(description="fused unscale and GradScaler overhead on a GPU")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--no-torch", action="store_true", help="skip the torch comparison")
    args = ap.parse_args(argv)
    reason = availability.cuda_unavailable_reason()
    if reason is not None:
        sys.exit(f"benchmarks/unscale.py needs a CUDA GPU and CuPy: {reason}")
    cp = backend.cupy_module()
    torch, why_not = load_torch(not args.no_torch)
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    print(f"device: {props['name'].decode() if isinstance(props['name'], bytes) else props['name']}, "
          f"CuPy {cp.__version__}" + (f", torch {torch.__version__}" if torch else f" (torch: {why_not})"))
    print(f"{'case':>14} {'copy GB/s':>10} {'kernel GB/s':>12} {'% copy':>7} {'call GB/s':>10} "
          f"{'torch GB/s':>11} {'ours/torch':>11} {'launches':>9}")
    for name, count, size in CASES:
        r = bench_case(cp, torch, name, count, size, args.repeat)
        cp.get_default_memory_pool().free_all_blocks()
        ratio = f"{r['t_torch'] / r['t_call']:.2f}x" if r["torch"] else "n/a"
        print(f"{r['case']:>14} {r['copy'] / 1e9:10.0f} {r['kernel'] / 1e9:12.0f} "
              f"{100 * r['kernel'] / r['copy']:6.0f}% "
              f"{r['call'] / 1e9:10.0f} {(r['torch'] or 0) / 1e9:11.0f} {ratio:>11} {r['launches']:9d}")
    extra, scaled, plain, fused = scaler_overhead(cp, args.repeat)
    print(f"GradScaler per step (64 x 64k float32 params): scale+unscale_+step+update {scaled:.0f} µs, "
          f"plain step {plain:.0f} µs, overhead {extra:.0f} µs; fused kernels per step: {fused} "
          "(+1 elementwise multiply in scale())")


if __name__ == "__main__":
    main()
