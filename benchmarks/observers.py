"""What watching ops costs: the digits CNN under AMP with and without mixprec's dispatch observers.

The model is examples/train_digits.py's CNN on a batch of 8x8 images under
autocast (float16). Two workloads, each timed plain and with one tool attached:

  forward   model(x) and the loss
  step      forward, scaled backward (loss scale 2^16), no optimizer step

Tools: mp.amp.trace (records each call), mp.profiler.profile (times each call),
mp.amp.inspect (runs every op again in float32 twice and measures it). Figures
are the best of ``--repeat`` runs of ``--number`` calls, the variants taking
turns within each round, reported as time per call and as the ratio to the
plain run in this process.

    python benchmarks/observers.py [--batch 64] [--number 10] [--repeat 5] [--device cpu]
"""
from __future__ import annotations

import argparse
import contextlib
import platform
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "benchmarks"))
import mixprec as mp  # noqa: E402
from dispatch import best_times  # noqa: E402  (the same timing loop as the dispatch benchmark)
from train_digits import make_model  # noqa: E402

TOOLS = {
    "plain": contextlib.nullcontext,
    "trace": mp.amp.trace,
    "profiler": lambda: mp.profiler.profile(activities=[mp.profiler.ProfilerActivity.CPU]),
    "inspect": mp.amp.inspect,
}


def workloads(batch, device):
    mp.manual_seed(0)
    model = make_model().to(device)
    x = mp.rand(batch, 1, 8, 8, device=device)
    y = mp.randint(0, 10, (batch,), device=device)
    F = mp.nn.functional
    dtype = mp.float16

    def forward():
        with mp.autocast(device.split(":")[0], dtype=dtype):
            return F.cross_entropy(model(x), y)

    def step():
        loss = forward()
        (loss * 65536.0).backward()
        for p in model.parameters():
            p.grad = None

    def under(tool, fn):
        def run():
            with tool():
                fn()
        return run
    return {(work, name): under(tool, fn) for work, fn in (("forward", forward), ("step", step))
            for name, tool in TOOLS.items()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--number", type=int, default=10, help="calls per timing run")
    ap.add_argument("--repeat", type=int, default=5, help="timing runs; the best is reported")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)
    print(f"mixprec {mp.__version__}, numpy {np.__version__}, python {platform.python_version()} on "
          f"{platform.machine()}; digits CNN, batch {args.batch}, autocast float16 on {args.device}")
    fns = workloads(args.batch, args.device)
    print(f"\n{'workload':10} {'tool':10} {'ms per call':>12} {'x plain':>8}")
    for work in ("forward", "step"):
        times = best_times({name: fns[(work, name)] for name in TOOLS}, args.number, args.repeat)
        for name in TOOLS:
            print(f"{work:10} {name:10} {times[name] * 1e3:12.3f} {times[name] / times['plain']:8.2f}")


if __name__ == "__main__":
    main()
