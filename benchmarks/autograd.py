"""What autograd's machinery costs, as ratios measured in one process (CPU time, best of rounds):

  record      an op that records a graph node (an input requires grad) / the same op without
  hooks       an MLP training step inside saved_tensors_hooks (identity pack/unpack) / without
  jacobian    forward mode / reverse mode for the Jacobian of a function with few inputs and many
              outputs (forward mode should win), and with many inputs and few outputs (reverse should)

CPU time (time.process_time) rather than wall time, so other processes on a shared
machine do not inflate one side of a ratio.

    python benchmarks/autograd.py [--number 500] [--repeat 7]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import mixprec as mp  # noqa: E402

F = mp.nn.functional


def best(fns, number, repeat):
    """CPU seconds per call of each function: the best of ``repeat`` rounds of ``number`` calls, in turns."""
    for fn in fns.values():
        for _ in range(min(number, 20)):
            fn()
    out = {name: float("inf") for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            t0 = time.process_time()
            for _ in range(number):
                fn()
            out[name] = min(out[name], (time.process_time() - t0) / number)
    return out


def mlp_step():
    rng = np.random.default_rng(0)
    x = mp.tensor(rng.standard_normal((32, 64)).astype(np.float32))
    y = mp.tensor(rng.integers(0, 10, 32))
    net = mp.nn.Sequential(mp.nn.Linear(64, 64), mp.nn.ReLU(), mp.nn.Linear(64, 10))
    opt = mp.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)

    def step():
        opt.zero_grad()
        F.cross_entropy(net(x), y).backward()
        opt.step()
    return step


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--number", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    n, r = args.number, args.repeat
    rows = []

    a, b = mp.ones(4, 4), mp.ones(4, 4)
    g = mp.ones(4, 4, requires_grad=True)
    t = best({"plain": lambda: a * b, "recorded": lambda: g * b}, n * 10, r)
    rows.append(("record: mul 4x4 (recorded / plain)", t["recorded"], t["plain"]))

    step = mlp_step()

    def hooked():
        with mp.autograd.graph.saved_tensors_hooks(lambda x: x, lambda x: x):
            step()
    t = best({"plain": step, "hooked": hooked}, max(n // 10, 10), r)
    rows.append(("hooks: MLP step (identity hooks / none)", t["hooked"], t["plain"]))

    rng = np.random.default_rng(1)
    w_tall = mp.tensor(rng.standard_normal((64, 4)), dtype=mp.float64)
    w_wide = mp.tensor(rng.standard_normal((4, 64)), dtype=mp.float64)
    x4, x64 = mp.tensor(rng.standard_normal(4), dtype=mp.float64), mp.tensor(rng.standard_normal(64), dtype=mp.float64)
    jac = mp.autograd.functional.jacobian
    for label, w, x in (("4 in, 64 out", w_tall, x4), ("64 in, 4 out", w_wide, x64)):
        def f(v, w=w):
            return (w @ v).tanh()
        t = best({"forward": lambda: jac(f, x, strategy="forward-mode"),
                  "reverse": lambda: jac(f, x, strategy="reverse-mode")}, max(n // 50, 3), r)
        rows.append((f"jacobian {label} (forward / reverse)", t["forward"], t["reverse"]))

    print(f"mixprec {mp.__version__}, numpy {np.__version__}; CPU time per call, best of {r} rounds")
    print(f"{'measure':45s} {'numerator us':>13s} {'denominator us':>15s} {'ratio':>7s}")
    for label, num, den in rows:
        print(f"{label:45s} {num * 1e6:13.1f} {den * 1e6:15.1f} {num / den:7.2f}")


if __name__ == "__main__":
    main()
