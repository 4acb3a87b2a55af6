"""Train a small GPT to sort digits with automatic mixed precision.

    python examples/train_gpt.py            # bfloat16 autocast on a CPU; float16 + GradScaler on a GPU
    python examples/train_gpt.py --trace    # what autocast did in one forward, op by op, then exit

The task is minGPT's: six digits from {0, 1, 2}, followed by the same digits
sorted. The model reads the six, then predicts the sorted six one token at a
time. All 3**6 = 729 sequences are split 3:1; the held-out quarter is never
trained on, and the script ends with the share of those the model sorts
perfectly by greedy decoding: ``sequence accuracy: X``.

The model is a decoder-only transformer: token and position embeddings,
pre-norm blocks of causal self-attention (F.scaled_dot_product_attention) and a
GELU MLP, a final LayerNorm, and an output layer that shares its weight with the
token embedding. AdamW decays matrices only (not norms, biases), the learning
rate warms up then follows a cosine, and gradients are clipped after
``scaler.unscale_`` so the threshold applies to the true gradients.

Mixed precision: under autocast the linear layers and the attention run in
the lower dtype, layer norms and the loss in float32; inside the attention the
scores and their softmax stay float32 (--trace shows it). float16 needs the
GradScaler (its range ends at 65504); bfloat16 has float32's range, so the
scaler is off and the plot shows the loss alone.
"""
from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np
from threadpoolctl import threadpool_limits

import mixprec as mp
from mixprec import nn
from mixprec.nn import functional as F

DIGITS, LENGTH = 3, 6  # sequences of LENGTH digits from range(DIGITS)


def parse_args(argv=None):
    default_device = "cuda" if mp.is_cuda_available() else "cpu"
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=200, help="optimizer steps (default 200)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3, help="peak learning rate of AdamW (default 3e-3)")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--width", type=int, default=64, help="embedding size (default 64)")
    p.add_argument("--device", default=default_device, help=f"cpu or cuda (default here: {default_device})")
    p.add_argument("--dtype", choices=["float16", "bfloat16"],
                   help="autocast dtype (default: float16 on cuda, bfloat16 on cpu)")
    p.add_argument("--out", default="train_gpt.png", help="where to write the loss/scale plot")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--trace", action="store_true", help="print mp.amp.trace's table for one forward and exit")
    args = p.parse_args(argv)
    if args.dtype is None:
        args.dtype = "float16" if args.device.startswith("cuda") else "bfloat16"
    return args


# ---------------------------------------------------------------- data
def make_split(seed):
    """Every sequence of LENGTH digits, shuffled and split 3:1 into train and held-out inputs (N, LENGTH)."""
    grids = np.meshgrid(*[np.arange(DIGITS)] * LENGTH, indexing="ij")
    every = np.stack([g.reshape(-1) for g in grids], axis=1)
    every = every[np.random.default_rng(seed).permutation(len(every))]
    n_test = len(every) // 4
    return every[n_test:], every[:n_test]


def to_examples(inputs):
    """Model input and target: x = inputs + sorted[:-1], y = x shifted by one; the targets of the first
    LENGTH - 1 positions (predicting the unsorted inputs) are -100, which cross_entropy ignores."""
    seq = np.concatenate([inputs, np.sort(inputs, axis=1)], axis=1)
    x, y = seq[:, :-1], seq[:, 1:].copy()
    y[:, :LENGTH - 1] = -100
    return x, y


# ---------------------------------------------------------------- model
class CausalSelfAttention(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)   # query, key and value projections in one matrix
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = (z.reshape(b, t, self.heads, c // self.heads).transpose(1, 2)   # (B, heads, T, head size)
                   for z in self.qkv(x).split(c, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)            # each token sees its past only
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    """Pre-norm: x + attention(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, width, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(approximate="tanh"), nn.Linear(4 * width, width))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab, block_size, width, heads, layers):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, width)
        self.pos_emb = nn.Embedding(block_size, width)
        self.blocks = nn.Sequential(*[Block(width, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.tok_emb.weight   # weight tying: one matrix embeds tokens and scores them
        for name, p in self.named_parameters():  # GPT-2's initialisation
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.ndim == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.tok_emb(idx) + self.pos_emb(mp.arange(t, device=idx.device))
        return self.head(self.ln_f(self.blocks(x)))   # logits (B, T, vocab)


# ---------------------------------------------------------------- training
def make_optimizer(model, args):
    """AdamW that decays the matrices (linear and embedding weights) but not the norms' weights and the biases."""
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    return mp.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                          lr=args.lr, betas=(0.9, 0.95))


def warmup_cosine(total, warmup):
    """The learning-rate factor at a step: linear warm-up to 1, then a cosine down to 0.1."""
    def factor(step):
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))
    return factor


def train(model, train_inputs, args):
    from tqdm import tqdm
    device = mp.device(args.device)
    dtype = getattr(mp, args.dtype)
    x_all, y_all = (mp.tensor(a, device=device) for a in to_examples(train_inputs))
    optimizer = make_optimizer(model, args)
    # skip_unstepped: a step the scaler skipped (inf/NaN gradients) does not advance the schedule
    scheduler = mp.optim.lr_scheduler.LambdaLR(optimizer, warmup_cosine(args.steps, args.steps // 10),
                                               skip_unstepped=True)
    # float16 needs loss scaling; growth_interval 100 (torch's is 2000) so a short run still grows the scale
    scaler = mp.GradScaler(device.type, growth_interval=100, enabled=dtype == mp.float16)
    rng = np.random.default_rng(args.seed)
    history = {"loss": [], "scale": [], "skipped": []}
    model.train()
    bar = tqdm(range(args.steps), desc=f"AMP {args.dtype}", unit="step")
    for _ in bar:
        idx = mp.tensor(rng.integers(0, len(train_inputs), args.batch_size), device=device)
        x, y = x_all[idx], y_all[idx]
        with mp.autocast(device.type, dtype=dtype):
            logits = model(x)                                               # lower precision
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))   # float32
        optimizer.zero_grad()
        scale = scaler.get_scale()
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)                                # true gradients, so the clip threshold means
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)         # what it says
        scaler.step(optimizer)                                    # skipped if a gradient is inf/NaN
        scaler.update()
        scheduler.step()
        history["loss"].append(loss.item())
        history["scale"].append(scale)
        history["skipped"].append(bool(scaler.last_step_skipped))
        bar.set_postfix(loss=f"{history['loss'][-1]:.4f}", scale=f"{scaler.get_scale():g}")
    return history


def sort_accuracy(model, inputs, args):
    """The share of sequences whose LENGTH sorted digits the model generates exactly (greedy decoding)."""
    model.eval()
    seq = inputs
    with mp.no_grad(), mp.autocast(args.device.split(":")[0], dtype=getattr(mp, args.dtype)):
        for _ in range(LENGTH):
            logits = model(mp.tensor(seq, device=args.device))
            nxt = logits[:, -1].argmax(dim=-1).numpy()
            seq = np.concatenate([seq, nxt[:, None]], axis=1)
    return float((seq[:, LENGTH:] == np.sort(inputs, axis=1)).all(axis=1).mean())


def print_trace(model, inputs, args):
    """One forward under autocast, op by op; then where the softmax ran and why."""
    x = mp.tensor(to_examples(inputs[:4])[0], device=args.device)
    with mp.no_grad(), mp.amp.trace() as t, mp.autocast(args.device.split(":")[0], dtype=getattr(mp, args.dtype)):
        model(x)
    print(t.table())
    softmax = [r for r in t if r.name == "softmax"]
    device_type = args.device.split(":")[0]
    policy = mp.ops.policy("scaled_dot_product_attention", device_type)
    print(f"\nsoftmax ran {len(softmax)} times, in {' and '.join(sorted({r.run_dtypes[0].name for r in softmax}))}, "
          "inside scaled_dot_product_attention (the rows indented under it).\n"
          "Why: the op widens the attention scores to float32 and normalises them there, as fused attention "
          "kernels do,\nwhatever the region's dtype; autocast only chose the dtype of the op's inputs (its "
          f"{device_type} policy: {policy.value if policy else 'not listed, so the dtype they arrive in'}).\n"
          f"The probabilities are then rounded to {args.dtype} once, for the product with the values.")


def main(argv=None):
    from train_digits import plot   # the loss / loss-scale figure both examples draw
    args = parse_args(argv)
    threadpool_limits(1, "blas")  # matrices this small: more BLAS threads only contend for the cores
    mp.manual_seed(args.seed)
    train_inputs, test_inputs = make_split(args.seed)
    model = GPT(DIGITS, 2 * LENGTH - 1, args.width, args.heads, args.layers).to(args.device)
    if args.trace:
        print_trace(model, test_inputs, args)
        return
    print(f"mixprec {mp.__version__} on {args.device}: sorting {LENGTH} digits from 0..{DIGITS - 1}, "
          f"{len(train_inputs)} training and {len(test_inputs)} held-out sequences, autocast dtype {args.dtype}, "
          f"{sum(p.numel() for p in model.parameters())} parameters")
    start = time.perf_counter()
    history = train(model, train_inputs, args)
    seconds = time.perf_counter() - start
    if os.path.dirname(args.out):
        os.makedirs(os.path.dirname(args.out), exist_ok=True)
    scaling = "loss and loss scale" if args.dtype == "float16" else "loss (bfloat16 needs no loss scaling)"
    plot(history, args.out, f"GPT sorting digits, AMP ({args.dtype}) on {args.device}: {scaling}")
    print(f"trained {args.steps} steps in {seconds:.1f} s; skipped steps: {sum(history['skipped'])}")
    print(f"wrote {args.out}")
    print(f"train sequence accuracy: {sort_accuracy(model, train_inputs, args):.4f}")
    print(f"sequence accuracy: {sort_accuracy(model, test_inputs, args):.4f}")


if __name__ == "__main__":
    main()
