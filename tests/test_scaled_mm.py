"""mp._scaled_mm (mixprec/ops/scaled_mm.py) against torch._scaled_mm on the CPU.

Tolerance: a result rounded to bfloat16, float16 or float8 is bit-equal except where the two float32 sums
differ across a rounding boundary; the float32 sums themselves agree to float32 accumulation's error bound
(K ulps of the sum of the products' magnitudes), as torch's and NumPy's GEMMs add in different orders. With
integer-valued operands, power-of-two scales and small K every partial sum is exact, and then every result
dtype is bit-equal.
"""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp

torch = pytest.importorskip("torch")

F8 = {torch.float8_e4m3fn: mp.float8_e4m3fn, torch.float8_e5m2: mp.float8_e5m2}
OUT = {None: None, torch.float32: mp.float32, torch.bfloat16: mp.bfloat16, torch.float16: mp.float16,
       torch.float8_e4m3fn: mp.float8_e4m3fn, torch.float8_e5m2: mp.float8_e5m2}


def ours(t):
    """The same tensor in mixprec, bit for bit (float8 through its bytes)."""
    if t is None:
        return None
    if t.dtype in F8:
        return mp.from_numpy(t.contiguous().view(torch.uint8).numpy().copy().view(F8[t.dtype])).reshape(
            *t.shape) if t.is_contiguous() else ours(t.t().contiguous()).t()
    return mp.tensor(t.float().numpy()).to({torch.float32: mp.float32, torch.bfloat16: mp.bfloat16,
                                             torch.float16: mp.float16}[t.dtype])


def raw(x):
    a = x.numpy() if isinstance(x, mp.Tensor) else x.contiguous().view(
        {1: torch.uint8, 2: torch.int16, 4: torch.int32}[x.element_size()]).numpy()
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[a.itemsize])


def both(a, b, scale_a, scale_b, **kw):
    expected = torch._scaled_mm(a, b, scale_a, scale_b, **kw)
    mine = {k: (OUT[v] if k == "out_dtype" else ours(v)) for k, v in kw.items()}
    got = mp._scaled_mm(ours(a), ours(b), ours(scale_a), ours(scale_b), **mine)
    assert got.dtype.name == str(expected.dtype).removeprefix("torch.") and got.shape == tuple(expected.shape)
    return got, expected


def operands(m, k, n, a_dtype=torch.float8_e4m3fn, b_dtype=torch.float8_e4m3fn, seed=0, integers=False):
    g = torch.Generator().manual_seed(seed)
    draw = (lambda *s: torch.randint(-4, 5, s, generator=g).float()) if integers else \
        (lambda *s: torch.randn(*s, generator=g) * 3)
    return draw(m, k).to(a_dtype), draw(n, k).to(b_dtype).t()  # b column-major, as torch's CUDA kernel wants


@pytest.mark.parametrize("out_dtype", [None, torch.float32, torch.bfloat16, torch.float16, torch.float8_e5m2],
                         ids=str)
@pytest.mark.parametrize("scaling", ["tensorwise", "rowwise"])
def test_exact_sums_give_bit_equal_results(scaling, out_dtype):
    a, b = operands(6, 8, 5, integers=True)
    if scaling == "tensorwise":
        sa, sb = torch.tensor(0.5), torch.tensor([4.0])
    else:
        sa, sb = 2.0 ** torch.randint(-3, 3, (6, 1)).float(), 2.0 ** torch.randint(-3, 3, (1, 5)).float()
    bias = torch.arange(5).float() / 4 if out_dtype in (None, torch.float32) else None
    got, expected = both(a, b, sa, sb, bias=bias, out_dtype=out_dtype)
    np.testing.assert_array_equal(raw(got), raw(expected))


@pytest.mark.parametrize("out_dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float8_e4m3fn], ids=str)
@pytest.mark.parametrize("scaling", ["tensorwise", "rowwise"])
@pytest.mark.parametrize("bias", [False, True])
def test_random_operands_agree_within_float32_accumulation(scaling, out_dtype, bias):
    m, k, n = 16, 64, 32
    a, b = operands(m, k, n, seed=1)
    g = torch.Generator().manual_seed(2)
    if scaling == "tensorwise":
        sa, sb = torch.rand(1, generator=g) + 0.5, torch.rand((), generator=g) + 0.5
    else:
        sa, sb = torch.rand(m, 1, generator=g) + 0.5, torch.rand(1, n, generator=g) + 0.5
    bias_t = torch.randn(n, generator=g).to(out_dtype if out_dtype in (torch.bfloat16, torch.float16)
                                            else torch.float32) if bias else None
    got, expected = both(a, b, sa, sb, bias=bias_t, out_dtype=out_dtype)
    if out_dtype == torch.float32:
        terms = (a.float() * sa).abs() @ (b.float() * sb).abs()
        bound = k * 2.0 ** -24 * (terms.numpy() + (0 if bias_t is None else bias_t.abs().numpy()))
        assert np.all(np.abs(got.numpy() - expected.numpy()) <= bound)
    else:  # rounded once from float32 sums that agree that closely: mostly equal, else neighbours (same sign,
        # adjacent bit patterns)
        mine, theirs = raw(got).astype(np.int64), raw(expected).astype(np.int64)
        assert (mine == theirs).mean() > 0.9
        assert np.all(np.abs(mine - theirs) <= 1)


def test_scale_result_divides_a_float8_result_only_when_out_dtype_is_given():
    a, b = operands(4, 16, 4, integers=True)
    one, four = torch.tensor(1.0), torch.tensor(4.0)
    for out_dtype in (None, torch.float8_e4m3fn, torch.float8_e5m2, torch.bfloat16):
        got, expected = both(a, b, one, one, scale_result=four, out_dtype=out_dtype)
        np.testing.assert_array_equal(raw(got), raw(expected))


def test_operands_in_any_layout_and_mixed_formats_as_torch_cpu():
    a, b = operands(5, 12, 3, a_dtype=torch.float8_e5m2, integers=True)
    one = torch.tensor(1.0)
    for x, y in ((a, b), (a.t().contiguous().t(), b.contiguous()), (a[:, :10], b[:10])):
        got, expected = both(x, y, one, one, out_dtype=torch.float32)
        np.testing.assert_array_equal(raw(got), raw(expected))


def _errors_alike(torch_call, mp_call):
    with pytest.raises(Exception) as theirs:
        torch_call()
    with pytest.raises(type(theirs.value)):
        mp_call()


def test_errors_match_torchs_types():
    a, b = operands(4, 8, 4)
    A, B = ours(a), ours(b)
    one, One = torch.tensor(1.0), mp.tensor(1.0)
    cases = [
        (lambda: torch._scaled_mm(a, b[:4], one, one), lambda: mp._scaled_mm(A, B[:4], One, One)),  # shapes
        (lambda: torch._scaled_mm(a[None], b, one, one), lambda: mp._scaled_mm(A[None], B, One, One)),  # 3-d
        (lambda: torch._scaled_mm(a.float(), b, one, one), lambda: mp._scaled_mm(A.float(), B, One, One)),
        (lambda: torch._scaled_mm(a, b, one.double(), one), lambda: mp._scaled_mm(A, B, One.double(), One)),
        (lambda: torch._scaled_mm(a, b, torch.ones(4, 1), one), lambda: mp._scaled_mm(A, B, mp.ones(4, 1), One)),
        (lambda: torch._scaled_mm(a, b, torch.ones(4), torch.ones(4)),
         lambda: mp._scaled_mm(A, B, mp.ones(4), mp.ones(4))),
        (lambda: torch._scaled_mm(a, b, torch.ones(4, 2)[:, :1], torch.ones(1, 4)),
         lambda: mp._scaled_mm(A, B, mp.ones(4, 2)[:, :1], mp.ones(1, 4))),  # a non-contiguous rowwise scale
        (lambda: torch._scaled_mm(a, b, one, one, bias=torch.ones(3)),
         lambda: mp._scaled_mm(A, B, One, One, bias=mp.ones(3))),
        (lambda: torch._scaled_mm(a, b, one, one, scale_result=torch.ones(2), out_dtype=torch.float8_e4m3fn),
         lambda: mp._scaled_mm(A, B, One, One, scale_result=mp.ones(2), out_dtype=mp.float8_e4m3fn)),
    ]
    for torch_call, mp_call in cases:
        _errors_alike(torch_call, mp_call)
    with pytest.raises(ValueError, match="_scaled_mm: invalid scaling configuration"):
        mp._scaled_mm(A, B, mp.ones(4), mp.ones(4))


def test_no_gradient_as_torch():
    x = mp.ones(2, requires_grad=True).to(mp.float8_e4m3fn)
    out = mp._scaled_mm(x.reshape(2, 1), x.reshape(1, 2), mp.tensor(1.0), mp.tensor(1.0), out_dtype=mp.float32)
    assert out.requires_grad
    with pytest.raises(RuntimeError, match="derivative for _scaled_mm is not implemented"):
        out.sum().backward()
