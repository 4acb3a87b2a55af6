#!/usr/bin/env python3
"""One AMP training step against a float32 step, and against torch's AMP step, on a CUDA GPU.

    python benchmarks/amp_step.py                     # 4 x Linear(4096, 4096) + ReLU, batch 512
    python benchmarks/amp_step.py --width 1024 --steps 10 --no-torch

Needs CuPy and a usable GPU (it exits with a one-line reason otherwise). The
step is zero_grad, forward, cross_entropy, backward, SGD with momentum; the
AMP step adds autocast(float16) and a GradScaler (scale, unscale_, step,
update). Times are CUDA-event milliseconds per step over --steps steps after
--warmup, each framework timing its own step in this process. Printed: ms
per step, AMP / float32 (below 1 means AMP pays off), and mixprec AMP / torch
AMP (the goal: <= 1.2 on a 4096-wide MLP).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import mixprec as mp  # noqa: E402
from benchmarks.unscale import load_torch  # noqa: E402
from mixprec import backend  # noqa: E402
from mixprec.backend import availability  # noqa: E402


def mixprec_step(args, amp: bool):
    """A closure running one mixprec training step."""
    mp.manual_seed(0)
    layers = []
    for _ in range(args.depth):
        layers += [mp.nn.Linear(args.width, args.width), mp.nn.ReLU()]
    model = mp.nn.Sequential(*layers, mp.nn.Linear(args.width, 10)).to("cuda")
    opt = mp.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    scaler = mp.amp.GradScaler("cuda", enabled=amp)
    x = mp.randn(args.batch, args.width, device="cuda")
    y = mp.randint(0, 10, (args.batch,), device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        with mp.autocast("cuda", dtype=mp.float16, enabled=amp):
            loss = mp.nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    return step


def torch_step(torch, args, amp: bool):
    torch.manual_seed(0)
    layers = []
    for _ in range(args.depth):
        layers += [torch.nn.Linear(args.width, args.width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(args.width, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda", enabled=amp)
    x = torch.randn(args.batch, args.width, device="cuda")
    y = torch.randint(0, 10, (args.batch,), device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16, enabled=amp):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    return step


def timed_ms(step, start, end, sync, args) -> float:
    """Milliseconds per step between two events around args.steps steps (after args.warmup)."""
    for _ in range(args.warmup):
        step()
    sync()
    start.record()
    for _ in range(args.steps):
        step()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / args.steps


def main(argv=None):
    ap = argparse.ArgumentParser(description="AMP step vs float32 step vs torch AMP on a GPU")
    ap.add_argument("--width", type=int, default=4096)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--no-torch", action="store_true", help="skip the torch comparison")
    args = ap.parse_args(argv)
    reason = availability.cuda_unavailable_reason()
    if reason is not None:
        sys.exit(f"benchmarks/amp_step.py needs a CUDA GPU and CuPy: {reason}")
    torch, why_not = load_torch(not args.no_torch)
    print(f"device: {mp.cuda.get_device_name()}, CuPy {backend.cupy_module().__version__}"
          + (f", torch {torch.__version__}" if torch else f" (torch: {why_not})"))
    print(f"model: {args.depth} x [Linear({args.width}, {args.width}), ReLU] + Linear({args.width}, 10); "
          f"batch {args.batch}; SGD momentum; {args.steps} timed steps after {args.warmup} warm-up")

    def ours(amp):
        return timed_ms(mixprec_step(args, amp), mp.cuda.Event(enable_timing=True),
                        mp.cuda.Event(enable_timing=True), mp.cuda.synchronize, args)

    rows = {"mixprec float32": ours(False), "mixprec AMP": ours(True)}
    if torch is not None:
        def theirs(amp):
            return timed_ms(torch_step(torch, args, amp), torch.cuda.Event(enable_timing=True),
                            torch.cuda.Event(enable_timing=True), torch.cuda.synchronize, args)
        rows.update({"torch float32": theirs(False), "torch AMP": theirs(True)})
    for name, ms in rows.items():
        print(f"  {name:<16} {ms:9.3f} ms/step")
    print(f"mixprec AMP / mixprec float32 = {rows['mixprec AMP'] / rows['mixprec float32']:.2f}")
    if torch is not None:
        print(f"torch AMP / torch float32     = {rows['torch AMP'] / rows['torch float32']:.2f}")
        print(f"mixprec AMP / torch AMP       = {rows['mixprec AMP'] / rows['torch AMP']:.2f}  (goal <= 1.2)")


if __name__ == "__main__":
    main()
