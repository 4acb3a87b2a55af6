"""Find where mixed precision hurts a model: break one on purpose, then let mp.amp.inspect point at the op.

    pip install ".[examples]" && python examples/inspect_amp.py                 # the digits CNN, broken
    python examples/inspect_amp.py --break tiny-loss --init-scale 1             # gradients below float16
    python examples/inspect_amp.py --break none                                 # a healthy model

One training step of a model runs under ``mp.amp.inspect``: every op of the
forward also runs in float32 (the float32 path through the whole model, and
the op alone on the inputs it was given), and the backward's float16 gradients
are compared with the float32 ones at the loss scale used and at every other.
The script prints the report (ops ranked by harm, gradients, suggestions) and
writes its plot.

Ways to break the model (--break):

  logit-scale  multiply the logits by an unnormalised scale (--logit-scale, 1e6:
               a learned exp(s) whose s drifted to 14): float16 overflows to inf
               in that multiply and the loss becomes NaN
  tiny-loss    scale the loss by 1e-6: the gradients fall below float16's
               smallest subnormal (6e-8) unless the loss scale lifts them
  none         the model as it is

Models (--model): "digits", the CNN of examples/train_digits.py on the 8x8 digits
set; and "gpt", the transformer of examples/train_gpt.py on its sorting task,
when that example is present. A model is one entry of MODELS: a function that
builds it and returns (model, inputs, targets); adding one takes a few lines.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys

import numpy as np
from threadpoolctl import threadpool_limits

import mixprec as mp
from mixprec import nn
from mixprec.nn import functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # the other examples' models and data


def digits(args):
    """examples/train_digits.py's CNN and one batch of its training images."""
    import train_digits
    x_train, _, y_train, _ = train_digits.load_data(args.seed)
    model = train_digits.make_model()
    return model, mp.tensor(x_train[:args.batch_size]), mp.tensor(y_train[:args.batch_size])


def gpt(args):
    """examples/train_gpt.py's transformer and one batch of its sorting sequences (logits flattened for the loss)."""
    import train_gpt as g
    x, y = g.to_examples(g.make_split(args.seed)[0][:args.batch_size])
    model = g.GPT(vocab=g.DIGITS, block_size=2 * g.LENGTH - 1, width=64, heads=4, layers=2)
    return Flatten(model, g.DIGITS), mp.tensor(x), mp.tensor(y.reshape(-1))


MODELS = {"digits": digits}
if importlib.util.find_spec("train_gpt") is not None:
    MODELS["gpt"] = gpt


class Flatten(nn.Module):
    """(B, T, vocab) logits as (B*T, vocab) rows, for cross_entropy."""

    def __init__(self, model, vocab):
        super().__init__()
        self.model, self.vocab = model, vocab

    def forward(self, x):
        return self.model(x).reshape(-1, self.vocab)


class ScaledLogits(nn.Module):
    """The break: logits times a scale nobody normalised (as an unbounded learned temperature)."""

    def __init__(self, model, scale):
        super().__init__()
        self.model, self.scale = model, scale

    def forward(self, x):
        return self.model(x) * self.scale


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="digits", choices=sorted(MODELS))
    p.add_argument("--break", dest="breakage", default="logit-scale", choices=["logit-scale", "tiny-loss", "none"])
    p.add_argument("--logit-scale", type=float, default=1e6, help="the unnormalised logit scale (default 1e6)")
    p.add_argument("--dtype", default="float16", choices=["float16", "bfloat16"], help="autocast dtype")
    p.add_argument("--init-scale", type=float, default=None,
                   help="the GradScaler's loss scale (default 2^16 for float16; bfloat16 runs without one)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--device", default="cuda" if mp.is_cuda_available() else "cpu")
    p.add_argument("--out", default="inspect_amp.png", help="where to write the plot")
    p.add_argument("--markdown", default=None, help="also write the report as markdown to this path")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    threadpool_limits(1, "blas")  # matrices this small: more BLAS threads only contend for the cores
    mp.manual_seed(args.seed)
    model, x, y = MODELS[args.model](args)
    if args.breakage == "logit-scale":
        model = ScaledLogits(model, args.logit_scale)
    model = model.to(args.device)
    x, y = x.to(args.device), y.to(args.device)
    dtype = getattr(mp, args.dtype)
    init_scale = args.init_scale if args.init_scale is not None else 2.0 ** 16
    scaler = mp.GradScaler(args.device.split(":")[0], init_scale=init_scale, enabled=args.dtype == "float16")
    loss_factor = 1e-6 if args.breakage == "tiny-loss" else 1.0
    print(f"mixprec {mp.__version__}: {args.model} model, break: {args.breakage}, autocast {args.dtype} on "
          f"{args.device}, loss scale {scaler.get_scale():g}")

    with mp.amp.inspect(model, scaler=scaler) as inspector:
        with mp.autocast(args.device.split(":")[0], dtype=dtype):
            loss = F.cross_entropy(model(x), y) * loss_factor
        scaler.scale(loss).backward()
    report = inspector.report()

    print(f"loss: {loss.item():.4g}\n")
    print(report.table(row_limit=12))
    report.plot(args.out)
    print(f"\nwrote {args.out}")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(report.to_markdown())
        print(f"wrote {args.markdown}")
    return report


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
