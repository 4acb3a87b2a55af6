#!/usr/bin/env python3
"""The first minute on a GPU: does mixprec's CUDA path work at all?

    PYTHONPATH=. python tools/gpu_smoke.py

Each check prints one line, ``ok`` or ``FAILED`` with the reason, and every
check runs even when an earlier one failed. Exit status: 0 when all passed,
1 when one failed, 2 when there is no usable GPU. tools/gpu_check.py runs this
first (its "smoke" chunk), before the kernel parity suite and the main job.
"""
from __future__ import annotations

import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

import mixprec as mp  # noqa: E402
from mixprec import backend  # noqa: E402
from mixprec.backend import availability  # noqa: E402


def check_matmul():
    """float32 and float16 products on the GPU against float64 on the host."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((64, 48)), rng.standard_normal((48, 32))
    want = a @ b
    for dtype, tol in ((mp.float32, 1e-4), (mp.float16, 2e-2)):
        got = (mp.tensor(a, dtype=dtype, device="cuda") @ mp.tensor(b, dtype=dtype, device="cuda"))
        assert got.device.type == "cuda" and got.dtype == dtype, (got.device, got.dtype)
        err = np.abs(got.float().cpu().numpy() - want).max() / np.abs(want).max()
        assert err < tol, f"{dtype}: relative error {err:.2e} over {tol:.0e}"
    return "float32 and float16 match float64"


def _mlp_losses(device, dtype, steps=5):
    mp.manual_seed(0)
    model = mp.nn.Sequential(mp.nn.Linear(32, 64), mp.nn.ReLU(), mp.nn.Linear(64, 10)).to(device)
    opt = mp.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scaler = mp.amp.GradScaler(device, enabled=dtype == mp.float16)
    rng = np.random.default_rng(1)
    x = mp.tensor(rng.standard_normal((128, 32)), dtype=mp.float32, device=device)
    y = mp.tensor(rng.integers(0, 10, 128), device=device)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        with mp.autocast(device, dtype=dtype):
            loss = mp.nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    return losses, [p.detach().cpu().numpy() for p in model.parameters()]


def check_amp_step():
    """Five AMP steps (float16 with a GradScaler, bfloat16 without) on the GPU and on the CPU, from the same
    weights: the losses and the final weights agree at the low-precision tolerance."""
    lines = []
    for dtype, tol in ((mp.float16, 2e-2), (mp.bfloat16, 8e-2)):
        gpu_losses, gpu_params = _mlp_losses("cuda", dtype)
        cpu_losses, cpu_params = _mlp_losses("cpu", dtype)
        assert all(np.isfinite(gpu_losses)), gpu_losses
        assert gpu_losses[-1] < gpu_losses[0], f"{dtype}: the loss did not fall: {gpu_losses}"
        np.testing.assert_allclose(gpu_losses, cpu_losses, rtol=tol, atol=tol)
        for g, c in zip(gpu_params, cpu_params):
            np.testing.assert_allclose(g, c, rtol=tol, atol=tol)
        lines.append(f"{dtype}: loss {gpu_losses[0]:.3f} -> {gpu_losses[-1]:.3f}")
    return "; ".join(lines) + " (CPU agrees)"


def check_steady_tables():
    """A steady AMP loop (fused AdamW, GradScaler, zero_grad(set_to_none=True)): how many kernel tables its steps
    write. Gradients that move between steps (the memory pool's choice) need new tables; reported, not judged."""
    from mixprec.amp import _kernels
    mp.manual_seed(0)
    model = mp.nn.Sequential(mp.nn.Linear(32, 64), mp.nn.ReLU(), mp.nn.Linear(64, 10)).to("cuda")
    opt = mp.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    scaler = mp.amp.GradScaler("cuda")
    x, y = mp.randn(128, 32, device="cuda"), mp.randint(0, 10, (128,), device="cuda")

    def step():
        opt.zero_grad()
        with mp.autocast("cuda", dtype=mp.float16):
            loss = mp.nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss
    for _ in range(3):
        step()
    before = _kernels.TABLES.uploads
    for _ in range(5):
        loss = step()
    assert np.isfinite(loss.item())
    return f"{_kernels.TABLES.uploads - before} tables written over 5 steady steps"


CHECKS = [("one matmul", check_matmul), ("an AMP training step", check_amp_step),
          ("steady-step tables", check_steady_tables)]


def main() -> int:
    reason = availability.cuda_unavailable_reason()
    if reason is not None:
        print(f"no usable GPU: {reason}")
        return 2
    print(f"mixprec on {mp.cuda.get_device_name(0)}, CuPy {backend.cupy_module().__version__}", flush=True)
    failed = 0
    for name, check in CHECKS:
        start = time.perf_counter()
        try:
            detail = check()
            print(f"ok      {name}: {detail} ({time.perf_counter() - start:.1f} s)", flush=True)
        except Exception as exc:  # noqa: BLE001 - every failure is reported and the other checks still run
            failed += 1
            print(f"FAILED  {name}: {type(exc).__name__}: {exc}", flush=True)
            traceback.print_exc()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
