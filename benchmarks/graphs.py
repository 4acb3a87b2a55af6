#!/usr/bin/env python3
"""A tiny-MLP AMP training step replayed from one CUDA graph against the same step run eagerly.

    python benchmarks/graphs.py                       # 64 -> 64 -> 10, batch 32
    python benchmarks/graphs.py --width 256 --steps 200

Needs CuPy and a usable GPU (it exits with a one-line reason otherwise). On a
tiny model a step is launch- and Python-bound: a graph replays every kernel
with one launch and no Python. Two figures, CUDA-event milliseconds per step:

- whole step: forward, scaled backward, unscale_, SGD step, update, captured
  with mp.cuda.graph (needs a capturable GradScaler; if the capture fails the
  error is printed instead of a time);
- forward + backward only: mp.cuda.make_graphed_callables on the model, the
  scaler and optimizer eager.

graphed / eager below 1 means the graph is faster (the goal for the whole
step: <= 0.5).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import mixprec as mp  # noqa: E402
from benchmarks.amp_step import timed_ms  # noqa: E402
from mixprec import backend  # noqa: E402
from mixprec.backend import availability  # noqa: E402


def setup(args):
    mp.manual_seed(0)
    model = mp.nn.Sequential(mp.nn.Linear(args.width, args.width), mp.nn.ReLU(),
                             mp.nn.Linear(args.width, 10)).to("cuda")
    opt = mp.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    scaler = mp.amp.GradScaler("cuda")
    x = mp.randn(args.batch, args.width, device="cuda")
    y = mp.randint(0, 10, (args.batch,), device="cuda")
    return model, opt, scaler, x, y


def amp_step(model, opt, scaler, x, y, forward=None):
    opt.zero_grad(set_to_none=True)
    with mp.autocast("cuda", dtype=mp.float16, cache_enabled=forward is None):
        loss = mp.nn.functional.cross_entropy((forward or model)(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    scaler.step(opt)
    scaler.update()


def main(argv=None):
    ap = argparse.ArgumentParser(description="graphed vs eager tiny-MLP AMP step on a GPU")
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args(argv)
    reason = availability.cuda_unavailable_reason()
    if reason is not None:
        sys.exit(f"benchmarks/graphs.py needs a CUDA GPU and CuPy: {reason}")
    print(f"device: {mp.cuda.get_device_name()}, CuPy {backend.cupy_module().__version__}")
    print(f"model: Linear({args.width}, {args.width}), ReLU, Linear({args.width}, 10); batch {args.batch}; "
          f"autocast float16 + GradScaler + SGD momentum; {args.steps} timed steps")

    def events():
        return mp.cuda.Event(enable_timing=True), mp.cuda.Event(enable_timing=True)

    model, opt, scaler, x, y = setup(args)
    eager = timed_ms(lambda: amp_step(model, opt, scaler, x, y), *events(), mp.cuda.synchronize, args)
    print(f"  eager step                 {eager:9.4f} ms/step")

    try:
        model, opt, scaler, x, y = setup(args)
        for _ in range(3):  # warm-up: kernels compiled, momentum buffers and scaler state made
            amp_step(model, opt, scaler, x, y)
        mp.cuda.synchronize()
        g = mp.cuda.CUDAGraph()
        with mp.cuda.graph(g):
            amp_step(model, opt, scaler, x, y)
        whole = timed_ms(g.replay, *events(), mp.cuda.synchronize, args)
        print(f"  graphed whole step         {whole:9.4f} ms/step   graphed / eager = {whole / eager:.2f}  "
              "(goal <= 0.5)")
    except Exception as exc:  # reported, not fatal: the fwd+bwd figure below still means something
        print(f"  graphed whole step         capture failed: {type(exc).__name__}: {str(exc).splitlines()[0]}")

    model, opt, scaler, x, y = setup(args)
    with mp.autocast("cuda", dtype=mp.float16, cache_enabled=False):
        graphed = mp.cuda.make_graphed_callables(model, (x,))
    fwd_bwd = timed_ms(lambda: amp_step(model, opt, scaler, x, y, forward=graphed), *events(),
                       mp.cuda.synchronize, args)
    print(f"  graphed forward+backward   {fwd_bwd:9.4f} ms/step   graphed / eager = {fwd_bwd / eager:.2f}")


if __name__ == "__main__":
    main()
