"""Attention: scaled_dot_product_attention, and _native_multi_head_attention that nn.MultiheadAttention runs.

The precision recipe is the fused kernels' (FlashAttention, torch's CPU flash
kernel), written out with mixprec ops so both modes of autograd come for free:

    scores = (Q @ K^T) * scale     float32 (float16/bfloat16 Q and K are widened: a float32-accumulating
                                   GEMM whose result is kept in float32, never rounded to half)
    masks, causal mask             added to the float32 scores (bool and causal: 0 or -inf, so a nan or +inf
                                   score stays visible where it is masked, as in torch's math backend)
    P = softmax(scores)            float32; a row with nothing to attend to (all -inf) gets zeros, not NaN
    dropout(P)                     float32, then P is rounded once to V's dtype
    out = P @ V                    half inputs, float32 accumulation, one rounding

So a float16 attention rounds twice (the probabilities and the output), where
computing it with half ops (``(q @ k.mT).softmax(-1) @ v``) would also round the
scores, whose large magnitudes lose the most. float32 and float64 inputs run
entirely in their own dtype. torch's math backend on the CPU, which upcasts half
inputs to float32 for the whole computation, differs from this by at most the
rounding of P (tests/test_attention.py measures it).

Like a fused kernel, the op is one unit to autocast: the region decides the
dtype of its inputs (lower precision on CPU; not listed on CUDA, so inputs run
in the dtype they have), never the dtype of its inner steps. mp.amp.trace shows
the inner ops indented under the op, with the softmax running in float32. An FP8
region (mp.amp.fp8_autocast) leaves its two products unquantized too: FP8
attention is a recipe switch of its own in Transformer Engine, off by default.
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor
from ..creation import arange
from .activation import softmax
from .autocast import suspended
from . import fp8_gemms
from .elementwise import where
from .matmul import linear, matmul
from .nn_layers import dropout
from .shape import broadcasts_to
from .opmath import compute_dtype
from .registry import register

_NEG_INF = float("-inf")


# ---------------------------------------------------------------- the shared core
def _attention(q, k, v, mask, dropout_p, is_causal, scale):
    """Attention on Tensors of shape (..., L, E), (..., S, E), (..., S, Ev) -> (output, probabilities).

    ``mask``: None, a bool tensor (True: may attend) or a float tensor added to
    the scores, broadcastable to (..., L, S). Callers run this with autocast
    suspended: the dtypes below are the op's, not the region's.
    """
    work = compute_dtype(q.dtype)
    scores = matmul(q.to(work), k.to(work).mT) * scale
    if is_causal:
        scores = scores + _bias(_causal_mask(scores.shape[-2], scores.shape[-1], q.device), work)
    if mask is not None:
        scores = scores + (_bias(mask, work) if mask.dtype == _dt.bool_ else mask.to(work))
    if scores.shape[-1] == 0:  # no keys: nothing to normalise, and the output is zeros
        probs = scores
    else:
        probs = _safe_softmax(scores)
    if dropout_p > 0:
        probs = dropout(probs, dropout_p)
    probs = probs.to(v.dtype)
    return matmul(probs, v), probs


def _causal_mask(n_queries, n_keys, device):
    """True where query i may attend to key j: j <= i (top-left aligned, as torch's is_causal)."""
    return arange(n_queries, device=device).unsqueeze(1) >= arange(n_keys, device=device).unsqueeze(0)


def _bias(allowed, dtype):
    """A bool mask (True: may attend) as the float added to the scores: 0 or -inf. Added, not selected with
    where: a masked score of nan or +inf then makes its row nan, forward and backward, as torch's math backend
    (which converts bool masks the same way) does; a where would hide it."""
    return where(allowed, 0.0, _NEG_INF).to(dtype)


def _safe_softmax(scores):
    """softmax over the last dim, except that a row with nothing to attend to (all -inf: fully masked) gives
    zeros, not nan (torch's _safe_softmax). Those zeros are exp(scores) = exp(-inf), so their gradient is
    0 * g: zero, or nan where g is nan, as torch's y * (g - sum(g * y)) with y = 0; a nan is never laundered.
    (Only dead rows go through exp: a large live score would overflow it, and 0 * inf is nan.)"""
    dead = scores.amax(-1, keepdim=True) == _NEG_INF
    return where(dead, where(dead, scores, _NEG_INF).exp(), softmax(where(dead, 0.0, scores), -1))


def _repeat_heads(t, groups):
    """(..., H, S, E) -> (..., H * groups, S, E), each head repeated ``groups`` times in a row
    (repeat_interleave on dim -3): query head h reads key/value head h // groups."""
    if groups == 1:
        return t
    shape = t.shape
    expanded = t.unsqueeze(-3).expand(*shape[:-2], groups, *shape[-2:])
    return expanded.reshape(*shape[:-3], shape[-3] * groups, *shape[-2:])


# ---------------------------------------------------------------- checks
def _shape(t):
    return tuple(t.shape)


def _check_qkv(name, q, k, v):
    for what, t in (("query", q), ("key", k), ("value", v)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}: {what} must be a Tensor, got {type(t).__name__}")
    if not q.ndim >= 2 or not k.ndim >= 2 or not v.ndim >= 2:
        raise RuntimeError(f"{name}: query, key and value must each have at least 2 dims (..., L, E), got shapes "
                           f"{_shape(q)}, {_shape(k)} and {_shape(v)}")
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(f"{name}: query, key and value must have the same dtype, got {q.dtype.name}, "
                        f"{k.dtype.name} and {v.dtype.name} (cast them, or run under mp.autocast)")
    if not _dt.is_floating(q.dtype):
        raise TypeError(f"{name}: query, key and value must be floating point, got {q.dtype.name}")
    if q.shape[-1] != k.shape[-1]:
        raise RuntimeError(f"{name}: query's last dim ({q.shape[-1]}) must equal key's ({k.shape[-1]}): they are "
                           f"multiplied together (shapes {_shape(q)} and {_shape(k)})")
    if k.shape[-2] != v.shape[-2]:
        raise RuntimeError(f"{name}: key and value must have the same sequence length (dim -2), got shapes "
                           f"{_shape(k)} and {_shape(v)}")


def _check_mask(name, mask, q, scores_shape, what="attn_mask"):
    if mask is None:
        return
    if not isinstance(mask, Tensor):
        raise TypeError(f"{name}: {what} must be a Tensor or None, got {type(mask).__name__}")
    if mask.dtype != _dt.bool_ and mask.dtype not in (_dt.float32, q.dtype):
        raise TypeError(f"{name}: {what} must be bool, float32 or the query's dtype ({q.dtype.name}), "
                        f"got {mask.dtype.name}")
    if not broadcasts_to(_shape(mask), scores_shape):
        raise RuntimeError(f"{name}: {what} of shape {_shape(mask)} does not broadcast to the attention "
                           f"scores' shape {scores_shape} (..., L, S)")


def _check_probability(name, p):
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"{name}: dropout_p must be a probability between 0 and 1, got {p!r}")


def _batch_shape(name, *tensors):
    try:
        return np.broadcast_shapes(*(_shape(t)[:-2] for t in tensors))
    except ValueError:
        raise RuntimeError(f"{name}: the batch dims of query, key and value do not broadcast together, got "
                           f"shapes {', '.join(str(_shape(t)) for t in tensors)}") from None


# ---------------------------------------------------------------- the ops
@register("scaled_dot_product_attention", functional=True, promote=(0, 1, 2, 3), composite=True)
def scaled_dot_product_attention(ctx, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None, enable_gqa=False):
    """softmax(query @ key^T * scale + mask) @ value, over (..., L, E), (..., S, E), (..., S, Ev) -> (..., L, Ev).

    attn_mask: bool (True: may attend) or float (added to the scores), broadcastable
    to (..., L, S). is_causal: query i attends to keys 0..i (no attn_mask then).
    scale: default 1/sqrt(E). dropout_p: dropout on the probabilities (always
    applied when > 0, as torch's). enable_gqa: key/value may have fewer heads (dim
    -3) than query, each shared by a group of query heads. Precision: see the
    module docstring (float32 scores and softmax for half inputs).
    """
    name = "scaled_dot_product_attention"
    _check_qkv(name, query, key, value)
    _check_probability(name, dropout_p)
    if is_causal and attn_mask is not None:
        raise RuntimeError(f"{name}: pass either attn_mask or is_causal=True, not both (fold the causal mask "
                           "into attn_mask)")
    if enable_gqa:
        if query.ndim < 3 or key.ndim < 3 or key.shape[-3] != value.shape[-3] or key.shape[-3] == 0 \
                or query.shape[-3] % key.shape[-3]:
            raise RuntimeError(f"{name}: enable_gqa needs key and value with the same number of heads (dim -3), "
                               f"dividing the query's; got shapes {_shape(query)}, {_shape(key)} and "
                               f"{_shape(value)}")
        groups = query.shape[-3] // key.shape[-3]
        key, value = _repeat_heads(key, groups), _repeat_heads(value, groups)
    batch = _batch_shape(name, query, key, value)
    _check_mask(name, attn_mask, query, batch + (query.shape[-2], key.shape[-2]))
    if scale is None:  # (with no features the scores are 0 whatever the scale; 1/sqrt(0) would make them nan)
        scale = 1.0 / math.sqrt(query.shape[-1]) if query.shape[-1] else 1.0
    scale = float(scale)
    with suspended(), fp8_gemms.plain():  # one fused unit: autocast decided its inputs (if at all), not its steps
        return _attention(query, key, value, attn_mask, dropout_p, is_causal, scale)[0]


@register("_native_multi_head_attention", promote=(0, 1, 2, 5, 6, 7, 8, 9), composite=True)
def _native_multi_head_attention(ctx, query, key, value, embed_dim, num_head, qkv_weight, qkv_bias, proj_weight,
                                 proj_bias, mask=None, need_weights=True, average_attn_weights=True,
                                 mask_type=None, dropout_p=0.0):
    """Multi-head attention over batch-first (B, L, E) query and (B, S, E) key/value -> (output, weights).

    torch's op of this name (the fused path of nn.MultiheadAttention), here
    differentiable and the one path mixprec's nn.MultiheadAttention runs:
    project q, k, v with the stacked qkv_weight (3E, E), attend per head, project
    with proj_weight. mask (True or -inf: masked out) has mask_type 0 (L, S),
    1 (B, S) key padding, or 2 (broadcastable to (B, H, L, S)). weights:
    the probabilities averaged over heads (B, L, S), or (B, H, L, S), or None
    unless need_weights. dropout_p (mixprec's addition; torch's op is
    inference-only) drops probabilities in training. Lower precision under CPU
    autocast, as torch's table says; the projections are linear ops, so CUDA
    autocast runs them in float16.
    """
    name = "_native_multi_head_attention"
    _check_qkv(name, query, key, value)
    _check_probability(name, dropout_p)
    if query.ndim != 3 or key.ndim != 3 or value.ndim != 3 or key.shape[:2] != value.shape[:2] \
            or key.shape[0] != query.shape[0]:
        raise RuntimeError(f"{name}: expected batch-first query (B, L, E) and key, value (B, S, E), got shapes "
                           f"{_shape(query)}, {_shape(key)} and {_shape(value)}")
    if query.shape[-1] != embed_dim or embed_dim % num_head:
        raise RuntimeError(f"{name}: embed_dim {embed_dim} must be the inputs' last dim ({query.shape[-1]}) and "
                           f"divisible by num_head ({num_head})")
    if _shape(qkv_weight) != (3 * embed_dim, embed_dim) or _shape(proj_weight) != (embed_dim, embed_dim):
        raise RuntimeError(f"{name}: expected qkv_weight of shape {(3 * embed_dim, embed_dim)} and proj_weight of "
                           f"shape {(embed_dim, embed_dim)}, got {_shape(qkv_weight)} and {_shape(proj_weight)}")
    b, n_q, n_k, heads = query.shape[0], query.shape[1], key.shape[1], num_head
    mask = _head_mask(name, mask, mask_type, b, heads, n_q, n_k, query)
    if query is key and key is value:  # self-attention: one GEMM for all three projections
        q, k, v = linear(query, qkv_weight, qkv_bias).chunk(3, dim=-1)
    else:
        ws = qkv_weight.chunk(3)
        bs = qkv_bias.chunk(3) if qkv_bias is not None else (None,) * 3
        q, k, v = (linear(x, w, bias) for x, w, bias in zip((query, key, value), ws, bs))

    def heads_first(t, n):  # (B, n, E) -> (B, H, n, E / H)
        return t.reshape(b, n, heads, embed_dim // heads).transpose(1, 2)
    with suspended(), fp8_gemms.plain():
        out, probs = _attention(heads_first(q, n_q), heads_first(k, n_k), heads_first(v, n_k), mask, dropout_p,
                                False, 1.0 / math.sqrt(embed_dim // heads))
    out = linear(out.transpose(1, 2).reshape(b, n_q, embed_dim), proj_weight, proj_bias)
    if not need_weights:
        return out, None
    return out, probs.mean(dim=1) if average_attn_weights else probs


def _head_mask(name, mask, mask_type, b, heads, n_q, n_k, query):
    """nn.MultiheadAttention's mask (True: masked out) as the core's (True: may attend), shaped to broadcast
    to (B, H, L, S)."""
    if mask is None:
        return None
    expected = {0: (n_q, n_k), 1: (b, n_k), 2: (b, heads, n_q, n_k)}
    if mask_type not in expected:
        raise RuntimeError(f"{name}: mask_type must say what the mask is: 0 (L, S) attention mask, 1 (B, S) key "
                           f"padding mask or 2 (B, H, L, S); got {mask_type!r}")
    if mask_type == 1:
        if _shape(mask) != expected[1]:
            raise RuntimeError(f"{name}: a key padding mask (mask_type 1) must have shape {expected[1]}, got "
                               f"{_shape(mask)}")
        mask = mask.reshape(b, 1, 1, n_k)
    _check_mask(name, mask, query, expected[2], what=f"mask (mask_type {mask_type})")
    return mask.logical_not() if mask.dtype == _dt.bool_ else mask
