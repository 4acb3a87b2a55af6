#!/usr/bin/env python3
"""Draw the docs' pictures from code, so they can be regenerated and never drift from what they show.

    pip install -e ".[docs]" && python tools/make_figures.py            # all of them, into docs/figures/
    python tools/make_figures.py --only formats,scaler                    # some of them

- formats.png: the bit layouts of float32, float16, bfloat16 and the two FP8 formats, with each one's
  range and precision (read from mp.finfo / ml_dtypes, not typed in);
- autocast_decision.png: what autocast decides for one op call, step by step;
- scaler.png: the GradScaler's state machine, and the loss scale of a real float16 training run with its
  skipped steps (the run is made here, with mixprec, on the CPU);
- training_step.png: one training step's data flow, from `a @ b` under autocast to the scale update;
- fp8_gpt.png: `examples/train_gpt.py --fp8 delayed` run as a reader runs it (its default 200 steps, about a
  minute on one CPU core): the loss against autocast alone's, and every FP8 Linear's amaxes and scales.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import mixprec as mp  # noqa: E402
import mixprec.nn.functional as F  # noqa: E402

OUT = ROOT / "docs" / "figures"
SIGN, EXPONENT, MANTISSA = "#e07a5f", "#3d85c6", "#81b29a"


# ------------------------------------------------------------------------------------------- the formats
FORMATS = [("float32", np.float32), ("float16", np.float16), ("bfloat16", ml_dtypes.bfloat16),
           ("float8_e5m2", ml_dtypes.float8_e5m2), ("float8_e4m3fn", ml_dtypes.float8_e4m3fn)]


def formats(path):
    """Bits as coloured cells (sign, exponent, mantissa), and beside each row its numbers."""
    fig, ax = plt.subplots(figsize=(13, 4.2))
    cell = 0.32
    for row, (name, dtype) in enumerate(FORMATS):
        info = ml_dtypes.finfo(dtype)
        y = len(FORMATS) - 1 - row
        bits = ["s"] + ["e"] * info.nexp + ["m"] * info.nmant
        for i, kind in enumerate(bits):
            colour = {"s": SIGN, "e": EXPONENT, "m": MANTISSA}[kind]
            ax.add_patch(plt.Rectangle((i * cell, y), cell * 0.92, 0.7, color=colour))
        ax.text(-0.15, y + 0.35, name, ha="right", va="center", fontsize=11, family="monospace")
        ax.text(32 * cell + 0.3, y + 0.35,
                f"max {float(info.max):.3g}   smallest normal {float(info.smallest_normal):.3g}   "
                f"eps 2^{int(np.log2(float(info.eps)))}   ({info.nexp} exponent, {info.nmant} mantissa bits)",
                va="center", fontsize=9.5)
    for label, colour, x in (("sign", SIGN, 0), ("exponent: range", EXPONENT, 2.2), ("mantissa: precision",
                                                                                    MANTISSA, 5.6)):
        ax.add_patch(plt.Rectangle((x, len(FORMATS) + 0.1), 0.3, 0.3, color=colour))
        ax.text(x + 0.4, len(FORMATS) + 0.25, label, va="center", fontsize=10)
    _save_drawing(fig, ax, path, (-2.6, 32 * cell + 11.5), (-0.3, len(FORMATS) + 0.6),
                  "Floating-point formats: the exponent buys range, the mantissa buys precision")


# ------------------------------------------------------------------------------------------- box diagrams
def _save_drawing(fig, ax, path, xlim, ylim, title):
    """Frame a drawing (no axes: its coordinates are only for placing boxes), title it and write it."""
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.axis("off")
    ax.set_title(title, fontsize=12)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _box(ax, xy, text, colour="#eef3fb", width=3.2, height=0.8, fontsize=9):
    x, y = xy
    ax.add_patch(FancyBboxPatch((x - width / 2, y - height / 2), width, height, boxstyle="round,pad=0.05",
                                facecolor=colour, edgecolor="#555555"))
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize, wrap=True)


def _arrow(ax, start, end, label="", curve=0.0):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12, color="#444444",
                                 connectionstyle=f"arc3,rad={curve}"))
    if label:
        ax.text((start[0] + end[0]) / 2 + 0.1, (start[1] + end[1]) / 2, label, fontsize=8, color="#333333")


def autocast_decision(path):
    """One call, `linear(x, w, b)` inside `mp.autocast("cuda")`: the questions dispatch asks, in order."""
    fig, ax = plt.subplots(figsize=(11, 6.2))
    steps = [
        ((5.5, 7.0), "linear(x, w, b) is called (x, w, b float32, on CUDA)", "#fdf2e0"),
        ((5.5, 5.8), "Is an autocast region enabled for the inputs' device type (cuda)?", "#eef3fb"),
        ((5.5, 4.6), "The op's policy on cuda (mixprec/ops/policies.py):\nlinear -> lower_precision_fp", "#eef3fb"),
        ((5.5, 3.4), "Target dtypes (mp.amp.resolve_dtypes): floating, non-float64\ninputs -> the region's "
                     "dtype, float16", "#eef3fb"),
        ((5.5, 2.2), "Cast with .to(float16): a node in the graph; a float32 leaf's\ncast is cached "
                     "for the region (keyed on its version)", "#eef3fb"),
        ((5.5, 1.0), "linear runs in float16 (float32 accumulation); result float16", "#e6f4ea"),
    ]
    for xy, text, colour in steps:
        _box(ax, xy, text, colour, width=6.6, height=0.85)
    for (a, _, _), (b, _, _) in zip(steps, steps[1:]):
        _arrow(ax, (a[0], a[1] - 0.45), (b[0], b[1] + 0.45))
    _box(ax, (10.3, 5.8), "no: run in the inputs'\ndtypes (promotion)", "#f3f3f3", width=2.6)
    _arrow(ax, (8.8, 5.8), (9.0, 5.8))
    _box(ax, (10.3, 4.6), "none: inputs' dtypes\nfp32: float32\npromote: float32 unless all\nare the region's dtype\nbanned: error",
         "#f3f3f3", width=2.6, height=1.35)
    _arrow(ax, (8.8, 4.6), (9.0, 4.6))
    _box(ax, (0.9, 3.4), "float64, ints and\nbool: never cast", "#f3f3f3", width=2.2)
    _arrow(ax, (2.2, 3.4), (2.0, 3.4))
    _save_drawing(fig, ax, path, (-0.5, 11.8), (0.3, 7.6), "Autocast's decision for one op call")


def training_step(path):
    """One step's data flow: forward under autocast, scaled backward, unscale, check, step, update."""
    fig, ax = plt.subplots(figsize=(12, 5.2))
    top = [((1.3, 4.0), "x, w float32\n(w a parameter)"), ((4.3, 4.0), "cast w to float16\n(cached), x too"),
           ((7.3, 4.0), "y = x @ w in float16\n(float32 accumulation)"),
           ((10.3, 4.0), "loss = cross_entropy(y)\nin float32")]
    bottom = [((10.3, 1.5), "scaler.scale(loss)\n= loss * S"), ((7.3, 1.5), "backward: grads in the\ndtype "
                                                                                 "forward used, * S"),
              ((4.3, 1.5), "unscale_: grad / S,\nfound_inf if inf/NaN"),
              ((1.3, 1.5), "step (skipped if found_inf)\nupdate: S / 2 or * 2")]
    for xy, text in top:
        _box(ax, xy, text, "#eef3fb", width=2.6, height=1.0)
    for xy, text in bottom:
        _box(ax, xy, text, "#e6f4ea", width=2.6, height=1.0)
    for (a, _), (b, _) in zip(top, top[1:]):
        _arrow(ax, (a[0] + 1.35, a[1]), (b[0] - 1.35, b[1]))
    _arrow(ax, (10.3, 3.45), (10.3, 2.05))
    for (a, _), (b, _) in zip(bottom, bottom[1:]):
        _arrow(ax, (a[0] - 1.35, a[1]), (b[0] + 1.35, b[1]))
    ax.text(5.8, 4.85, "forward, inside mp.autocast", ha="center", fontsize=10, color="#3d85c6")
    ax.text(5.8, 0.6, "backward and the optimizer step, outside it (mp.GradScaler)", ha="center", fontsize=10,
            color="#2e7d32")
    _save_drawing(fig, ax, path, (-0.2, 11.8), (0.2, 5.2), "One training step, from a @ b to the scale update")


# ------------------------------------------------------------------------------------------- the scaler
def loss_scale_run(steps=400, growth_interval=20):
    """A real float16 run whose loss scale both backs off and grows: a small MLP on the CPU, its scale
    started at 2^24 (too high: the first steps overflow and are skipped). Returns the scale before each
    step and whether the step was skipped."""
    mp.manual_seed(0)
    x = mp.randn(512, 16)
    y = (x @ mp.randn(16, 4)).argmax(dim=1)
    model = mp.nn.Sequential(mp.nn.Linear(16, 64), mp.nn.ReLU(), mp.nn.Linear(64, 4))
    opt = mp.optim.SGD(model.parameters(), lr=0.05)
    scaler = mp.GradScaler("cpu", init_scale=2.0 ** 24, growth_interval=growth_interval)
    scales, skipped = [], []
    for step in range(steps):
        idx = mp.randint(0, 512, (64,))
        with mp.autocast("cpu", dtype=mp.float16):
            loss = F.cross_entropy(model(x[idx]), y[idx]) * 64.0   # a summed loss: larger gradients
        opt.zero_grad()
        scaler.scale(loss).backward()
        before = scaler.get_scale()
        scaler.step(opt)
        scaler.update()
        scales.append(before)
        skipped.append(scaler.get_scale() < before)
    return np.array(scales), np.array(skipped)


def scaler(path):
    """Left: the state machine. Right: a real trajectory of the scale, skipped steps marked."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8), gridspec_kw={"width_ratios": [1, 1.3]})
    _box(left, (2.5, 4.2), "scale S, growth tracker n", "#fdf2e0", width=3.6)
    _box(left, (0.9, 2.2), "inf/NaN found:\nskip the step,\nS = S * 0.5, n = 0", "#fde8e8", width=2.6, height=1.2)
    _box(left, (4.1, 2.2), "all finite:\nstep, n = n + 1", "#e6f4ea", width=2.6, height=1.2)
    _box(left, (4.1, 0.4), "n == growth_interval:\nS = S * 2, n = 0", "#e6f4ea", width=2.6, height=0.9)
    _arrow(left, (1.8, 3.8), (1.0, 2.8), "update()")
    _arrow(left, (3.2, 3.8), (4.0, 2.8), "update()")
    _arrow(left, (4.1, 1.6), (4.1, 0.85))
    _arrow(left, (0.9, 2.8), (1.7, 3.8), curve=-0.3)
    _arrow(left, (5.4, 0.4), (3.9, 3.8), curve=0.5)
    left.set_xlim(-0.6, 6.2)
    left.set_ylim(-0.3, 4.8)
    left.axis("off")
    left.set_title("GradScaler.update(), each step", fontsize=11)

    scales, skipped = loss_scale_run()
    steps = np.arange(len(scales))
    right.step(steps, np.log2(scales), where="post", color="#3d85c6", label="loss scale S (log2)")
    right.scatter(steps[skipped], np.log2(scales[skipped]), color="#d62828", zorder=3, s=18,
                  label=f"skipped step ({int(skipped.sum())})")
    right.set_xlabel("step")
    right.set_ylabel("log2(S)")
    right.legend(loc="upper right")
    right.set_title("A real float16 run (tools/make_figures.py): S starts at 2^24", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------------------------------- FP8 training
def fp8_gpt(path, *options):
    """The example's own plot of its default FP8 run (delayed scaling), made by running the example; options are
    more of its arguments (the tests shorten the run with them)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), MPLBACKEND="Agg")
    run = subprocess.run([sys.executable, str(ROOT / "examples" / "train_gpt.py"), "--fp8", "delayed", "--device",
                          "cpu", "--out", str(path), *options], env=env, capture_output=True, text=True)
    if run.returncode:
        raise RuntimeError(f"examples/train_gpt.py --fp8 delayed failed:\n{run.stderr[-3000:]}")


FIGURES = {"formats": formats, "autocast_decision": autocast_decision, "scaler": scaler,
           "training_step": training_step, "fp8_gpt": fp8_gpt}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", help="comma-separated names: " + ", ".join(FIGURES))
    parser.add_argument("--out", default=str(OUT), help="folder for the PNGs (default docs/figures)")
    args = parser.parse_args(argv)
    names = args.only.split(",") if args.only else list(FIGURES)
    unknown = [n for n in names if n not in FIGURES]
    if unknown:
        parser.error(f"unknown figure(s) {', '.join(unknown)}; choose from {', '.join(FIGURES)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        FIGURES[name](out / f"{name}.png")
        print(f"wrote {out / f'{name}.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
