"""CTC loss (connectionist temporal classification), with torch's semantics, in log space.

CTC scores an unsegmented target sequence (say "cat") against T frames of
per-class log-probabilities: it sums the probabilities of every frame-level
path that collapses to the target once repeats are merged and blanks removed
("cc-aa-t" -> "cat"). Over the extended target l' = (blank, c, blank, a,
blank, t, blank) of length S' = 2L + 1, the forward variable

    alpha_t(s) = log sum of the paths of frames 0..t that end in l'_s
               = lse(alpha_{t-1}(s), alpha_{t-1}(s-1), alpha_{t-1}(s-2) if l'_s != blank, l'_{s-2})
                 + log_probs[t, l'_s]

gives the loss -lse(alpha_{T-1}(S'-1), alpha_{T-1}(S'-2)). The backward
variable beta_t(s) (log sum of the continuations of frames t+1.. from l'_s)
gives each frame's occupancy of each class, and with it the gradient

    d loss / d log_probs[t, c] = -sum over s with l'_s = c of exp(alpha_t(s) + beta_t(s) + loss).

Both recursions loop over time in Python and are vectorised over the batch and
the S' positions, on NumPy and CuPy alike. Half-precision inputs compute in
float32 and round once.

One deliberate difference from torch: torch's backward returns that gradient
plus exp(log_probs) (pytorch issues 52241, 181534). The extra term vanishes
once it flows back through a log_softmax (whose outputs' exponentials sum to
one), so gradients reaching logits agree with torch; but torch's gradient with
respect to log_probs themselves is not the derivative of its loss. mixprec's
is, and gradcheck confirms it.
"""
from __future__ import annotations

import numpy as np

from .. import backend as _be
from ..backend import device_checks
from .. import dtypes as _dt
from ..tensor import Tensor, tensor
from ..creation import arange
from .elementwise import where
from .losses import _reduction
from .opmath import compute_dtype
from .registry import register


# ---------------------------------------------------------------- the recursions, on arrays
def _lse(*terms):
    """log(sum(exp(terms))) elementwise; -inf where every term is -inf (no NaN from -inf - -inf), NaN where a
    term is +inf (inf - inf, as torch's max subtraction gives: a log-probability of +inf is no probability)."""
    xp = _be.array_module(terms[0])
    m = terms[0]
    for t in terms[1:]:
        m = xp.maximum(m, t)
    safe = xp.where(m == -xp.inf, 0, m)
    total = sum(xp.exp(t - safe) for t in terms)
    with np.errstate(divide="ignore"):
        return xp.log(total) + safe


def _shift(a, k, fill):
    """a shifted right by k along its last axis (k < 0: left), ``fill`` entering."""
    xp = _be.array_module(a)
    out = xp.full_like(a, fill)
    if k > 0:
        out[..., k:] = a[..., :-k]
    else:
        out[..., :k] = a[..., -k:]
    return out


class _Lattice:
    """The extended targets of a batch and the log-probabilities along them."""

    def __init__(self, log_probs, targets, input_lengths, target_lengths, blank):
        xp = _be.array_module(log_probs)
        lp = log_probs.astype(compute_dtype(log_probs.dtype), copy=False)
        n, s = targets.shape
        self.ext = xp.full((n, 2 * s + 1), blank, dtype=targets.dtype)
        self.ext[:, 1::2] = targets
        self.ext_len = 2 * target_lengths + 1
        positions = xp.arange(2 * s + 1)
        self.valid = positions[None, :] < self.ext_len[:, None]          # (N, S'): inside this sample's l'
        self.skip = xp.zeros((n, 2 * s + 1), dtype=bool)                 # may jump from s-2 to s
        self.skip[:, 3::2] = targets[:, 1:] != targets[:, :-1]
        self.lpe = xp.take_along_axis(lp, self.ext[None].repeat(lp.shape[0], 0), axis=2)  # (T, N, S')
        self.lpe = xp.where(self.valid[None], self.lpe, -xp.inf)
        self.input_lengths = input_lengths
        self.xp, self.dtype = xp, lp.dtype

    def alpha(self):
        xp, lpe = self.xp, self.lpe
        la = xp.full(lpe.shape, -xp.inf, dtype=self.dtype)
        la[0, :, :2] = lpe[0, :, :2]
        for t in range(1, lpe.shape[0]):
            prev = la[t - 1]
            jump = xp.where(self.skip, _shift(prev, 2, -xp.inf), -xp.inf)
            la[t] = _lse(prev, _shift(prev, 1, -xp.inf), jump) + lpe[t]
        return la

    def nll(self, la, zero_infinity):
        """-log p(target | log_probs) per sample, from the forward variables."""
        xp = self.xp
        n = la.shape[1]
        last_t = xp.maximum(self.input_lengths - 1, 0)
        final = la[last_t, xp.arange(n)]                                  # (N, S') at each sample's last frame
        end = self.ext_len[:, None]
        ends = xp.take_along_axis(final, end - 1, axis=1)[:, 0]
        before = xp.take_along_axis(final, xp.maximum(end - 2, 0), axis=1)[:, 0]
        before = xp.where(self.ext_len >= 2, before, -xp.inf)
        nll = -_lse(ends, before)
        empty = self.ext_len == 1                                          # no frames: p = 1 iff no target
        nll = xp.where(self.input_lengths == 0, xp.where(empty, 0.0, xp.inf).astype(self.dtype), nll)
        if zero_infinity:
            nll = xp.where(xp.isinf(nll), 0.0, nll).astype(self.dtype)
        return nll

    def beta(self):
        """beta_t(s): log sum of the ways to finish from l'_s at frame t (frames t+1.. of the sample)."""
        xp, lpe = self.xp, self.lpe
        steps = lpe.shape[0]
        lb = xp.full(lpe.shape, -xp.inf, dtype=self.dtype)
        s_idx = xp.arange(lpe.shape[2])[None, :]
        at_end = self.valid & (s_idx >= self.ext_len[:, None] - 2)         # where a path may finish
        skip_next = _shift(self.skip, -2, False)
        for t in range(steps - 1, -1, -1):
            if t < steps - 1:
                nxt = lb[t + 1] + lpe[t + 1]
                jump = xp.where(skip_next, _shift(nxt, -2, -xp.inf), -xp.inf)
                rec = _lse(nxt, _shift(nxt, -1, -xp.inf), jump)
            else:
                rec = lb[t]
            last = (self.input_lengths - 1 == t)[:, None]
            inside = (self.input_lengths - 1 > t)[:, None]
            lb[t] = xp.where(last & at_end, 0.0, xp.where(inside & self.valid, rec, -xp.inf))
        return lb

    def grad(self, nll, zero_infinity, num_classes):
        """d nll / d log_probs, (T, N, C), in the compute dtype."""
        xp = self.xp
        la, lb = self.alpha(), self.beta()
        steps, n, _ = la.shape
        with np.errstate(invalid="ignore"):                                 # -inf + inf: NaN where nll is inf
            occupancy = xp.exp(la + lb + nll[None, :, None])                # (as torch)
        live = (xp.arange(steps)[:, None] < self.input_lengths[None, :])[:, :, None] & self.valid[None]
        occupancy = xp.where(live, occupancy, 0)
        if zero_infinity:
            occupancy = xp.where(xp.isinf(nll)[None, :, None], 0, occupancy)
        g = xp.zeros((steps, n, num_classes), dtype=self.dtype)
        t_idx = xp.arange(steps)[:, None, None]
        n_idx = xp.arange(n)[None, :, None]
        _be.scatter_add(g, (t_idx, n_idx, self.ext[None]), -occupancy)
        undefined = xp.isnan(occupancy).any(axis=2, keepdims=True)        # a NaN frame is NaN for every class
        return xp.where(undefined, xp.nan, g).astype(self.dtype, copy=False)


# ---------------------------------------------------------------- the ops
@register("_ctc_loss", promote=(0,))
def _ctc_loss(ctx, log_probs, targets, input_lengths, target_lengths, blank, zero_infinity):
    """Per-sample CTC loss (N,) of (T, N, C) log_probs and padded (N, S) targets (checked by ctc_loss)."""
    ctx.options = (blank, zero_infinity)
    lattice = _Lattice(log_probs, targets, input_lengths, target_lengths, blank)
    return lattice.nll(lattice.alpha(), zero_infinity).astype(log_probs.dtype)


@_ctc_loss.grad
def _(ctx, g):
    log_probs, targets, input_lengths, target_lengths = ctx.inputs[:4]
    grad = _ctc_loss_backward(g, log_probs, targets, input_lengths, target_lengths, *ctx.options)
    return grad, None, None, None, None, None


@_ctc_loss.jvp
def _(ctx, t, *_):
    log_probs, targets, input_lengths, target_lengths = ctx.inputs[:4]
    ones = Tensor._wrap(_be.array_module(log_probs._array).ones(log_probs.shape[1], dtype=log_probs.dtype))
    g = _ctc_loss_backward(ones, log_probs, targets, input_lengths, target_lengths, *ctx.options)
    return (g * t).sum(dim=(0, 2))


@register("_ctc_loss_backward", promote=(0, 1))
def _ctc_loss_backward(ctx, grad, log_probs, targets, input_lengths, target_lengths, blank, zero_infinity):
    """grad (N,) times d _ctc_loss / d log_probs: (T, N, C)."""
    lattice = _Lattice(log_probs, targets, input_lengths, target_lengths, blank)
    nll = lattice.nll(lattice.alpha(), False)
    g = lattice.grad(nll, zero_infinity, log_probs.shape[2])
    return (g * grad.astype(g.dtype)[None, :, None]).astype(log_probs.dtype)


def _no_second_derivative(ctx, *_):
    raise NotImplementedError("ctc_loss: the derivative of its gradient is not implemented (torch's neither); "
                              "ctc_loss can be differentiated once, in either mode")


_ctc_loss_backward.grad(_no_second_derivative)
_ctc_loss_backward.jvp(_no_second_derivative)


# ---------------------------------------------------------------- the public loss
def _lengths(what, value, n, device, unbatched):
    """input_lengths / target_lengths as an int64 Tensor (N,) on ``device`` (torch takes Tensors or int lists)."""
    if isinstance(value, Tensor):
        if value.dtype.kind not in "iu":
            raise TypeError(f"ctc_loss: {what} must hold integers, got a {value.dtype.name} tensor")
        t = value.to(device=device, dtype=_dt.int64)
    else:
        values = [value] if isinstance(value, (int, np.integer)) else list(value)
        if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values):
            raise TypeError(f"ctc_loss: {what} must be a Tensor or a sequence of ints, got {value!r}")
        t = tensor(np.asarray(values, dtype=np.int64), device=device)
    t = t.reshape(-1)
    if t.shape[0] != n:
        expected = "a single length (the input is unbatched)" if unbatched else f"{n} lengths, one per sample"
        raise RuntimeError(f"ctc_loss: expected {what} to hold {expected}, got {t.shape[0]}")
    device_checks.check((t < 0)._array, ValueError, f"ctc_loss: {what} must be non-negative")
    return t


def _padded_targets(targets, target_lengths, n, device):
    """Targets as (N, S): padded ones as given, concatenated ones (1-D, sum(target_lengths)) split per sample."""
    if not isinstance(targets, Tensor):
        raise TypeError(f"ctc_loss: targets must be an integer Tensor, got {type(targets).__name__}")
    if targets.dtype.kind not in "iu":
        raise TypeError(f"ctc_loss: targets must be an integer tensor (class indices), got {targets.dtype.name}")
    targets = targets.to(device=device, dtype=_dt.int64)
    if targets.ndim == 2:
        if targets.shape[0] != n:
            raise RuntimeError(f"ctc_loss: padded targets must have shape (N={n}, S), got {tuple(targets.shape)}")
        longest = targets.shape[1]
        device_checks.check((target_lengths > longest)._array, RuntimeError,
                  f"ctc_loss: a target length is larger than the padded targets' size S={longest}")
        return targets
    if targets.ndim != 1:
        raise RuntimeError(f"ctc_loss: targets must be 2-D (N, S) padded or 1-D concatenated, got shape "
                           f"{tuple(targets.shape)}")
    lengths = target_lengths.numpy()  # the split needs the lengths on the host
    if int(lengths.sum()) > targets.shape[0]:
        raise RuntimeError(f"ctc_loss: concatenated targets hold {targets.shape[0]} labels, but target_lengths "
                           f"add up to {int(lengths.sum())}")
    longest = int(lengths.max()) if lengths.size else 0
    if targets.shape[0] == 0:  # every target is empty
        return tensor(np.zeros((n, longest), dtype=np.int64), device=device)
    starts = np.cumsum(lengths) - lengths
    index = np.minimum(starts[:, None] + np.arange(longest)[None, :], targets.shape[0] - 1)  # past the end: masked
    return targets[tensor(index, device=device)]


@register("ctc_loss", functional=True, promote=(0,), composite=True)
def ctc_loss(ctx, log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False):
    """The CTC loss of log_probs (T, N, C) (or (T, C) unbatched, e.g. from log_softmax) against targets.

    targets: (N, S) padded or 1-D concatenated class indices (never ``blank``);
    input_lengths / target_lengths: one length per sample (Tensors or ints).
    An impossible alignment (a target longer than its frames allow) has an
    infinite loss; zero_infinity=True replaces it, and its gradient, by 0.
    'mean' divides each loss by its target length (at least 1), then averages.
    """
    reduction = _reduction("ctc_loss", None, None, reduction)
    if not isinstance(log_probs, Tensor) or not _dt.is_floating(log_probs.dtype):
        raise TypeError("ctc_loss: log_probs must be a floating-point Tensor")
    if log_probs.ndim not in (2, 3):
        raise RuntimeError(f"ctc_loss: expected log_probs of shape (T, N, C), or (T, C) unbatched, got shape "
                           f"{tuple(log_probs.shape)}")
    if log_probs.numel() == 0:
        raise RuntimeError(f"ctc_loss: log_probs must not be empty (as in torch), got shape {tuple(log_probs.shape)}")
    unbatched = log_probs.ndim == 2
    if unbatched:
        log_probs = log_probs.unsqueeze(1)
        if isinstance(targets, Tensor) and targets.ndim == 1:
            targets = targets.unsqueeze(0)
    steps, n, classes = log_probs.shape
    if isinstance(blank, bool) or not isinstance(blank, (int, np.integer)) or not 0 <= blank < classes:
        raise IndexError(f"ctc_loss: blank must be a class index in [0, {classes}), got {blank!r}")
    device = log_probs.device
    il = _lengths("input_lengths", input_lengths, n, device, unbatched)
    tl = _lengths("target_lengths", target_lengths, n, device, unbatched)
    device_checks.check((il > steps)._array, RuntimeError, f"ctc_loss: expected input_lengths to be at most T={steps}",
              culprit=lambda: f"{int(il.amax())}")
    padded = _padded_targets(targets, tl, n, device)
    used = arange(padded.shape[1], device=device).unsqueeze(0) < tl.unsqueeze(1)  # (N, S): within the length
    bad = ((padded < 0).logical_or(padded >= classes)).logical_and(used)
    device_checks.check(bad._array, IndexError,
                        f"ctc_loss: a target is out of range for {classes} classes [0, {classes})",
                        culprit=lambda: f"target {int(padded[bad][0])}")
    device_checks.check((padded == blank).logical_and(used)._array, ValueError,
              f"ctc_loss: a target equals the blank index {blank}; targets must not contain blank")
    padded = where(used, padded, blank)  # padding past a target's length may hold anything
    nll = _ctc_loss(log_probs, padded, il, tl, int(blank), bool(zero_infinity))
    if reduction == "mean":
        return (nll / tl.clamp(min=1).to(nll.dtype)).mean()
    if reduction == "sum":
        return nll.sum()
    return nll[0] if unbatched else nll
