"""Transformer nn modules against torch with copied weights (float64): MultiheadAttention, TransformerEncoderLayer,
TransformerEncoder, RMSNorm, SiLU, GELU(tanh), Embedding(padding_idx), and nn.utils.rnn.pad_sequence."""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp
from mixprec import nn


def _load_from_torch(module, torch_module):
    """Copy a torch module's state_dict into ours; the keys must be the same."""
    state = {k: v.detach().numpy() for k, v in torch_module.state_dict().items()}
    assert sorted(module.state_dict()) == sorted(state)
    module.load_state_dict({k: mp.tensor(v) for k, v in state.items()})


def _both(rng, *shape):
    torch = pytest.importorskip("torch")
    a = rng.standard_normal(shape)
    return mp.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def _close(ours, theirs, rtol=1e-10):
    if ours is None or theirs is None:
        assert ours is None and theirs is None
        return
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=rtol, atol=1e-12)


MHA_CALLS = [
    ("self", {}),
    ("key-padding", {"key_padding_mask": "padding"}),
    ("bool-attn-mask", {"attn_mask": "bool"}),
    ("both-masks-per-head-weights", {"attn_mask": "bool", "key_padding_mask": "padding",
                                     "average_attn_weights": False}),
    ("float-and-bool-masks", {"attn_mask": "float", "key_padding_mask": "padding"}),
    ("per-head-float-mask", {"attn_mask": "per-head"}),
    ("no-weights", {"attn_mask": "bool", "need_weights": False}),
    ("causal-hint", {"attn_mask": "causal", "is_causal": True, "need_weights": False}),
]


@pytest.mark.parametrize("batch_first", [False, True], ids=["seq-first", "batch-first"])
@pytest.mark.parametrize("name,kw", MHA_CALLS, ids=[c[0] for c in MHA_CALLS])
def test_multihead_attention_matches_torch(name, kw, batch_first):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    e, h, n, lq, s = 8, 2, 2, 3, 5
    ref = torch.nn.MultiheadAttention(e, h, batch_first=batch_first).double()
    ours = nn.MultiheadAttention(e, h, batch_first=batch_first).double()
    _load_from_torch(ours, ref)
    rng = np.random.default_rng(1)
    lk = lq if name == "causal-hint" else s
    (q, tq), (k, tk), (v, tv) = _both(rng, lq, n, e), _both(rng, lk, n, e), _both(rng, lk, n, e)
    if batch_first:
        q, k, v = (x.detach().transpose(0, 1).contiguous().requires_grad_() for x in (q, k, v))
        tq, tk, tv = (x.detach().transpose(0, 1).contiguous().requires_grad_() for x in (tq, tk, tv))
    masks = {"padding": np.array([[False] * lk, [False] * (lk - 2) + [True, True]]),
             "bool": (rng.random((lq, lk)) > 0.7) & (np.arange(lk) > 0),
             "float": rng.standard_normal((lq, lk)),
             "per-head": rng.standard_normal((n * h, lq, lk)),
             "causal": np.triu(np.ones((lq, lk), bool), 1)}
    args = {key: masks[val] if isinstance(val, str) else val for key, val in kw.items()}
    out, weights = ours(q, k, v, **{a: mp.tensor(b) if isinstance(b, np.ndarray) else b for a, b in args.items()})
    tout, tweights = ref(tq, tk, tv, **{a: torch.tensor(b) if isinstance(b, np.ndarray) else b
                                        for a, b in args.items()})
    _close(out, tout)
    _close(weights, tweights)
    out.sum().backward()
    tout.sum().backward()
    for m, t in zip((q, k, v), (tq, tk, tv)):
        _close(m.grad, t.grad, rtol=1e-9)
    _close(ours.in_proj_weight.grad, ref.in_proj_weight.grad, rtol=1e-9)


def test_multihead_attention_unbatched_bias_free_and_init():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    ref = torch.nn.MultiheadAttention(6, 3, bias=False).double()
    ours = nn.MultiheadAttention(6, 3, bias=False).double()
    _load_from_torch(ours, ref)
    rng = np.random.default_rng(2)
    x, tx = _both(rng, 4, 6)
    mask = np.array([False, True, False, False])
    for a, b in ((None, None), (mp.tensor(mask), torch.tensor(mask))):
        out, w = ours(x, x, x, key_padding_mask=a, average_attn_weights=False)
        tout, tw = ref(tx, tx, tx, key_padding_mask=b, average_attn_weights=False)
        _close(out, tout)
        _close(w, tw)
    fresh = nn.MultiheadAttention(64, 4)
    assert np.all(fresh.in_proj_bias.numpy() == 0) and np.all(fresh.out_proj.bias.numpy() == 0)
    bound = np.sqrt(6 / (64 + 3 * 64))  # xavier_uniform on (3E, E)
    w = fresh.in_proj_weight.numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound


MHA_ERRORS = [
    (lambda: nn.MultiheadAttention(10, 3), ValueError, r"embed_dim \(10\) must be positive and divisible"),
    (lambda: nn.MultiheadAttention(8, 2, kdim=4), ValueError, "kdim/vdim other than embed_dim are not supported"),
    (lambda: nn.MultiheadAttention(8, 2)(mp.ones(3, 2, 6), mp.ones(3, 2, 6), mp.ones(3, 2, 6)), ValueError,
     r"expected query of shape \(L, N, 8\)"),
    (lambda: nn.MultiheadAttention(8, 2)(mp.ones(3, 2, 8), mp.ones(3, 2, 8), mp.ones(3, 2, 8),
                                         key_padding_mask=mp.ones(2, 4, dtype=mp.bool)), ValueError,
     r"key_padding_mask must have shape \(2, 3\)"),
    (lambda: nn.MultiheadAttention(8, 2)(mp.ones(3, 2, 8), mp.ones(3, 2, 8), mp.ones(3, 2, 8),
                                         attn_mask=mp.ones(2, 3, 3, dtype=mp.bool)), ValueError,
     r"attn_mask must have shape \(3, 3\) or \(4, 3, 3\)"),
    (lambda: nn.MultiheadAttention(8, 2)(mp.ones(3, 2, 8), mp.ones(3, 2, 8), mp.ones(3, 2, 8), is_causal=True),
     RuntimeError, "is_causal=True is a hint"),
]


@pytest.mark.parametrize("call,error,match", MHA_ERRORS)
def test_multihead_attention_rejects_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("batch_first", [False, True], ids=["seq-first", "batch-first"])
def test_transformer_encoder_matches_torch(norm_first, activation, batch_first):
    """Two layers with a causal float mask and key padding, in training mode (dropout 0), forward and backward."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    kw = dict(dim_feedforward=16, dropout=0.0, activation=activation, batch_first=batch_first, norm_first=norm_first)
    ref = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(8, 2, **kw).double(), 2,
                                      norm=torch.nn.LayerNorm(8).double(), enable_nested_tensor=False)
    ours = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, **kw).double(), 2, norm=nn.LayerNorm(8).double())
    _load_from_torch(ours, ref)
    assert ours.layers[0].linear1.weight is not ours.layers[1].linear1.weight  # each layer its own copy
    rng = np.random.default_rng(3)
    x, tx = _both(rng, *((2, 4, 8) if batch_first else (4, 2, 8)))
    causal = np.triu(np.full((4, 4), -np.inf), 1)
    padding = np.array([[False] * 4, [False, False, True, True]])
    out = ours(x, mask=mp.tensor(causal), src_key_padding_mask=mp.tensor(padding))
    tout = ref(tx, mask=torch.tensor(causal), src_key_padding_mask=torch.tensor(padding))
    _close(out, tout)
    (out * out).sum().backward()
    (tout * tout).sum().backward()
    _close(x.grad, tx.grad, rtol=1e-9)
    for (_, p), (_, tp) in zip(sorted(ours.named_parameters()), sorted(ref.named_parameters())):
        _close(p.grad, tp.grad, rtol=1e-8)


def test_transformer_encoder_layer_dropout_and_bad_activation():
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.5, batch_first=True)
    x = mp.randn(2, 3, 8)
    layer.train()
    assert not np.allclose(layer(x).numpy(), layer(x).numpy())   # dropout draws differ
    layer.eval()
    np.testing.assert_array_equal(layer(x).numpy(), layer(x).numpy())
    assert nn.TransformerEncoderLayer(8, 2, activation=nn.GELU())(mp.randn(3, 1, 8)).shape == (3, 1, 8)
    with pytest.raises(ValueError, match="activation must be 'relu', 'gelu' or a callable, got 'swish'"):
        nn.TransformerEncoderLayer(8, 2, activation="swish")


def test_transformer_layers_under_cpu_autocast_run_in_bfloat16():
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, batch_first=True)
    with mp.autocast("cpu"):
        out = layer(mp.randn(2, 3, 8), src_key_padding_mask=mp.tensor([[False, False, True], [False] * 3]))
        weights = layer.self_attn(mp.randn(2, 3, 8), mp.randn(2, 3, 8), mp.randn(2, 3, 8))[1]
    assert out.dtype == mp.float32           # the last op is a layer norm: float32 parameters
    assert weights.dtype == mp.bfloat16      # _native_multi_head_attention is lower precision on CPU


def test_rms_norm_module_matches_torch():
    torch = pytest.importorskip("torch")
    ref = torch.nn.RMSNorm((2, 4), eps=1e-4).double()
    ours = nn.RMSNorm((2, 4), eps=1e-4).double()
    with torch.no_grad():
        ref.weight.copy_(torch.randn(2, 4, dtype=torch.float64))
    _load_from_torch(ours, ref)
    rng = np.random.default_rng(4)
    x, tx = _both(rng, 3, 2, 4)
    _close(ours(x), ref(tx))
    assert nn.RMSNorm(4, elementwise_affine=False).weight is None
    with pytest.raises(ValueError, match=r"RMSNorm.*expected input\[\.\.\., 2, 4\]"):
        ours(mp.ones(3, 4, 2))


def test_activation_modules_match_torch():
    torch = pytest.importorskip("torch")
    x = np.linspace(-6, 6, 41)
    _close(nn.SiLU()(mp.tensor(x)), torch.nn.SiLU()(torch.tensor(x)), rtol=1e-14)
    _close(nn.GELU(approximate="tanh")(mp.tensor(x)), torch.nn.GELU(approximate="tanh")(torch.tensor(x)), rtol=1e-14)


def test_embedding_padding_idx_matches_torch():
    """The padding row starts at zero, gets no gradient, and a negative padding_idx counts from the end."""
    torch = pytest.importorskip("torch")
    ours, ref = nn.Embedding(5, 3, padding_idx=-1).double(), torch.nn.Embedding(5, 3, padding_idx=-1).double()
    assert ours.padding_idx == ref.padding_idx == 4
    assert np.all(ours.weight.numpy()[4] == 0)
    _load_from_torch(ours, ref)
    idx = np.array([[0, 4, 2], [4, 4, 1]])
    out, tout = ours(mp.tensor(idx)), ref(torch.tensor(idx))
    _close(out, tout)
    (out * out).sum().backward()
    (tout * tout).sum().backward()
    _close(ours.weight.grad, ref.weight.grad)
    assert np.all(ours.weight.grad.numpy()[4] == 0)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_pad_sequence_matches_torch(batch_first, padding_side):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal((n, 2)) for n in (3, 1, 4)]
    ours = nn.utils.rnn.pad_sequence([mp.tensor(a, requires_grad=True) for a in arrays], batch_first=batch_first,
                                     padding_value=-1.0, padding_side=padding_side)
    ref = torch.nn.utils.rnn.pad_sequence([torch.tensor(a) for a in arrays], batch_first=batch_first,
                                          padding_value=-1.0, padding_side=padding_side)
    _close(ours, ref)
    tokens = nn.utils.rnn.pad_sequence([mp.tensor([1, 2]), mp.tensor([3])], batch_first=True)
    assert tokens.dtype == mp.int64 and tokens.tolist() == [[1, 2], [3, 0]]


def test_pad_sequence_gradient_reaches_each_sequence():
    seqs = [mp.randn(n, 2, requires_grad=True) for n in (2, 3)]
    (nn.utils.rnn.pad_sequence(seqs) * 2).sum().backward()
    assert [s.grad.shape for s in seqs] == [(2, 2), (3, 2)]
    assert all(np.all(s.grad.numpy() == 2) for s in seqs)


PAD_ERRORS = [
    (lambda: nn.utils.rnn.pad_sequence([]), ValueError, "at least one sequence"),
    (lambda: nn.utils.rnn.pad_sequence(mp.ones(2, 3)), TypeError, "a list or tuple of Tensors"),
    (lambda: nn.utils.rnn.pad_sequence([mp.ones(2, 3), mp.ones(2, 4)]), RuntimeError, r"sequence 1 has shape \(2, 4\)"),
    (lambda: nn.utils.rnn.pad_sequence([mp.ones(2), mp.ones(2, dtype=mp.float64)]), RuntimeError,
     "dtype float64"),
    (lambda: nn.utils.rnn.pad_sequence([mp.ones(2)], padding_side="top"), ValueError, "'left' or 'right'"),
]


@pytest.mark.parametrize("call,error,match", PAD_ERRORS)
def test_pad_sequence_rejects_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()
