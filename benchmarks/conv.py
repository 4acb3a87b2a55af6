"""Convolution and pooling on a digits-sized batch (CPU): mixprec against PyTorch in the same process.

The layers of examples/train_digits.py on one batch of 64 8x8 images:

  conv1     conv2d (64, 1, 8, 8)  * (16, 1, 3, 3), padding 1, + bias
  conv2     conv2d (64, 16, 4, 4) * (32, 16, 3, 3), padding 1, + bias
  pool      max_pool2d (64, 16, 8, 8), kernel 2

each timed as forward + backward (the output's gradient is a fixed random tensor;
the time includes computing the gradients of input, weight and bias), in float32,
float16 and bfloat16 (the dtypes autocast runs them in). Figures are the best of
``--repeat`` runs of ``--number`` calls, mixprec and PyTorch taking turns; the
ratio is mixprec / PyTorch. PyTorch runs single-threaded (as in dispatch.py);
NumPy's BLAS keeps its threads (set OPENBLAS_NUM_THREADS to change them): the
products here are per image and small enough to run on one thread anyway.

    python benchmarks/conv.py [--number 200] [--repeat 7]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import mixprec as mp  # noqa: E402
import _env  # noqa: E402  (benchmarks/ is on sys.path when one of its scripts runs)
from dispatch import best_times  # noqa: E402  (the same timing loop)

try:
    import torch
except ImportError:  # the PyTorch column is skipped
    torch = None

BATCH = 64
WORKLOADS = {  # name -> (function name, input shape, weight shape or pool kernel, keyword options)
    "conv1": ("conv2d", (BATCH, 1, 8, 8), (16, 1, 3, 3), dict(padding=1)),
    "conv2": ("conv2d", (BATCH, 16, 4, 4), (32, 16, 3, 3), dict(padding=1)),
    "pool": ("max_pool2d", (BATCH, 16, 8, 8), 2, {}),
}
DTYPES = ("float32", "float16", "bfloat16")


def _arrays(name):
    fn, x_shape, w, _ = WORKLOADS[name]
    rng = np.random.default_rng(0)
    arrays = {"x": rng.standard_normal(x_shape)}
    if fn == "conv2d":
        arrays["w"] = rng.standard_normal(w) / np.sqrt(np.prod(w[1:]))
        arrays["b"] = rng.standard_normal(w[0]) * 0.1
    return arrays


def make_step(lib, name, dtype):
    """One forward + backward of workload ``name`` in ``lib`` (mixprec or torch: the same API here)."""
    fn, _, kernel, kw = WORKLOADS[name]
    dt = getattr(lib, dtype)
    t = {k: lib.tensor(v, dtype=dt, requires_grad=True) for k, v in _arrays(name).items()}
    F = lib.nn.functional
    if fn == "conv2d":
        def forward():
            return F.conv2d(t["x"], t["w"], t["b"], **kw)
    else:
        def forward():
            return F.max_pool2d(t["x"], kernel, **kw)
    g = lib.tensor(np.random.default_rng(1).standard_normal(tuple(forward().shape)), dtype=dt)

    def step():
        forward().backward(g)
    return step


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--number", type=int, default=200, help="calls per timing run")
    ap.add_argument("--repeat", type=int, default=7, help="timing runs; the best is reported")
    args = ap.parse_args(argv)
    if torch is not None:
        torch.set_num_threads(1)
    print(_env.describe(torch))
    head = f"{'workload (fwd + bwd)':34} {'mixprec us':>11} {'torch us':>9} {'ratio':>6}"
    print("\n" + head + "\n" + "-" * len(head))
    for name, (fn, x_shape, w, _) in WORKLOADS.items():
        for dtype in DTYPES:
            fns = {"mixprec": make_step(mp, name, dtype)}
            if torch is not None:
                fns["torch"] = make_step(torch, name, dtype)
            t = best_times(fns, args.number, args.repeat)
            t_t = t.get("torch")
            label = f"{name} {fn} {dtype}"
            print(f"{label:34} {t['mixprec'] * 1e6:11.1f} " + (f"{t_t * 1e6:9.1f} {t['mixprec'] / t_t:6.2f}"
                                                              if t_t else f"{'-':>9} {'-':>6}"))
    print("\nratio = mixprec time / PyTorch eager time in this process")


if __name__ == "__main__":
    main()
