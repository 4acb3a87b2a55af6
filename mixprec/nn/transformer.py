"""Attention and transformer layers: MultiheadAttention, TransformerEncoderLayer, TransformerEncoder.

Parameter names, initialisation, shapes and mask conventions are torch's, so a
torch state_dict loads as it is. The attention itself is one op,
``_native_multi_head_attention`` (mixprec/ops/attention.py): projections with
linear, attention with a float32 softmax, one place for the math and its
autocast policy. Note the two mask conventions: these modules' bool masks say
True = *masked out* (torch.nn's), while F.scaled_dot_product_attention's bool
attn_mask says True = *may attend* (torch's too).
"""
from __future__ import annotations

import copy

from .. import dtypes as _dt
from ..ops.attention import _native_multi_head_attention
from ..ops.elementwise import where
from ..tensor import Tensor
from ..creation import empty
from . import functional as F
from . import init
from .layers import Dropout, LayerNorm, Linear, _factory
from .module import Module, ModuleList
from .parameter import Parameter


class MultiheadAttention(Module):
    """Attention from query to key/value with num_heads heads of embed_dim / num_heads dims each.

    Inputs are (L, N, E) (batch_first: (N, L, E)) or unbatched (L, E).
    forward returns (output, weights): weights are the attention probabilities
    averaged over heads (N, L, S), per head (N, H, L, S) with
    average_attn_weights=False, or None with need_weights=False.
    key_padding_mask (N, S) and attn_mask (L, S) or (N * H, L, S): bool (True:
    masked out) or float (added to the scores).
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim=None, vdim=None,
                 batch_first: bool = False, device=None, dtype=None):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0 or embed_dim % num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim ({embed_dim}) must be positive and divisible by "
                             f"num_heads ({num_heads})")
        if add_bias_kv or add_zero_attn or kdim not in (None, embed_dim) or vdim not in (None, embed_dim):
            raise ValueError("MultiheadAttention: add_bias_kv, add_zero_attn and kdim/vdim other than embed_dim "
                             "are not supported")
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
        self.dropout, self.batch_first = dropout, batch_first
        kw = _factory(device, dtype)
        self.in_proj_weight = Parameter(empty(3 * embed_dim, embed_dim, **kw))
        if bias:
            self.in_proj_bias = Parameter(empty(3 * embed_dim, **kw))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, device=device, dtype=dtype)
        self._reset_parameters()

    def _reset_parameters(self):
        """torch's: xavier-uniform input projection, zero biases (out_proj.weight keeps Linear's init)."""
        init.xavier_uniform_(self.in_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)

    def forward(self, query, key, value, key_padding_mask=None, need_weights: bool = True, attn_mask=None,
                average_attn_weights: bool = True, is_causal: bool = False):
        name = type(self).__name__
        for what, t in (("query", query), ("key", key), ("value", value)):
            if not isinstance(t, Tensor) or t.ndim not in (2, 3) or t.shape[-1] != self.embed_dim:
                got = f"shape {tuple(t.shape)}" if isinstance(t, Tensor) else type(t).__name__
                raise ValueError(f"{name}(embed_dim={self.embed_dim}): expected {what} of shape (L, N, "
                                 f"{self.embed_dim}), (N, L, {self.embed_dim}) with batch_first, or unbatched "
                                 f"(L, {self.embed_dim}); got {got}")
        if is_causal and attn_mask is None:
            raise RuntimeError(f"{name}: is_causal=True is a hint that attn_mask is the causal mask; pass that "
                               "attn_mask too")
        unbatched = query.ndim == 2
        if unbatched:
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        if not self.batch_first or unbatched:
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        mask, mask_type = self._merge_masks(attn_mask, key_padding_mask, query, key)
        out, weights = _native_multi_head_attention(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight, self.in_proj_bias,
            self.out_proj.weight, self.out_proj.bias, mask, need_weights, average_attn_weights, mask_type,
            dropout_p=self.dropout if self.training else 0.0)
        if not self.batch_first or unbatched:
            out = out.transpose(0, 1)
        if unbatched:
            out = out.squeeze(1)
            weights = weights.squeeze(0) if weights is not None else None
        return out, weights

    def _merge_masks(self, attn_mask, key_padding_mask, query, key):
        """One mask for the op, and its mask_type (0: (L, S), 1: (N, S) key padding, 2: (N, H, L, S))."""
        n, n_q, n_k, heads = query.shape[0], query.shape[1], key.shape[1], self.num_heads
        name = type(self).__name__
        if attn_mask is not None:
            if tuple(attn_mask.shape) not in ((n_q, n_k), (n * heads, n_q, n_k)):
                raise ValueError(f"{name}: attn_mask must have shape {(n_q, n_k)} or {(n * heads, n_q, n_k)}, got "
                                 f"{tuple(attn_mask.shape)}")
            if attn_mask.ndim == 3:  # (N * H, L, S) -> (N, H, L, S)
                attn_mask = attn_mask.reshape(n, heads, n_q, n_k)
            elif key_padding_mask is not None:  # (L, S) -> (1, 1, L, S), to combine with the padding below
                attn_mask = attn_mask.reshape(1, 1, n_q, n_k)
        if key_padding_mask is not None and tuple(key_padding_mask.shape) != (n, n_k):
            raise ValueError(f"{name}: key_padding_mask must have shape {(n, n_k)}, got "
                             f"{tuple(key_padding_mask.shape)}")
        if key_padding_mask is None:
            return attn_mask, None if attn_mask is None else (0 if attn_mask.ndim == 2 else 2)
        if attn_mask is None:
            return key_padding_mask, 1
        padding = key_padding_mask.reshape(n, 1, 1, n_k)
        if attn_mask.dtype == _dt.bool_ and padding.dtype == _dt.bool_:
            return attn_mask.logical_or(padding), 2
        return _additive(attn_mask, query.dtype) + _additive(padding, query.dtype), 2

    def extra_repr(self):
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, dropout={self.dropout}, " \
               f"batch_first={self.batch_first}"


def _additive(mask, dtype):
    """A bool mask (True: masked out) as the float mask that adds -inf there; a float mask as it is."""
    return where(mask, float("-inf"), 0.0).to(dtype) if mask.dtype == _dt.bool_ else mask


_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


class TransformerEncoderLayer(Module):
    """Self-attention and a feed-forward block, each with a residual connection, dropout and LayerNorm.

    norm_first=False (post-norm, the original Transformer): x = norm(x + block(x));
    norm_first=True (pre-norm, GPT-style): x = x + block(norm(x)).
    activation: "relu", "gelu" or a callable.
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation="relu", layer_norm_eps: float = 1e-5, batch_first: bool = False, norm_first: bool = False,
                 bias: bool = True, device=None, dtype=None):
        super().__init__()
        kw = dict(device=device, dtype=dtype)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                            **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        if isinstance(activation, str):
            if activation not in _ACTIVATIONS:
                raise ValueError(f"TransformerEncoderLayer: activation must be 'relu', 'gelu' or a callable, got "
                                 f"{activation!r}")
            activation = _ACTIVATIONS[activation]
        elif not callable(activation):
            raise TypeError(f"TransformerEncoderLayer: activation must be 'relu', 'gelu' or a callable, got "
                            f"{type(activation).__name__}")
        self.activation = activation

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal: bool = False):
        x = src
        if self.norm_first:
            x = x + self._attention_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._feed_forward_block(self.norm2(x))
        x = self.norm1(x + self._attention_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._feed_forward_block(x))

    def _attention_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False,
                           is_causal=is_causal)[0]
        return self.dropout1(x)

    def _feed_forward_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoder(Module):
    """num_layers copies of encoder_layer applied in turn (each with its own parameters), then an optional norm."""

    def __init__(self, encoder_layer, num_layers: int, norm=None, enable_nested_tensor: bool = True,
                 mask_check: bool = True):
        super().__init__()
        if not isinstance(encoder_layer, Module) or num_layers < 1:
            raise ValueError("TransformerEncoder: expected a layer Module and num_layers >= 1, got "
                             f"{type(encoder_layer).__name__} and {num_layers!r}")
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        out = src
        for layer in self.layers:
            out = layer(out, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=bool(is_causal))
        return self.norm(out) if self.norm is not None else out
