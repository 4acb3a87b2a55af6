#!/usr/bin/env python3
"""Step time and memory of the opt levels O0-O3 (mp.amp.initialize) on the same model.

    python benchmarks/opt_levels.py                      # GPU when CuPy finds one, else the CPU
    python benchmarks/opt_levels.py --device cuda --width 4096 --depth 8 --batch 1024
    python benchmarks/opt_levels.py --optimizer adam     # Adam state in the memory columns (see O3 below)

The model is an MLP of --depth blocks (Linear width x width, LayerNorm, ReLU) and
a 10-way classifier, trained with cross entropy on random data, built from the
same seed for every level. For each level it prints:

  ms/step       one full step (zero_grad, forward, scaled backward, scaler.step,
                scaler.update), mean over --steps after --warmup steps; on CUDA
                the device is synchronised before the clock is read.
  vs O0         O0's time / this level's time, measured in the same process (> 1: faster).
  B/param       bytes per parameter the training state holds, measured on the
                actual tensors: model weights, their gradients, float32 masters and
                their gradients (O2), optimizer state.
  peak MiB      GPU only: the most memory the CuPy pool had handed out during
                the timed steps (a CuPy memory hook), weights and activations included.
  vs O0         O0's peak / this level's peak.
  skipped       steps the scaler skipped while timing (a skipped step does not run
                the optimizer, so its time is not comparable: it is flagged).

On the CPU there is no peak-memory column: NumPy's allocations are not pooled
and the float16 arithmetic is emulated (widened to float32), so CPU step times
say little about a GPU; they are printed so the script can be checked anywhere.
The default optimizer is SGD with momentum, which trains at every level. With
--optimizer adam, pure-float16 O3 breaks (Adam's eps and second moment underflow
in float16; docs/opt-levels.md) and its steps are then skipped.
"""
from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import mixprec as mp  # noqa: E402
from mixprec import backend, nn  # noqa: E402
from mixprec.backend import availability  # noqa: E402
from mixprec.nn import functional as F  # noqa: E402

LEVELS = ("O0", "O1", "O2", "O3")


def make_model(width, depth):
    blocks = []
    for _ in range(depth):
        blocks += [nn.Linear(width, width), nn.LayerNorm(width), nn.ReLU()]
    return nn.Sequential(*blocks, nn.Linear(width, 10))


def state_bytes(model, opt):
    """Bytes of weights, gradients, masters, master gradients and optimizer state; and the parameter count."""
    seen, total = set(), 0

    def add(array):
        nonlocal total
        if array is not None and id(array) not in seen:
            seen.add(id(array))
            total += array.nbytes
    for p in list(model.parameters()) + list(mp.amp.master_params(opt)):
        add(p._array)
        add(None if p.grad is None else p.grad._array)
    for state in opt.state.values():
        for v in state.values():
            add(v if backend.is_array(v) else None)
    return total, sum(p.numel() for p in model.parameters())


class PeakMemory:
    """Peak bytes handed out by the CuPy memory pool inside `with` (a MemoryHook), plus what was in use before."""

    def __init__(self, cp):
        self.cp = cp
        outer = self

        class Hook(cp.cuda.MemoryHook):
            name = "mixprec_peak"

            def malloc_postprocess(self, **kw):
                outer.used += kw["mem_size"]
                outer.peak = max(outer.peak, outer.used)

            def free_postprocess(self, **kw):
                outer.used -= kw["mem_size"]
        self.hook = Hook()

    def __enter__(self):
        self.used = self.peak = self.cp.get_default_memory_pool().used_bytes()
        self.hook.__enter__()
        return self

    def __exit__(self, *exc):
        self.hook.__exit__(*exc)
        return False


def bench_level(level, args, device, cp):
    mp.manual_seed(0)
    model = make_model(args.width, args.depth).to(device)
    opt = (mp.optim.Adam(model.parameters(), lr=1e-3) if args.optimizer == "adam"
           else mp.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9))
    model, opt = mp.amp.initialize(model, opt, level, dtype=getattr(mp, args.dtype))
    scaler = mp.amp.loss_scaler()
    rng = np.random.default_rng(0)
    x = mp.tensor(rng.standard_normal((args.batch, args.width)).astype(np.float32), device=device)
    y = mp.tensor(rng.integers(0, 10, args.batch), device=device)
    skipped = 0

    def step():
        nonlocal skipped
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        skipped += bool(scaler.last_step_skipped)

    def sync():
        if cp is not None:
            cp.cuda.Device().synchronize()
    for _ in range(args.warmup):
        step()
    sync()
    skipped = 0
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    sync()
    seconds = (time.perf_counter() - t0) / args.steps
    timed_skips = skipped
    peak = None
    if cp is not None:
        with PeakMemory(cp) as mem:
            for _ in range(3):
                step()
            sync()
        peak = mem.peak
    nbytes, n_params = state_bytes(model, opt)
    return {"level": level, "seconds": seconds, "bytes_per_param": nbytes / n_params, "peak": peak,
            "skipped": timed_skips, "params": n_params}


def main(argv=None):
    default_device = "cuda" if mp.is_cuda_available() else "cpu"
    ap = argparse.ArgumentParser(description="step time and memory of O0-O3 on one model")
    ap.add_argument("--device", default=default_device, help=f"cpu or cuda (default here: {default_device})")
    ap.add_argument("--width", type=int, default=None, help="hidden width (default 2048 on cuda, 256 on cpu)")
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--batch", type=int, default=None, help="batch size (default 1024 on cuda, 128 on cpu)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--optimizer", choices=("sgd", "adam"), default="sgd")
    ap.add_argument("--dtype", choices=("float16", "bfloat16"), default="float16")
    args = ap.parse_args(argv)
    device = args.device
    on_gpu = device.startswith("cuda")
    if on_gpu:
        reason = availability.cuda_unavailable_reason()
        if reason is not None:
            sys.exit(f"benchmarks/opt_levels.py --device cuda needs a CUDA GPU and CuPy: {reason}")
    args.width = args.width or (2048 if on_gpu else 256)
    args.batch = args.batch or (1024 if on_gpu else 128)
    cp = backend.cupy_module() if on_gpu else None
    if cp is not None:
        props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
        name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        print(f"device: {name}, CuPy {cp.__version__}")
    else:
        print(f"device: CPU ({platform.processor() or platform.machine()}), NumPy {np.__version__}. CPU run: step "
              "time only (no GPU memory), and float16 math is emulated on the CPU: not a GPU prediction.")
    print(f"model: {args.depth} x [Linear({args.width}, {args.width}), LayerNorm, ReLU] + Linear({args.width}, 10); "
          f"batch {args.batch}; {args.optimizer}; dtype {args.dtype}; {args.steps} timed steps after "
          f"{args.warmup} warm-up")
    rows = [bench_level(level, args, device, cp) for level in LEVELS]
    base = rows[0]
    print(f"parameters: {base['params']:,}")
    head = f"{'level':>5} {'ms/step':>9} {'vs O0':>7} {'B/param':>8}"
    if cp is not None:
        head += f" {'peak MiB':>9} {'vs O0':>7}"
    print(head + f" {'skipped':>8}")
    for r in rows:
        line = (f"{r['level']:>5} {1e3 * r['seconds']:9.2f} {base['seconds'] / r['seconds']:6.2f}x "
                f"{r['bytes_per_param']:8.1f}")
        if cp is not None:
            line += f" {r['peak'] / 2 ** 20:9.1f} {base['peak'] / r['peak']:6.2f}x"
        flag = "  (skipped steps run no optimizer: time not comparable)" if r["skipped"] else ""
        print(line + f" {r['skipped']:>8}{flag}")


if __name__ == "__main__":
    main()
