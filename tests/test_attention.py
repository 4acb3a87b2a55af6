"""Transformer ops against torch (CPU, float64 as the oracle): scaled_dot_product_attention, einsum, logsumexp,
rms_norm, silu; their precision in float16/bfloat16, their autocast behaviour and their errors.

The op table (tests/op_cases/) already checks every op against a NumPy reference, gradcheck and forward mode;
these tests pin what torch defines: values and gradients, dtypes under autocast, masks, empty inputs.
"""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp
import mixprec.nn.functional as F

LOW = [pytest.param(mp.float16, id="float16"), pytest.param(mp.bfloat16, id="bfloat16")]


def _pair(rng, *shape):
    """The same float64 values as a mixprec and a torch tensor, both requiring grad."""
    torch = pytest.importorskip("torch")
    a = rng.standard_normal(shape)
    return mp.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def _grads_match(ours, theirs):
    for m, t in zip(ours, theirs):
        np.testing.assert_allclose(m.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-12)


# ----------------------------------------------------------------- scaled_dot_product_attention
SDPA_CALLS = [
    ("plain", (2, 3, 4), (2, 5, 4), (2, 5, 6), {}),
    ("causal", (2, 2, 4, 3), (2, 2, 4, 3), (2, 2, 4, 3), {"is_causal": True}),
    ("causal-rectangular", (1, 5, 2), (1, 3, 2), (1, 3, 2), {"is_causal": True}),
    ("scale", (3, 4), (5, 4), (5, 2), {"scale": 0.3}),
    ("gqa", (1, 4, 3, 2), (1, 2, 5, 2), (1, 2, 5, 3), {"enable_gqa": True}),
    ("batch-broadcast", (2, 1, 3, 4), (1, 3, 5, 4), (1, 3, 5, 4), {}),
]


@pytest.mark.parametrize("shapes", SDPA_CALLS, ids=[c[0] for c in SDPA_CALLS])
def test_sdpa_matches_torch_values_and_gradients(shapes):
    torch = pytest.importorskip("torch")
    _, qs, ks, vs, kw = shapes
    rng = np.random.default_rng(0)
    (q, tq), (k, tk), (v, tv) = _pair(rng, *qs), _pair(rng, *ks), _pair(rng, *vs)
    out = F.scaled_dot_product_attention(q, k, v, **kw)
    ref = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, **kw)
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-12, atol=1e-12)
    g = rng.standard_normal(out.shape)
    (out * mp.tensor(g)).sum().backward()
    (ref * torch.tensor(g)).sum().backward()
    _grads_match((q, k, v), (tq, tk, tv))


@pytest.mark.parametrize("kind", ["bool", "float", "float32-mask-float64-query"])
def test_sdpa_masks_match_torch_including_a_fully_masked_row(kind):
    """bool: True may attend; float: added to the scores. A row with nothing to attend to gives zeros and passes
    no gradient (torch's safe softmax), for a bool mask and for a float mask of -inf alike."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    (q, tq), (k, tk), (v, tv) = _pair(rng, 2, 3, 4), _pair(rng, 2, 5, 4), _pair(rng, 2, 5, 6)
    allowed = rng.random((3, 5)) > 0.4
    allowed[:, 0], allowed[1] = True, False
    if kind == "bool":
        mask = allowed
    else:
        mask = np.where(allowed, rng.standard_normal((3, 5)), -np.inf)
        mask = mask.astype(np.float32) if kind.startswith("float32") else mask
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mp.tensor(mask))
    ref = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=torch.tensor(mask))
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-6, atol=1e-12)
    assert np.all(out.numpy()[:, 1] == 0)
    out.sum().backward()
    ref.sum().backward()
    for m, t in zip((q, k, v), (tq, tk, tv)):
        np.testing.assert_allclose(m.grad.numpy(), t.grad.numpy(), rtol=1e-6, atol=1e-12)
    assert np.all(q.grad.numpy()[:, 1] == 0) and np.isfinite(k.grad.numpy()).all()


def test_sdpa_empty_inputs_follow_torch():
    torch = pytest.importorskip("torch")
    q, k, v = mp.ones(2, 3, 4), mp.ones(2, 5, 4), mp.ones(2, 5, 6)
    assert F.scaled_dot_product_attention(q[:, :0], k, v).shape == (2, 0, 6)
    no_keys = F.scaled_dot_product_attention(q, k[:, :0], v[:, :0])   # nothing to attend to: zeros
    tq, tk, tv = torch.ones(2, 3, 4), torch.ones(2, 0, 4), torch.ones(2, 0, 6)
    np.testing.assert_array_equal(no_keys.numpy(), torch.nn.functional.scaled_dot_product_attention(tq, tk, tv))


def test_sdpa_dropout_drops_probabilities_with_mixprecs_generator():
    """dropout_p > 0 multiplies the float32 probabilities by the mask dropout would draw at that point."""
    rng = np.random.default_rng(2)
    q, k, v = (mp.tensor(rng.standard_normal(s), dtype=mp.float64) for s in ((2, 3, 4), (2, 5, 4), (2, 5, 6)))
    mp.manual_seed(5)
    out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.4)
    mp.manual_seed(5)
    keep = F.dropout(mp.ones(2, 3, 5, dtype=mp.float64), 0.4)   # the same draw: 0 or 1 / 0.6
    probs = F.softmax(q @ k.mT / 2.0, dim=-1)
    np.testing.assert_allclose(out.numpy(), ((probs * keep) @ v).numpy(), rtol=1e-12)
    assert not np.allclose(out.numpy(), F.scaled_dot_product_attention(q, k, v).numpy())


@pytest.mark.parametrize("dtype", LOW)
def test_sdpa_half_precision_recipe(dtype):
    """Half inputs: float32 scores and softmax, the probabilities rounded once, P @ V accumulated in float32 and
    rounded once. Check it bit for bit against that recipe written in NumPy, and its error against float64."""
    rng = np.random.default_rng(3)
    q, k, v = (mp.tensor(rng.standard_normal(s) * 3, dtype=dtype) for s in ((2, 2, 16, 32), (2, 2, 24, 32),
                                                                            (2, 2, 24, 32)))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert out.dtype == dtype
    q32, k32, v32 = (t.numpy().astype(np.float32) for t in (q, k, v))
    scores = (q32 @ np.swapaxes(k32, -1, -2)) * np.float32(1 / np.sqrt(32))
    scores = np.where(np.tril(np.ones((16, 24), bool)), scores, -np.inf)
    e = np.exp(scores - scores.max(-1, keepdims=True))
    p = (e / e.sum(-1, keepdims=True)).astype(dtype)
    np.testing.assert_array_equal(out.numpy(), (p.astype(np.float32) @ v32).astype(dtype))
    exact = _sdpa64(*(t.numpy().astype(np.float64) for t in (q, k, v)))
    ulp = 2.0 ** -10 if dtype == mp.float16 else 2.0 ** -7
    assert np.abs(out.numpy().astype(np.float64) - exact).max() <= 1.5 * ulp * np.abs(exact).max()


def _sdpa64(q, k, v):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True) @ v


@pytest.mark.parametrize("dtype", LOW)
def test_sdpa_half_agrees_with_torchs_math_backend(dtype):
    """torch's CPU math backend keeps the probabilities in float32 (one rounding, at the end); ours rounds them
    to the input dtype for P @ V, as GPU flash kernels do. The two differ by at most 2 ulps of the output."""
    torch = pytest.importorskip("torch")
    from torch.nn.attention import SDPBackend, sdpa_kernel
    rng = np.random.default_rng(4)
    arrays = [rng.standard_normal(s) * 3 for s in ((2, 2, 16, 32), (2, 2, 24, 32), (2, 2, 24, 32))]
    ours = F.scaled_dot_product_attention(*(mp.tensor(a, dtype=dtype) for a in arrays), is_causal=True)
    tdtype = torch.float16 if dtype == mp.float16 else torch.bfloat16
    with sdpa_kernel(SDPBackend.MATH):
        theirs = torch.nn.functional.scaled_dot_product_attention(*(torch.tensor(a).to(tdtype) for a in arrays),
                                                                  is_causal=True)
    ulp = 2.0 ** -10 if dtype == mp.float16 else 2.0 ** -7
    diff = np.abs(ours.numpy().astype(np.float64) - theirs.double().numpy())
    assert diff.max() <= 2 * ulp * np.abs(theirs.double().numpy()).max()
    assert (diff == 0).mean() > 0.5   # most elements agree exactly


def test_sdpa_under_autocast():
    """Lower precision on both device types (torch 2.13's CUDA autocast registers it beyond its documented list):
    inputs, float masks too, cast to the region's dtype. Inside, the softmax runs in float32 whatever the region
    says."""
    rng = np.random.default_rng(5)
    q, k, v = (mp.tensor(rng.standard_normal(s), dtype=mp.float32) for s in ((2, 3, 4), (2, 5, 4), (2, 5, 4)))
    mask = mp.zeros(3, 5)
    with mp.amp.trace() as t, mp.autocast("cpu"):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert out.dtype == mp.bfloat16
    top = [r for r in t.in_call_order() if r.depth == 0]
    assert [r.name for r in top] == ["scaled_dot_product_attention"]
    assert top[0].run_dtypes == (mp.bfloat16,) * 4
    softmax = [r for r in t if r.name == "softmax"]
    assert len(softmax) == 1 and softmax[0].run_dtypes == (mp.float32,) and softmax[0].policy is None
    assert mp.ops.policy("scaled_dot_product_attention", "cuda") is mp.ops.CastPolicy.LOWER_PRECISION_FP
    assert mp.ops.policy("scaled_dot_product_attention", "cpu") is mp.ops.CastPolicy.LOWER_PRECISION_FP
    with mp.autocast("cpu", enabled=False):
        assert F.scaled_dot_product_attention(q, k, v).dtype == mp.float32


def _qkv():
    return mp.ones(2, 3, 4), mp.ones(2, 5, 4), mp.ones(2, 5, 6)


SDPA_ERRORS = [
    (lambda q, k, v: F.scaled_dot_product_attention(q[0, 0], k[0, 0], v[0, 0]), RuntimeError, "at least 2 dims"),
    (lambda q, k, v: F.scaled_dot_product_attention(q, k.double(), v), TypeError,
     "same dtype, got float32, float64 and float32"),
    (lambda q, k, v: F.scaled_dot_product_attention(q.long(), k.long(), v.long()), TypeError, "floating point"),
    (lambda q, k, v: F.scaled_dot_product_attention(q, k[..., :3], v), RuntimeError, r"last dim \(4\) must equal"),
    (lambda q, k, v: F.scaled_dot_product_attention(q, k, v[:, :4]), RuntimeError, "same sequence length"),
    (lambda q, k, v: F.scaled_dot_product_attention(q, k[:1].expand(3, 5, 4), v), RuntimeError, "do not broadcast"),
    (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mp.ones(3, 4, dtype=mp.bool)), RuntimeError,
     r"attn_mask of shape \(3, 4\) does not broadcast"),
    (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mp.zeros(3, 5, dtype=mp.int64)), TypeError,
     "attn_mask must be bool, float32 or the query's dtype"),
    (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mp.ones(3, 5, dtype=mp.bool),
                                                    is_causal=True), RuntimeError, "not both"),
    (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, dropout_p=1.5), ValueError, "dropout_p"),
    (lambda q, k, v: F.scaled_dot_product_attention(q.reshape(2, 3, 1, 4), k.reshape(2, 5, 1, 4)[:, :3],
                                                    v.reshape(2, 5, 1, 6)[:, :2], enable_gqa=True), RuntimeError,
     "enable_gqa needs key and value with the same number of heads"),
]


@pytest.mark.parametrize("call,error,match", SDPA_ERRORS)
def test_sdpa_rejects_bad_input_by_name(call, error, match):
    with pytest.raises(error, match=match):
        call(*_qkv())


def test_native_mha_matches_torch():
    """torch's fused inference op, with torch's mask conventions (True: masked out) and mask types."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    e, h = 8, 2
    arrays = [rng.standard_normal(s) for s in ((2, 4, e), (3 * e, e), (3 * e,), (e, e), (e,))]
    x, wqkv, bqkv, wo, bo = arrays
    padding = np.array([[False, False, True, True], [False, False, False, False]])
    op = mp.ops.get("_native_multi_head_attention")
    for mask, mask_type, average in ((None, None, True), (padding, 1, True), (padding[:1].repeat(4, 0), 0, False)):
        t = [torch.tensor(a) for a in arrays]
        tm = None if mask is None else torch.tensor(mask)
        ref = torch._native_multi_head_attention(t[0], t[0], t[0], e, h, *t[1:], tm, True, average, mask_type)
        m = [mp.tensor(a) for a in arrays]
        out = op(m[0], m[0], m[0], e, h, *m[1:], None if mask is None else mp.tensor(mask), True, average, mask_type)
        for o, r in zip(out, ref):
            np.testing.assert_allclose(o.numpy(), r.numpy(), rtol=1e-10, atol=1e-12)
    assert op(*[mp.tensor(a) for a in (x, x, x)], e, h, *[mp.tensor(a) for a in arrays[1:]], need_weights=False)[1] \
        is None
    with pytest.raises(RuntimeError, match="mask_type must say what the mask is"):
        op(*[mp.tensor(a) for a in (x, x, x)], e, h, *[mp.tensor(a) for a in arrays[1:]], mp.tensor(padding))
    with pytest.raises(RuntimeError, match=r"qkv_weight of shape \(24, 8\)"):
        op(*[mp.tensor(a) for a in (x, x, x)], e, h, mp.ones(8, 8), *[mp.tensor(a) for a in arrays[2:]])


# ----------------------------------------------------------------- einsum
EINSUMS = [
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),
    ("...ij,...jk", [(5, 2, 3), (3, 4)]),
    ("ij,ij->ij", [(1, 3), (2, 1)]),
    ("Ba,aA", [(2, 3), (3, 4)]),
    ("a...b,b...->a...", [(2, 3, 4), (4, 3)]),
    ("iij,jk,k->ik", [(3, 3, 4), (4, 2), (2,)]),
    (" i j , j k -> ", [(2, 3), (3, 4)]),
    ("...->", [(2, 3)]),
    ("bij,bjk->bik", [(2, 0, 3), (2, 3, 4)]),
    ("i,i->", [(0,), (0,)]),
]


@pytest.mark.parametrize("equation,shapes", EINSUMS, ids=[f"{e}-{s}" for e, s in EINSUMS])
def test_einsum_matches_torch_values_and_gradients(equation, shapes):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    pairs = [_pair(rng, *s) for s in shapes]
    out = mp.einsum(equation, *[m for m, _ in pairs])
    ref = torch.einsum(equation, *[t for _, t in pairs])
    assert out.shape == tuple(ref.shape)
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-12, atol=1e-12)
    g = rng.standard_normal(out.shape)
    (out * mp.tensor(g)).sum().backward()
    (ref * torch.tensor(g)).sum().backward()
    _grads_match([m for m, _ in pairs], [t for _, t in pairs])


def test_einsum_under_autocast_runs_its_products_in_lower_precision():
    """torch builds einsum from bmm, which CPU autocast lowers; so does mixprec (from matmul)."""
    torch = pytest.importorskip("torch")
    a, b = mp.randn(2, 3), mp.randn(3, 4)
    with mp.autocast("cpu"):
        ours = mp.einsum("ij,jk->ik", a, b)
    with torch.autocast("cpu"):
        theirs = torch.einsum("ij,jk->ik", torch.randn(2, 3), torch.randn(3, 4))
    assert ours.dtype == mp.bfloat16 and theirs.dtype == torch.bfloat16
    assert mp.einsum("i,i->", mp.tensor([1, 2]), mp.tensor([3, 4])).item() == 11  # integers stay integers


EINSUM_ERRORS = [
    (lambda: mp.einsum("i,i", mp.ones(3), mp.ones(4)), RuntimeError, "label 'i' has size 4 in operand 1"),
    (lambda: mp.einsum("ij->k", mp.ones(2, 2)), RuntimeError, "output label 'k' appears in no operand"),
    (lambda: mp.einsum("ij", mp.ones(2)), RuntimeError, "operand 0 has 1 dims but its term 'ij' names 2"),
    (lambda: mp.einsum("ii", mp.ones(2, 3)), RuntimeError, "repeated in operand 0 with different sizes"),
    (lambda: mp.einsum("ij,jk", mp.ones(2, 3)), RuntimeError, "2 operand terms but 1 operands"),
    (lambda: mp.einsum("i->ii", mp.ones(2)), RuntimeError, "output label 'i' appears more than once"),
    (lambda: mp.einsum("i.j", mp.ones(2, 2)), RuntimeError, "invalid label '.'"),
    (lambda: mp.einsum("i1", mp.ones(2, 2)), RuntimeError, "invalid label '1'"),
    (lambda: mp.einsum("i...j...", mp.ones(2, 3)), RuntimeError, "more than one ellipsis"),
    (lambda: mp.einsum("ij->", mp.ones(2, 2), 3), TypeError, "operand 1 must be a Tensor"),
    (lambda: mp.einsum("i,i", mp.ones(2), mp.ones(2, dtype=mp.float64)), TypeError,
     "operands must have one dtype, got float32 and float64"),
    (lambda: mp.einsum(mp.ones(2), [0, 99]), RuntimeError, r"subscript 99 must be an int in \[0, 52\)"),
]


@pytest.mark.parametrize("call,error,match", EINSUM_ERRORS)
def test_einsum_rejects_bad_equations_by_name(call, error, match):
    with pytest.raises(error, match=match):
        call()


# ----------------------------------------------------------------- logsumexp, rms_norm, silu
@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
def test_logsumexp_matches_torch_including_infinities_and_empty():
    torch = pytest.importorskip("torch")
    rows = np.array([[1.0, 2.0, 3.0], [-np.inf, -np.inf, -np.inf], [np.inf, 0.0, 1.0], [1000.0, 1000.0, -5.0]])
    np.testing.assert_allclose(mp.logsumexp(mp.tensor(rows), 1).numpy(),
                               torch.logsumexp(torch.tensor(rows), 1).numpy(), rtol=1e-15)
    assert mp.logsumexp(mp.tensor([[1, 2], [3, 4]]), 1).dtype == mp.float32  # integers give float32, as torch's
    np.testing.assert_array_equal(mp.logsumexp(mp.zeros(2, 0), 1).numpy(), [-np.inf, -np.inf])
    assert mp.logsumexp(mp.zeros(0, 3), 1).shape == (0,)
    x = mp.tensor([[-np.inf, -np.inf], [1.0, 2.0]], requires_grad=True)
    tx = torch.tensor(x.numpy(), requires_grad=True)
    mp.logsumexp(x, 1).sum().backward()
    torch.logsumexp(tx, 1).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())   # NaN in the all -inf row, as torch
    with pytest.raises(IndexError, match="logsumexp: dim 2 is out of range"):
        mp.logsumexp(mp.ones(2, 3), 2)


@pytest.mark.parametrize("dtype", LOW)
def test_logsumexp_half_is_stable_and_rounded_once(dtype):
    x = mp.tensor([[60000.0, 60000.0], [-3.0, 2.0]], dtype=mp.float32).to(dtype)
    x32 = x.numpy().astype(np.float32)
    m = x32.max(1, keepdims=True)
    expected = (np.log(np.exp(x32 - m).sum(1)) + m[:, 0]).astype(dtype)
    np.testing.assert_array_equal(mp.logsumexp(x, 1).numpy(), expected)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_rms_norm_matches_torch(dtype):
    """Half inputs: float32 math, float32's epsilon by default and one rounding (bit-exact with torch's CPU);
    float64: its own epsilon."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    x, w = rng.standard_normal((4, 3, 8)) * 1e-3, rng.standard_normal(8)
    ours = F.rms_norm(mp.tensor(x, dtype=getattr(mp, dtype)), (8,), mp.tensor(w, dtype=getattr(mp, dtype)))
    t = getattr(torch, dtype)
    theirs = torch.nn.functional.rms_norm(torch.tensor(x).to(t), (8,), torch.tensor(w).to(t))
    if dtype in ("float32", "float64"):  # the same formula; the last bit depends on the order of the sum
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=4 * np.finfo(ours.numpy().dtype).eps)
    else:
        np.testing.assert_array_equal(ours.numpy().astype(np.float64), theirs.double().numpy())
    bf = F.rms_norm(mp.ones(2, 4, dtype=mp.bfloat16), 4, mp.ones(4))   # a float32 weight keeps the input's dtype
    assert bf.dtype == mp.bfloat16
    with pytest.raises(RuntimeError, match=r"rms_norm: normalized_shape \(4,\) does not match"):
        F.rms_norm(mp.ones(4, 8), (4,))
    with pytest.raises(TypeError, match="rms_norm: expected a floating input, got int64"):
        F.rms_norm(mp.tensor([1, 2]), (2,))
    with pytest.raises(RuntimeError, match=r"rms_norm: weight of shape \(3,\)"):
        F.rms_norm(mp.ones(2, 4), (4,), mp.ones(3))
    assert F.rms_norm(mp.zeros(0, 8), (8,)).shape == (0, 8)


def test_rms_norm_gradients_match_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(9)
    (x, tx), (w, tw) = _pair(rng, 3, 2, 5), _pair(rng, 2, 5)
    F.rms_norm(x, (2, 5), w, eps=1e-3).pow(2).sum().backward()
    torch.nn.functional.rms_norm(tx, (2, 5), tw, eps=1e-3).pow(2).sum().backward()
    _grads_match((x, w), (tx, tw))


def test_silu_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(10)
    x, tx = _pair(rng, 50)
    F.silu(x * 4).sum().backward()
    torch.nn.functional.silu(tx * 4).sum().backward()
    np.testing.assert_allclose(F.silu(x).detach().numpy(), torch.nn.functional.silu(tx).detach().numpy(), rtol=1e-14)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
