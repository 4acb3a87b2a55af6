"""Train a small GPT to sort digits with automatic mixed precision.

    python examples/train_gpt.py            # bfloat16 autocast on a CPU; float16 + GradScaler on a GPU
    python examples/train_gpt.py --trace    # what autocast did in one forward, op by op, then exit
    python examples/train_gpt.py --fp8 delayed   # the Linear layers' GEMMs in FP8 (or current, mxfp8)

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

FP8 (--fp8 delayed|current|mxfp8): the forward runs inside
``mp.amp.fp8_autocast(recipe=...)`` nested in the usual autocast, so that what is
not an FP8 GEMM follows autocast, and the backward runs after it, as with
Transformer Engine (docs/fp8.md). The GEMMs of the
blocks' nn.Linear layers (query/key/value, attention output, the MLP's two)
run on FP8 values; everything else follows autocast: the attention's two products
(inside F.scaled_dot_product_attention, not an nn.Linear), the embeddings, the norms
and the output layer. The output layer is an nn.Linear, but it runs in
``fp8_autocast(enabled=False)``: its 3 rows (one per digit) are no multiple of
MXFP8's 32-value blocks, its weight is the token embedding's, and keeping the last
layer in higher precision is common FP8 practice. MXFP8 needs every quantized
dimension to be a multiple of 32: --width (so 3 and 4 times it too) and the batch's
rows, batch size x 11 tokens, so --batch-size. The script first trains the same
model with autocast alone (same seed, same batches), then with FP8, and compares the
losses; the accuracies are measured with the forward each model was trained with.
The plot (--out) shows both losses and, per Linear, the amaxes of its input, weight
and output gradient over training, and delayed scaling's scales.
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
RECIPES = {"delayed": mp.amp.DelayedScaling, "current": mp.amp.CurrentScaling, "mxfp8": mp.amp.MXFP8BlockScaling}


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
    p.add_argument("--fp8", choices=list(RECIPES),
                   help="run the blocks' Linear GEMMs in FP8 with this scaling recipe, and compare with autocast alone")
    args = p.parse_args(argv)
    if args.dtype is None:
        args.dtype = "float16" if args.device.startswith("cuda") else "bfloat16"
    if args.fp8 == "mxfp8" and (args.width % 32 or args.batch_size * (2 * LENGTH - 1) % 32):
        p.error(f"--fp8 mxfp8 quantizes in blocks of 32 values, so --width ({args.width}) and the rows of a batch "
                f"(--batch-size x {2 * LENGTH - 1} tokens = {args.batch_size * (2 * LENGTH - 1)}) must be multiples "
                "of 32")
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
        x = self.ln_f(self.blocks(self.tok_emb(idx) + self.pos_emb(mp.arange(t, device=idx.device))))
        with mp.amp.fp8_autocast(enabled=False):     # the output layer is never FP8 (see the module's docstring)
            return self.head(x)                      # logits (B, T, vocab)


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


class AmaxRecorder:
    """Per step, every FP8 Linear's amaxes of input, weight and output gradient, and delayed scaling's scales.

    Delayed scaling keeps them in each Linear's buffers: after a step's update,
    fp8_amax_history[:, -1] is the newest amax of each row and fp8_scale the scale the
    next casts use. Its gradient amax is seen during the backward, after the region, so
    it reaches the history at the next step's update: result() moves that row back one
    step (the last step's gradient amax is never folded in: NaN). Current scaling and
    MXFP8 keep no state, so hooks take the amaxes of what each Linear receives (forward
    pre-hook: input and weight; backward pre-hook: the output's gradient). Everything
    stays on the device until result() stacks it: no host sync per step.
    """

    def __init__(self, model, recipe):
        linears = [(name, m) for name, m in model.named_modules() if isinstance(m, nn.Linear) and m is not model.head]
        self.names, self.layers = [name for name, _ in linears], [m for _, m in linears]
        self.delayed = isinstance(recipe, mp.amp.DelayedScaling)
        self.amaxes, self.scales, self.now, self.handles = [], [], {}, []
        if not self.delayed:
            for layer in self.layers:
                self.handles += [layer.register_forward_pre_hook(self.forward_pre_hook),
                                 layer.register_full_backward_pre_hook(self.backward_pre_hook)]

    def forward_pre_hook(self, layer, inputs):
        with mp.no_grad():
            self.now[layer, 0] = inputs[0].abs().amax().float()
            self.now[layer, 1] = layer.weight.abs().amax().float()

    def backward_pre_hook(self, layer, grad_output):
        with mp.no_grad():
            self.now[layer, 2] = grad_output[0].abs().amax().float()

    def step(self):
        if self.delayed:   # (layers, 3): rows input, weight, grad_output
            self.amaxes.append(mp.stack([layer.fp8_amax_history[:, -1] for layer in self.layers]))
            self.scales.append(mp.stack([layer.fp8_scale for layer in self.layers]))
        else:
            self.amaxes.append(mp.stack([mp.stack([self.now[layer, k] for k in range(3)]) for layer in self.layers]))

    def result(self):
        """{"amax": (steps, layers, 3), "scale": the same or None} as NumPy arrays; removes the hooks."""
        for handle in self.handles:
            handle.remove()
        amax = mp.stack(self.amaxes).numpy().astype(np.float64)
        if self.delayed:
            amax[:-1, :, 2], amax[-1, :, 2] = amax[1:, :, 2], np.nan
        return {"amax": amax, "scale": mp.stack(self.scales).numpy() if self.delayed else None}


def train(model, train_inputs, args, recipe=None):
    """Train with autocast, and with recipe (an FP8 recipe or None) the forward inside fp8_autocast too.
    Returns the history: per step the loss, the loss scale, whether the step was skipped, and with a recipe
    the AmaxRecorder's result under "fp8"."""
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
    recorder = AmaxRecorder(model, recipe) if recipe is not None else None
    rng = np.random.default_rng(args.seed)
    history = {"loss": [], "scale": [], "skipped": []}
    model.train()
    bar = tqdm(range(args.steps), desc=f"AMP {args.dtype}" + (f" + FP8 {args.fp8}" if recipe else ""), unit="step")
    for _ in bar:
        idx = mp.tensor(rng.integers(0, len(train_inputs), args.batch_size), device=device)
        x, y = x_all[idx], y_all[idx]
        with mp.autocast(device.type, dtype=dtype):
            with mp.amp.fp8_autocast(enabled=recipe is not None, recipe=recipe):
                logits = model(x)                                           # lower precision (and FP8 GEMMs)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))   # float32
        optimizer.zero_grad()
        scale = scaler.get_scale()
        scaler.scale(loss).backward()                             # outside the FP8 region, as in Transformer Engine
        scaler.unscale_(optimizer)                                # true gradients, so the clip threshold means
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)         # what it says
        scaler.step(optimizer)                                    # skipped if a gradient is inf/NaN
        scaler.update()
        scheduler.step()
        if recorder is not None:
            recorder.step()
        history["loss"].append(loss.item())
        history["scale"].append(scale)
        history["skipped"].append(bool(scaler.last_step_skipped))
        bar.set_postfix(loss=f"{history['loss'][-1]:.4f}", scale=f"{scaler.get_scale():g}")
    if recorder is not None:
        history["fp8"] = {"names": recorder.names, **recorder.result()}
    return history


def sort_accuracy(model, inputs, args, recipe=None):
    """The share of sequences whose LENGTH sorted digits the model generates exactly (greedy decoding), with the
    forward in FP8 under recipe when one is given (the model as it was trained)."""
    model.eval()
    seq = inputs
    with mp.no_grad(), mp.autocast(args.device.split(":")[0], dtype=getattr(mp, args.dtype)), \
            mp.amp.fp8_autocast(enabled=recipe is not None, recipe=recipe):
        for _ in range(LENGTH):
            logits = model(mp.tensor(seq, device=args.device))
            nxt = logits[:, -1].argmax(dim=-1).numpy()
            seq = np.concatenate([seq, nxt[:, None]], axis=1)
    return float((seq[:, LENGTH:] == np.sort(inputs, axis=1)).all(axis=1).mean())


def loss_gap(loss, reference):
    """How far one loss curve is from another: the median over steps of |loss - reference| / reference."""
    loss, reference = np.asarray(loss), np.asarray(reference)
    return float(np.median(np.abs(loss - reference) / reference))


def final_loss(loss, last=10):
    """The loss at the end of training: the mean over the last `last` steps (one batch's loss is noisy)."""
    return float(np.mean(loss[-last:]))


def plot_fp8(base, run, path, title):
    """The FP8 run's loss against autocast alone's, then per Linear its amaxes of input, weight and output gradient
    over training, and (delayed scaling) beside them the scales each cast used."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fp8 = run["fp8"]
    delayed = fp8["scale"] is not None
    fig = plt.figure(figsize=(13 if delayed else 8, 12))
    grid = fig.add_gridspec(4, 2 if delayed else 1)
    steps = np.arange(len(run["loss"]))
    ax = fig.add_subplot(grid[0, :])
    ax.plot(steps, base["loss"], lw=1, color="0.55", label="autocast alone")
    ax.plot(steps, run["loss"], lw=1, color="C3", label="FP8 GEMMs")
    ax.set_yscale("log")
    ax.set_ylabel("cross entropy")
    ax.set_title(title)
    ax.legend()
    colours = plt.cm.viridis(np.linspace(0, 0.9, len(fp8["names"])))
    rows = ["input", "weight", "grad_output"]
    for k, row in enumerate(rows):
        ax = fig.add_subplot(grid[k + 1, 0])
        for i, name in enumerate(fp8["names"]):
            ax.plot(steps, fp8["amax"][:, i, k], lw=1, color=colours[i], label=name)
        ax.set_yscale("log")
        ax.set_ylabel(f"amax of {row}")
        if k == 0:
            ax.legend(fontsize=7, ncol=2, loc="best")
        if delayed:
            ax2 = fig.add_subplot(grid[k + 1, 1])
            for i, name in enumerate(fp8["names"]):
                ax2.step(steps, np.log2(fp8["scale"][:, i, k]), where="post", lw=1, color=colours[i])
            fmt = "E5M2's 57344" if row == "grad_output" else "E4M3's 448"
            ax2.set_ylabel(f"log2 scale of {row}\n({fmt} / amax history's max)")
    for ax in fig.axes[-2 if delayed else -1:]:
        ax.set_xlabel("optimizer step")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


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
    train_inputs, test_inputs = make_split(args.seed)

    def new_model():   # the same initial weights for every run
        mp.manual_seed(args.seed)
        return GPT(DIGITS, 2 * LENGTH - 1, args.width, args.heads, args.layers).to(args.device)

    model = new_model()
    if args.trace:
        print_trace(model, test_inputs, args)
        return
    print(f"mixprec {mp.__version__} on {args.device}: sorting {LENGTH} digits from 0..{DIGITS - 1}, "
          f"{len(train_inputs)} training and {len(test_inputs)} held-out sequences, autocast dtype {args.dtype}"
          + (f", FP8 recipe {args.fp8}" if args.fp8 else "") + f", {sum(p.numel() for p in model.parameters())} "
          "parameters")
    start = time.perf_counter()
    history = train(model, train_inputs, args)
    seconds = time.perf_counter() - start
    if os.path.dirname(args.out):
        os.makedirs(os.path.dirname(args.out), exist_ok=True)
    recipe = None
    if args.fp8:   # the run above is the reference; now the same model, seed and batches with FP8 GEMMs
        base, base_seconds = history, seconds
        print(f"autocast alone: {args.steps} steps in {base_seconds:.1f} s, final loss {final_loss(base['loss']):.4f}, "
              f"sequence accuracy: {sort_accuracy(model, test_inputs, args):.4f}")
        recipe = RECIPES[args.fp8]()
        model = new_model()
        start = time.perf_counter()
        history = train(model, train_inputs, args, recipe)
        seconds = time.perf_counter() - start
        plot_fp8(base, history, args.out, f"GPT sorting digits on {args.device}: {args.dtype} autocast + FP8 GEMMs, "
                                          f"{type(recipe).__name__}()")
        print(f"FP8 {args.fp8}: final loss {final_loss(history['loss']):.4f} (mean of the last 10 steps); loss "
              f"gap to autocast alone, median over steps of |loss - reference| / reference: "
              f"{loss_gap(history['loss'], base['loss']):.4f}")
    else:
        scaling = "loss and loss scale" if args.dtype == "float16" else "loss (bfloat16 needs no loss scaling)"
        plot(history, args.out, f"GPT sorting digits, AMP ({args.dtype}) on {args.device}: {scaling}")
    print(f"trained {args.steps} steps in {seconds:.1f} s; skipped steps: {sum(history['skipped'])}")
    print(f"wrote {args.out}")
    print(f"train sequence accuracy: {sort_accuracy(model, train_inputs, args, recipe):.4f}")
    print(f"sequence accuracy: {sort_accuracy(model, test_inputs, args, recipe):.4f}")


if __name__ == "__main__":
    main()
