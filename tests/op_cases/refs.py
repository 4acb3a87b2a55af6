"""NumPy float64 references the op cases compare with (independent of mixprec)."""
from __future__ import annotations

import itertools
import math

import numpy as np


def split_ref(x, sizes, axis):
    return np.split(x, np.cumsum(sizes)[:-1], axis=axis)


def scatter_add_ref(x, dim, index, src):
    out = x.copy()
    for pos_ in np.ndindex(*index.shape):
        target = list(pos_)
        target[dim] = index[pos_]
        out[tuple(target)] += src[pos_]
    return out


def index_put_ref(x, idx, v, accumulate):
    out = x.copy()
    if accumulate:
        np.add.at(out, idx, v)
    else:
        out[idx] = v
    return out


def softplus_ref(x, beta=1.0, threshold=20.0):
    z = beta * x
    return np.where(z > threshold, x, np.log1p(np.exp(z)) / beta)


def softmax_ref(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def gelu_tanh_ref(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def matmul_ref(a, b):
    return a @ b


def conv2d_ref(x, w, b=None, stride=(1, 1), pad=((0, 0), (0, 0)), dilation=(1, 1), groups=1):
    x = np.pad(x, ((0, 0), (0, 0)) + tuple(pad))
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    ho = (h - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    wo = (wd - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, ho, wo))
    per = o // groups
    for oc in range(o):
        g = oc // per
        for i in range(ho):
            for j in range(wo):
                patch = x[:, g * cg:(g + 1) * cg, i * stride[0]:i * stride[0] + dilation[0] * (kh - 1) + 1:dilation[0],
                          j * stride[1]:j * stride[1] + dilation[1] * (kw - 1) + 1:dilation[1]]
                out[:, oc, i, j] = (patch * w[oc]).sum(axis=(1, 2, 3))
    return out if b is None else out + b.reshape(1, -1, 1, 1)


def conv1d_ref(x, w, b=None, stride=1, pad=0, dilation=1, groups=1):
    return conv2d_ref(x[:, :, None], w[:, :, None], b, (1, stride), ((0, 0), (pad, pad)), (1, dilation),
                      groups)[:, :, 0]


def norm_ref(x, axes, eps=1e-5):
    mu = x.mean(axis=axes, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=axes, keepdims=True)
    return (x - mu) / np.sqrt(var + eps)


def group_norm_ref(x, groups, w=None, b=None, eps=1e-5):
    n, c = x.shape[:2]
    y = norm_ref(x.reshape(n, groups, -1), (2,), eps).reshape(x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    y = y if w is None else y * w.reshape(shape)
    return y if b is None else y + b.reshape(shape)


def log_softmax_ref(x, axis):
    s = x - x.max(axis=axis, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=axis, keepdims=True))


def ce_ref(x, t, w=None, ignore=-100, reduction="mean", ls=0.0):
    """Cross entropy written out sample by sample (class-index targets)."""
    cdim = 0 if x.ndim == 1 else 1
    logp = log_softmax_ref(x, cdim)
    logp = np.moveaxis(logp, cdim, -1).reshape(-1, x.shape[cdim])
    t = np.asarray(t).reshape(-1)
    c = x.shape[cdim]
    w = np.ones(c) if w is None else w
    losses, weights = [], []
    for lp, k in zip(logp, t):
        if k == ignore:
            losses.append(0.0)
            weights.append(0.0)
            continue
        nll = -w[k] * lp[k]
        smooth = -(w * lp).sum()
        losses.append((1 - ls) * nll + ls / c * smooth)
        weights.append(w[k])
    losses = np.array(losses)
    if reduction == "none":
        return losses.reshape(np.asarray(x).shape[:cdim] + np.asarray(x).shape[cdim + 1:])
    if reduction == "sum":
        return losses.sum()
    return losses.sum() / np.sum(weights)


def ce_prob_ref(x, p, w=None, ls=0.0, reduction="mean"):
    c = x.shape[1]
    p = p * (1 - ls) + ls / c
    wb = 1.0 if w is None else w.reshape((c,) + (1,) * (x.ndim - 2))
    per = -(log_softmax_ref(x, 1) * p * wb).sum(1)
    return {"mean": per.sum() / per.size, "sum": per.sum(), "none": per}[reduction]


def reduce_ref(loss, reduction):
    return {"mean": np.mean, "sum": np.sum, "none": lambda a: a}[reduction](loss)


def huber_ref(d, delta):
    a = np.abs(d)
    return np.where(a < delta, 0.5 * d * d, delta * (a - 0.5 * delta))


def bce_logits_ref(x, t, w=None, pw=None):
    pw = 1.0 if pw is None else pw
    loss = -(pw * t * np.log(1 / (1 + np.exp(-x))) + (1 - t) * np.log(1 - 1 / (1 + np.exp(-x))))
    return (loss if w is None else loss * w).mean()


def cos_embedding_ref(a, b, t, margin=0.0, reduction="mean"):
    cos = (a * b).sum(-1) / np.sqrt(((a * a).sum(-1) + 1e-12) * ((b * b).sum(-1) + 1e-12))
    return reduce_ref(np.where(t == 1, 1 - cos, 0.0) + np.where(t == -1, np.maximum(cos - margin, 0.0), 0.0),
                      reduction)


def hinge_embedding_ref(x, t, margin=1.0, reduction="mean"):
    return reduce_ref(np.where(t != 1, np.maximum(margin - x, 0.0), 0.0) + np.where(t != -1, x, 0.0), reduction)


def triplet_ref(a, pos, neg, margin=1.0, p=2.0, eps=1e-6, swap=False, reduction="mean"):
    def d(u, v):
        return lp_norm_ref(u - v + eps, p, -1)
    d_neg = np.minimum(d(a, neg), d(pos, neg)) if swap else d(a, neg)
    return reduce_ref(np.maximum(margin + d(a, pos) - d_neg, 0.0), reduction)


def multi_margin_ref(x, y, p=1, margin=1.0, w=None, reduction="mean"):
    """Sample by sample: sum over classes j != y of max(0, margin - x[y] + x[j])**p (* w[y]), / C."""
    rows, ys = np.atleast_2d(x), np.atleast_1d(y)
    out = np.array([sum(max(0.0, margin - row[k] + row[j]) ** p * (1.0 if w is None else w[k])
                        for j in range(len(row)) if j != k) / len(row) for row, k in zip(rows, ys)])
    return reduce_ref(out if x.ndim == 2 else out[0], reduction)


def multilabel_margin_ref(x, y, reduction="mean"):
    """Sample by sample: the targets are the entries of y before the first -1; every (target, non-target) pair."""
    out = []
    for row, ys in zip(np.atleast_2d(x), np.atleast_2d(y)):
        targets = []
        for k in ys:
            if k < 0:
                break
            targets.append(k)
        others = [j for j in range(len(row)) if j not in targets]
        out.append(sum(max(0.0, 1 - (row[k] - row[j])) for k in targets for j in others) / len(row))
    out = np.array(out)
    return reduce_ref(out if x.ndim == 2 else out[0], reduction)


def multilabel_soft_margin_ref(x, t, w=None, reduction="mean"):
    def log_sigmoid(z):
        return -np.logaddexp(0.0, -z)
    loss = -(t * log_sigmoid(x) + (1 - t) * log_sigmoid(-x))
    return reduce_ref((loss if w is None else loss * w).mean(-1), reduction)


def poisson_nll_ref(x, t, log_input=True, full=False, eps=1e-8, reduction="mean"):
    loss = np.exp(x) - t * x if log_input else x - t * np.log(x + eps)
    if full:
        safe = np.where(t > 1, t, 1.0)
        loss = loss + np.where(t > 1, safe * np.log(safe) - safe + 0.5 * np.log(2 * np.pi * safe), 0.0)
    return reduce_ref(loss, reduction)


def lp_norm_ref(x, p, axis=None, keepdims=False):
    a = np.abs(x)
    if p == math.inf:
        return a.max(axis=axis, keepdims=keepdims)
    if p == -math.inf:
        return a.min(axis=axis, keepdims=keepdims)
    return (a ** p).sum(axis=axis, keepdims=keepdims) ** (1 / p)


def cos_sim_ref(a, b, axis=1, eps=1e-8):
    na = np.maximum(np.sqrt((a * a).sum(axis, keepdims=True)), eps)
    nb = np.maximum(np.sqrt((b * b).sum(axis, keepdims=True)), eps)
    return ((a / na) * (b / nb)).sum(axis)


def cdist_ref(a, b, p=2.0):
    diff = a[..., :, None, :] - b[..., None, :, :]
    return (diff != 0).sum(-1).astype(float) if p == 0 else lp_norm_ref(diff, p, -1)


def pdist_ref(x, p=2.0):
    n = len(x)
    return np.array([lp_norm_ref(x[i] - x[j], p) for i in range(n) for j in range(i + 1, n)])


def renorm_ref(x, p, dim, maxnorm):
    others = tuple(i for i in range(x.ndim) if i != dim)
    n = lp_norm_ref(x, p, others, True)
    return np.where(n > maxnorm, x * (maxnorm / (n + 1e-7)), x)


def ref_pool(x, k, s, p, d, ceil_mode, kind, count_include_pad=True, divisor_override=None):
    n, c, h, w = x.shape
    k, s, p, d = [(v, v) if isinstance(v, int) else v for v in (k, s, p, d)]

    def out_size(size, i):
        o = (size + 2 * p[i] - d[i] * (k[i] - 1) - 1 + (s[i] - 1 if ceil_mode else 0)) // s[i] + 1
        if ceil_mode and (o - 1) * s[i] >= size + p[i]:
            o -= 1
        return o
    oh, ow = out_size(h, 0), out_size(w, 1)
    out = np.zeros((n, c, oh, ow))
    for i, j in itertools.product(range(oh), range(ow)):
        r0, c0 = i * s[0] - p[0], j * s[1] - p[1]
        rows = [r0 + a * d[0] for a in range(k[0])]
        cols = [c0 + b * d[1] for b in range(k[1])]
        inside = [(r, q) for r in rows for q in cols if 0 <= r < h and 0 <= q < w]
        vals = np.stack([x[:, :, r, q] for r, q in inside], -1)
        if kind == "max":
            out[:, :, i, j] = vals.max(-1)
        else:
            hend, wend = min(r0 + k[0], h + p[0]), min(c0 + k[1], w + p[1])
            size = (hend - r0) * (wend - c0)
            if not count_include_pad:
                size = len(inside)
            out[:, :, i, j] = vals.sum(-1) / (divisor_override or size)
    return out


def avg_pool_grad_ref(g, x_shape, k):
    """The gradient of a k x k, stride-k average pool: each output's gradient spread evenly over its window."""
    out = np.zeros(x_shape)
    for i, j in itertools.product(range(g.shape[2]), range(g.shape[3])):
        out[:, :, i * k:(i + 1) * k, j * k:(j + 1) * k] += g[:, :, i:i + 1, j:j + 1] / (k * k)
    return out


def conv2d_input_grad_ref(x_shape, w, g):
    """d sum(g * conv2d(x, w)) / dx for stride 1, no padding: every output's gradient, spread back over
    its receptive field through the kernel."""
    out = np.zeros(x_shape)
    kh, kw = w.shape[2:]
    for i, j in itertools.product(range(g.shape[2]), range(g.shape[3])):
        out[:, :, i:i + kh, j:j + kw] += np.einsum("no,oc...->nc...", g[:, :, i, j], w)
    return out


def embedding_ref(idx, w):
    return w[idx]


def batch_norm_train_ref(x, w, b, eps=1e-5):
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return norm_ref(x, axes, eps) * w.reshape(shape) + b.reshape(shape)


def sdpa_ref(q, k, v, mask=None, causal=False, scale=None, with_probs=False):
    """Attention in float64: mask is bool (True: may attend) or float, added; fully masked rows give zeros."""
    s = q @ np.swapaxes(k, -1, -2) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if causal:  # bool masks are added as 0 / -inf, as torch does (a masked nan or +inf score is not hidden)
        s = s + np.where(np.tril(np.ones(s.shape[-2:], dtype=bool)), 0.0, -np.inf)
    if mask is not None:
        s = s + (np.where(mask, 0.0, -np.inf) if mask.dtype == bool else mask)
    dead = (s == -np.inf).all(-1, keepdims=True)  # nothing to attend to (a nan row is not dead: it stays nan)
    top = s.max(-1, keepdims=True)
    e = np.exp(s - np.where(dead, 0.0, top))
    p = np.where(dead, 0.0, e / e.sum(-1, keepdims=True))
    return (p @ v, p) if with_probs else p @ v
