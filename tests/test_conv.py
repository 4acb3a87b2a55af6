"""A convolution is one op (_conv_nd) whose gradients are one op too (_conv_backward, as torch's
convolution_backward), computed as the convolutions _conv_transpose_nd and _conv_weight_grad and a sum.

Each computes float16/bfloat16 in float32 and rounds once, so its result is the exact (float64) convolution of
its half inputs rounded once, except where float32's rounding of the sum can move it across a rounding boundary
of the half dtype: there it is one of the two neighbours (one ulp at most).
"""
import numpy as np
import pytest

import mixprec as mp
import mixprec.nn.functional as F
from mixprec.ops.conv import Geometry

U32 = 2.0 ** -24  # float32's unit roundoff


def _windows(x, kernel, padding):
    """x (N, C, H, W) zero-padded: every (kh, kw) window, (N, C, H', W', kh, kw), in float64."""
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    return np.lib.stride_tricks.sliding_window_view(x, kernel, axis=(2, 3))


def _assert_rounded_once(got, exact, magnitude, additions, dtype):
    """got (half) == exact rounded once to dtype wherever float32 summation cannot change that rounding.

    Products of half values are exact in float32; each sum of them rounds, and a chain of ``additions`` float32
    additions over terms of total ``magnitude`` (sum of |term|) is off by at most additions * 2^-24 * magnitude.
    Where [exact - that, exact + that] holds a rounding boundary of dtype, got may be either side of it."""
    bound = (additions + 1) * U32 * magnitude
    lo, hi = (exact - bound).astype(dtype), (exact + bound).astype(dtype)
    decided = lo == hi
    assert got.dtype == dtype
    assert np.array_equal(got[decided], lo[decided])  # exactly rounded once
    assert np.all((lo <= got) & (got <= hi))          # elsewhere within what float32 rounding allows
    assert decided.mean() > 0.7                       # (the bound is not so loose that it decides nothing)


@pytest.mark.parametrize("dtype", [mp.float16, mp.bfloat16])
def test_half_conv2d_and_its_gradients_are_float64_rounded_once(dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 8, 6, 7)).astype(dtype)
    w = (rng.standard_normal((5, 8, 3, 3)) / 4).astype(dtype)
    b = rng.standard_normal(5).astype(dtype)
    g = rng.standard_normal((4, 5, 6, 7)).astype(dtype)
    xt, wt, bt = (mp.tensor(a, requires_grad=True) for a in (x, w, b))
    y = F.conv2d(xt, wt, bt, padding=1)
    gx, gw = mp.autograd.grad(y, (xt, wt), mp.tensor(g))

    win = _windows(x, (3, 3), 1)                                                # (N, C, H, W, 3, 3)
    x64, w64, b64, g64 = (a.astype(np.float64) for a in (x, w, b, g))
    exact = np.einsum("nchwij,ocij->nohw", win, w64) + b64[:, None, None]
    size = np.einsum("nchwij,ocij->nohw", abs(win), abs(w64)) + abs(b64)[:, None, None]
    _assert_rounded_once(y.numpy(), exact, size, 8 * 9, dtype)              # 72 products and the bias

    exact_gw = np.einsum("nchwij,nohw->ocij", win, g64)  # the correlation of the input with g
    size_gw = np.einsum("nchwij,nohw->ocij", abs(win), abs(g64))
    _assert_rounded_once(gw.numpy(), exact_gw, size_gw, 6 * 7 + 4, dtype)  # 42 per image, then 4 images

    # the input's gradient: every output's g spread back through the kernel (a transposed convolution)
    gwin = _windows(g, (3, 3), 1)                                               # (N, O, H, W, 3, 3)
    flipped = w64[:, :, ::-1, ::-1]
    exact_gx = np.einsum("nohwij,ocij->nchw", gwin, flipped)
    size_gx = np.einsum("nohwij,ocij->nchw", abs(gwin), abs(flipped))
    _assert_rounded_once(gx.numpy(), exact_gx, size_gx, 5 + 9, dtype)  # 5 channels per tap, then 9 taps


def _ops_run_by(fn):
    """fn()'s result, and the names of the ops it dispatched, in order (with which gradients, for _conv_backward)."""
    seen = []

    class Record:
        def enter(self, call):
            seen.append((call.op.name, call.args[-1]) if call.op.name == "_conv_backward" else call.op.name)

        def exit(self, call):
            pass
    with mp.observers.observe(Record()):
        result = fn()
    return result, seen


def test_conv2d_is_one_node_and_its_gradients_one_op():
    x = mp.randn(2, 3, 5, 5, requires_grad=True)
    w = mp.randn(4, 3, 3, 3, requires_grad=True)
    b = mp.randn(4, requires_grad=True)
    y = F.conv2d(x, w, b, stride=2, padding=1)
    assert y.grad_fn.name() == "_conv_ndBackward"
    assert [type(node).__name__ for node, _ in y.grad_fn.next_functions] == ["AccumulateGrad"] * 3
    grads, seen = _ops_run_by(lambda: mp.autograd.grad(y.sum(), (x, w, b)))
    assert ("_conv_backward", (True, True, True)) in seen
    assert "matmul" not in seen and "_im2col" not in seen and "sum" not in seen[1:]  # (seen[0]: y.sum())
    # the same gradients as the separate ops give: a transposed convolution, the weight's correlation, a sum
    g = mp.ones(*y.shape)
    geometry, groups = Geometry((3, 3), (2, 2), ((1, 1), (1, 1)), (1, 1), (3, 3)), 1
    separate = (mp.ops.get("_conv_transpose_nd")(g, w.detach(), None, tuple(x.shape), geometry, groups),
                mp.ops.get("_conv_weight_grad")(x.detach(), g, geometry, groups), g.sum(dim=(0, 2, 3)))
    for got, want in zip(grads, separate):
        assert got.numpy().tobytes() == want.numpy().tobytes()


@pytest.mark.parametrize("dtype", [mp.float16, mp.bfloat16, mp.float32])
@pytest.mark.parametrize("shape, kernel", [((64, 16, 8, 8), 3), ((64, 32, 4, 4), 3), ((5, 6, 7), 2),
                                           ((3, 4, 5, 6, 7), 2)])
def test_conv_bias_gradient_is_the_sum_of_g_bit_for_bit(dtype, shape, kernel):
    # _conv_backward sums the widened g for the bias: the bits of the sum op on g itself (float32 accumulation,
    # rounded once), also for a float16/bfloat16 g with large and tiny values
    rng = np.random.default_rng(0)
    nd = len(shape) - 2
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[nd]
    x = mp.tensor(rng.standard_normal(shape).astype(dtype))
    w = mp.tensor((rng.standard_normal((shape[1], shape[1]) + (kernel,) * nd) / 8).astype(dtype))
    b = mp.tensor(np.zeros(shape[1], dtype=dtype), requires_grad=True)
    y = conv(x, w, b, padding=kernel // 2 if kernel % 2 else 0)
    g = rng.standard_normal(y.shape) * np.exp(rng.uniform(-8, 8, y.shape))
    with np.errstate(over="ignore"):
        g = mp.tensor(g.astype(dtype))
    (gb,), seen = _ops_run_by(lambda: mp.autograd.grad(y, (b,), g))
    assert seen == [("_conv_backward", (False, False, True))]
    assert gb.dtype == dtype
    assert gb.numpy().tobytes() == g.sum(dim=(0, *range(2, g.ndim))).numpy().tobytes()


def test_conv2d_input_gradient_is_skipped_when_nothing_needs_it():
    x = mp.randn(2, 3, 5, 5)  # data: no gradient wanted
    w = mp.randn(4, 3, 3, 3, requires_grad=True)
    y = F.conv2d(x, w, padding=1)
    (gw,), seen = _ops_run_by(lambda: mp.autograd.grad(y.sum(), (w,)))
    assert ("_conv_backward", (False, True, False)) in seen
    assert gw.shape == w.shape


_DATA = mp.tensor(np.random.default_rng(2).standard_normal((2, 2, 4, 5)), dtype=mp.float64)
_WEIGHT = mp.tensor(np.random.default_rng(3).standard_normal((3, 2, 3, 3)), dtype=mp.float64)


@pytest.mark.parametrize("fn, shapes", [
    (lambda x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=1, dilation=(1, 2), groups=2),
     [(2, 4, 5, 6), (4, 2, 2, 3), (4,)]),
    (lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1, groups=2),
     [(1, 4, 3, 3), (4, 1, 3, 2), (2,)]),
    # fixed data, so _conv_backward gives the weight's and bias's gradients only; and the bias's alone
    (lambda w, b: F.conv2d(_DATA, w, b, padding=1), [(3, 2, 3, 3), (3,)]),
    (lambda b: F.conv2d(_DATA, _WEIGHT, b, padding=1).tanh(), [(3,)]),
], ids=["conv2d", "conv_transpose2d", "conv2d-fixed-input", "conv2d-bias-only"])
def test_convolution_second_derivatives(fn, shapes):
    rng = np.random.default_rng(1)
    inputs = [mp.tensor(rng.standard_normal(s), dtype=mp.float64, requires_grad=True) for s in shapes]
    assert mp.autograd.gradgradcheck(fn, inputs, check_fwd_over_rev=True)
