"""Semantics of the nn ops beyond the case table (tests/op_cases/): pools, embedding, dropout, batch_norm,
convolutions, norms and losses — edge cases, half-precision details, errors, and torch where installed."""
import math
import warnings

import numpy as np
import pytest

import mixprec as mp
from mixprec.autograd import gradcheck
from mixprec.backend import device_checks
from op_cases import EPS
from op_cases.refs import norm_ref, ref_pool

F = mp.nn.functional
LOW_DTYPES = [pytest.param(mp.float16, id="float16"), pytest.param(mp.bfloat16, id="bfloat16")]
rng = np.random.default_rng(1)


def t64(a, grad=False):
    return mp.tensor(np.asarray(a, dtype=np.float64), dtype=mp.float64, requires_grad=grad)


MAX_CASES = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
             dict(kernel_size=3, stride=2, padding=1, ceil_mode=True), dict(kernel_size=(3, 2), stride=(1, 2)),
             dict(kernel_size=2, stride=1, dilation=2), dict(kernel_size=2, ceil_mode=True)]


@pytest.mark.parametrize("cfg", MAX_CASES)
def test_max_pool2d_matches_loop_reference_and_gradcheck(cfg):
    x = rng.permutation(2 * 2 * 7 * 5).reshape(2, 2, 7, 5) / 10.0  # distinct values: no ties
    full = dict(stride=None, padding=0, dilation=1, ceil_mode=False) | cfg
    expected = ref_pool(x, full["kernel_size"], full["stride"] or full["kernel_size"], full["padding"],
                        full["dilation"], full["ceil_mode"], "max")
    np.testing.assert_array_equal(F.max_pool2d(t64(x), **cfg).numpy(), expected)
    xs = t64(x[:1, :1], grad=True)
    assert gradcheck(lambda a: F.max_pool2d(a, **cfg), (xs,))


AVG_CASES = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
             dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
             dict(kernel_size=(2, 3), stride=1, padding=(1, 1), count_include_pad=False),
             dict(kernel_size=2, divisor_override=3), dict(kernel_size=3, stride=2, ceil_mode=True)]


@pytest.mark.parametrize("cfg", AVG_CASES)
def test_avg_pool2d_matches_loop_reference_and_gradcheck(cfg):
    x = rng.standard_normal((2, 2, 7, 6))
    full = dict(stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None) | cfg
    expected = ref_pool(x, full["kernel_size"], full["stride"] or full["kernel_size"], full["padding"], 1,
                        full["ceil_mode"], "avg", full["count_include_pad"], full["divisor_override"])
    np.testing.assert_allclose(F.avg_pool2d(t64(x), **cfg).numpy(), expected, rtol=1e-13, atol=1e-15)
    assert gradcheck(lambda a: F.avg_pool2d(a, **cfg), (t64(x[:1, :1, :5, :5], grad=True),))


def test_pool_second_derivatives():
    x = t64(rng.standard_normal((1, 1, 4, 4)), grad=True)

    def grad_of(pool):
        return lambda a: mp.autograd.grad((pool(a) ** 2).sum(), a, create_graph=True)[0]
    assert gradcheck(grad_of(lambda a: F.avg_pool2d(a, 3, 1, 1)), (x,))
    assert gradcheck(grad_of(lambda a: F.max_pool2d(a, 2, 1)), (x,))


def test_pools_take_unbatched_input_and_keep_half_dtypes():
    x = rng.standard_normal((3, 6, 6)).astype(np.float32)
    for dt in (mp.float16, mp.bfloat16):
        xt = mp.tensor(x).to(dt)
        out = F.max_pool2d(xt, 2)
        assert out.dtype == dt and out.shape == (3, 3, 3)
        # max is exact: it picks one of the rounded inputs
        np.testing.assert_array_equal(out.numpy().astype(np.float32),
                                      ref_pool(xt.numpy().astype(np.float64)[None], 2, 2, 0, 1, False, "max")[0])
        avg = F.avg_pool2d(xt, 2)
        ref = ref_pool(xt.numpy().astype(np.float64)[None], 2, 2, 0, 1, False, "avg")[0]
        tol = 2 ** -8 if dt == mp.float16 else 2 ** -7
        np.testing.assert_allclose(avg.numpy().astype(np.float64), ref, rtol=tol, atol=tol)


def test_max_pool_propagates_nan():
    x = mp.zeros(1, 1, 2, 2)
    x[0, 0, 1, 1] = float("nan")
    assert np.isnan(F.max_pool2d(x, 2).item())


@pytest.mark.parametrize("call, message", [
    (lambda: F.max_pool2d(mp.zeros(4, 4), 2), "3-D"),
    (lambda: F.max_pool2d(mp.zeros(1, 1, 4, 4), 2, padding=2), "half the kernel"),
    (lambda: F.avg_pool2d(mp.zeros(1, 1, 2, 2), 3), "too small"),
    (lambda: F.max_pool2d(mp.zeros(1, 1, 4, 4), 0), "kernel_size"),
    (lambda: F.avg_pool2d(mp.zeros(1, 1, 4, 4), 2, divisor_override=0), "divisor_override"),
    (lambda: F.max_pool2d(mp.zeros(1, 1, 4, 4, dtype=mp.int64), 2), "floating"),
])
def test_pool_errors(call, message):
    with pytest.raises((ValueError, TypeError), match=message):
        call()


def test_pools_match_torch_when_available():
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((2, 3, 9, 8))
    for cfg in MAX_CASES:
        xt = torch.tensor(x, requires_grad=True)
        yt = torch.nn.functional.max_pool2d(xt, **cfg)
        g = rng.standard_normal(tuple(yt.shape))
        yt.backward(torch.tensor(g))
        xm = t64(x, grad=True)
        F.max_pool2d(xm, **cfg).backward(t64(g))
        np.testing.assert_array_equal(xm.grad.numpy(), xt.grad.numpy())


# ---------------------------------------------------------------- embedding
def test_embedding_forward_backward_and_padding_idx():
    w = t64(rng.standard_normal((6, 3)), grad=True)
    idx = mp.tensor([[0, 2, 2], [5, 1, 2]])
    out = F.embedding(idx, w)
    np.testing.assert_array_equal(out.numpy(), w.numpy()[idx.numpy()])
    assert gradcheck(lambda a: F.embedding(idx, a), (w,))
    out = F.embedding(idx, w, padding_idx=2)
    out.sum().backward()
    counts = np.bincount(idx.numpy().ravel(), minlength=6).astype(float)
    counts[2] = 0  # the padding row gets no gradient
    np.testing.assert_array_equal(w.grad.numpy(), np.repeat(counts[:, None], 3, axis=1))


@pytest.mark.parametrize("call, exc, message", [
    (lambda w: F.embedding(mp.tensor([0, 6]), w), IndexError, "out of range"),
    (lambda w: F.embedding(mp.tensor([-1]), w), IndexError, "out of range"),
    (lambda w: F.embedding(mp.tensor([0.0]), w), TypeError, "integer"),
    (lambda w: F.embedding(mp.tensor([0]), w, padding_idx=7), ValueError, "padding_idx"),
    (lambda w: F.embedding(mp.tensor([0]), w.reshape(-1)), ValueError, "2-D"),
])
def test_embedding_errors(call, exc, message):
    with pytest.raises(exc, match=message):
        call(mp.randn(6, 3))


# ---------------------------------------------------------------- dropout
def test_dropout_scales_kept_elements_and_drops_about_p():
    mp.manual_seed(3)
    x = mp.ones(200, 100, requires_grad=True)
    y = F.dropout(x, p=0.3)
    vals = np.unique(y.detach().numpy())
    np.testing.assert_allclose(vals, [0.0, 1 / 0.7], rtol=1e-6)
    frac = float((y.detach().numpy() == 0).mean())
    assert abs(frac - 0.3) < 0.02
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), y.detach().numpy())  # d(x*mask)/dx = mask


def test_dropout_identity_cases_and_reproducibility():
    x = mp.randn(4, 5)
    assert F.dropout(x, 0.5, training=False) is x
    assert F.dropout(x, 0.0) is x
    assert (F.dropout(x, 1.0).numpy() == 0).all()
    mp.manual_seed(7)
    a = F.dropout(x, 0.5).numpy()
    mp.manual_seed(7)
    np.testing.assert_array_equal(F.dropout(x, 0.5).numpy(), a)
    h = F.dropout(x.half(), 0.5)
    assert h.dtype == mp.float16
    with pytest.raises(ValueError, match="probability"):
        F.dropout(x, 1.5)
    with pytest.raises(TypeError, match="floating"):
        F.dropout(mp.tensor([1, 2]), 0.5)


def test_dropout_gradcheck_with_fixed_mask():
    x = t64(rng.standard_normal((3, 4)), grad=True)

    def fn(a):
        mp.manual_seed(11)  # the same mask on every evaluation
        return F.dropout(a, 0.4)
    assert gradcheck(fn, (x,))


# ---------------------------------------------------------------- batch_norm
def test_batch_norm_training_matches_reference_and_updates_running_stats():
    x = rng.standard_normal((5, 3, 4, 2)) * 3 + 1
    w, b = rng.standard_normal(3), rng.standard_normal(3)
    rm, rv = mp.zeros(3, dtype=mp.float64), mp.ones(3, dtype=mp.float64)
    out = F.batch_norm(t64(x), rm, rv, t64(w), t64(b), training=True, momentum=0.2, eps=1e-5)
    mean = x.mean(axis=(0, 2, 3))
    var = x.var(axis=(0, 2, 3))
    ref = (x - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + 1e-5) * w[None, :, None, None] \
        + b[None, :, None, None]
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-12, atol=1e-12)
    n = 5 * 4 * 2
    np.testing.assert_allclose(rm.numpy(), 0.2 * mean, rtol=1e-12)
    np.testing.assert_allclose(rv.numpy(), 0.8 + 0.2 * var * n / (n - 1), rtol=1e-12)
    ev = F.batch_norm(t64(x), rm, rv, t64(w), t64(b), training=False, eps=1e-5)
    ref_ev = (x - rm.numpy()[None, :, None, None]) / np.sqrt(rv.numpy()[None, :, None, None] + 1e-5) \
        * w[None, :, None, None] + b[None, :, None, None]
    np.testing.assert_allclose(ev.numpy(), ref_ev, rtol=1e-12, atol=1e-12)


def test_batch_norm_gradcheck_training_and_eval():
    x = t64(rng.standard_normal((4, 2, 3)), grad=True)
    w, b = t64(rng.standard_normal(2), grad=True), t64(rng.standard_normal(2), grad=True)
    assert gradcheck(lambda a, ww, bb: F.batch_norm(a, None, None, ww, bb, training=True), (x, w, b))
    rm, rv = t64(rng.standard_normal(2)), t64(rng.random(2) + 0.5)
    assert gradcheck(lambda a, ww, bb: F.batch_norm(a, rm, rv, ww, bb, training=False), (x, w, b))


def test_batch_norm_half_input_keeps_dtype_and_accuracy():
    x = rng.standard_normal((8, 4)).astype(np.float32)
    for dt, tol in ((mp.float16, 2e-3), (mp.bfloat16, 1.6e-2)):
        xt = mp.tensor(x).to(dt)
        out = F.batch_norm(xt, mp.zeros(4), mp.ones(4), mp.ones(4), mp.zeros(4), training=True)
        assert out.dtype == dt
        xr = xt.numpy().astype(np.float64)
        ref = (xr - xr.mean(0)) / np.sqrt(xr.var(0) + 1e-5)
        np.testing.assert_allclose(out.numpy().astype(np.float64), ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_empty_1d_input_matches_torch(training):
    """An empty 1-D input comes back empty (with a gradient) whatever shape the running stats have."""
    torch = pytest.importorskip("torch")
    for stats in (0, 1):
        x, tx = mp.zeros(0, requires_grad=True), torch.zeros(0, requires_grad=True)
        out = F.batch_norm(x, mp.zeros(stats), mp.ones(stats), training=training)
        want = torch.nn.functional.batch_norm(tx, torch.zeros(stats), torch.ones(stats), training=training)
        assert out.shape == tuple(want.shape) and out.dtype == mp.float32
        out.sum().backward()
        want.sum().backward()
        assert x.grad.shape == tuple(tx.grad.shape)


@pytest.mark.parametrize("call, message", [
    (lambda: F.batch_norm(mp.randn(1, 3), None, None, training=True), "more than 1 value"),
    (lambda: F.batch_norm(mp.zeros(0), None, None, mp.ones(0), training=True), "at least 2 dims"),
    (lambda: F.batch_norm(mp.randn(4), None, None, training=True), "at least 2 dims"),
    (lambda: F.batch_norm(mp.randn(4, 3), mp.zeros(2), mp.ones(3)), "running_mean has shape"),
    (lambda: F.batch_norm(mp.randn(4, 3), None, None, training=False), "running_mean and running_var"),
])
def test_batch_norm_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize("name", ["dropout", "batch_norm", "embedding", "max_pool2d", "avg_pool2d"])
def test_layer_ops_follow_the_reference_tables(name):
    # none of these is on an autocast list for either device (only the 3-D pools are)
    assert mp.ops.policy(name, "cuda") is None and mp.ops.policy(name, "cpu") is None
    assert name in dir(F)


# ----------------------------------------------------------------- half-precision details
@pytest.mark.parametrize("dtype", LOW_DTYPES)
def test_layer_norm_half_statistics_are_float32(dtype):
    """A large mean would swamp a half-precision variance; float32 statistics keep it."""
    x = np.array([[1000.0, 1001.0, 1002.0, 1003.0]])
    out = mp.layer_norm(mp.tensor(x, dtype=dtype), 4).numpy().astype(np.float64)
    xr = mp.tensor(x, dtype=dtype).numpy().astype(np.float64)
    np.testing.assert_allclose(out, norm_ref(xr, (1,)), rtol=4 * EPS[dtype], atol=4 * EPS[dtype])


@pytest.mark.parametrize("dtype", LOW_DTYPES)
def test_conv_half_gradients_have_half_dtype(dtype):
    x = mp.randn(1, 2, 4, 4, dtype=dtype, requires_grad=True)
    w = mp.randn(3, 2, 3, 3, dtype=dtype, requires_grad=True)
    b = mp.randn(3, dtype=dtype, requires_grad=True)
    mp.conv2d(x, w, b, padding=1).sum().backward()
    assert (x.grad.dtype, w.grad.dtype, b.grad.dtype) == (dtype, dtype, dtype)


# ----------------------------------------------------------------- semantics
def test_nll_loss_mean_with_every_target_ignored_is_nan():
    x = mp.randn(2, 3)
    assert math.isnan(F.nll_loss(x, mp.tensor([-100, -100])).item())
    assert F.cross_entropy(x, mp.tensor([-100, -100]), reduction="sum").item() == 0.0


@pytest.mark.parametrize("dtype", [mp.float32, mp.float64] + LOW_DTYPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("shape", [(5, 7), (7,), (3, 4, 2)])
def test_nll_loss_without_weight_matches_weight_of_ones_bit_for_bit(dtype, reduction, shape):
    # without a weight, nll_loss skips multiplying by each sample's weight of 1: the same values as the weighted
    # code with ones, forward and backward, also with ignored targets, NaN and inf in the input and the gradient
    r = np.random.default_rng(3)
    cdim = 0 if len(shape) == 1 else 1
    n = shape[cdim]
    x = r.standard_normal(shape).astype(np.float32)
    x.flat[0], x.flat[3] = np.nan, np.inf
    for ignored in ([], [0], "all"):
        t = r.integers(0, n, shape[:cdim] + shape[cdim + 1:])
        t.flat[ignored if ignored != "all" else slice(None)] = -100
        g = r.standard_normal(t.shape).astype(np.float32) if reduction == "none" else np.array(np.inf, np.float32)
        results = []
        for weight in (None, mp.ones(n, dtype=dtype)):
            xt = mp.tensor(x, dtype=dtype, requires_grad=True)
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                loss = F.nll_loss(xt, mp.tensor(t), weight=weight, reduction=reduction)
                loss.backward(mp.tensor(g, dtype=dtype))
            results.append((loss._array.astype(np.float64), xt.grad._array.astype(np.float64)))
        (a, ga), (b, gb) = results
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(ga, gb)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_nll_loss_target_range_check_agrees_with_two_comparisons(dtype):
    from mixprec.ops.losses import _out_of_range
    info = np.iinfo(dtype)
    t = np.array([info.min, -101, -100, -1, 0, 1, 2, 3, 126, 127, 128, 255, 256, info.max], dtype)
    for n in (0, 1, 3, 128, 255, 256, int(info.max), int(info.max) + 1, int(info.max) + 2):
        np.testing.assert_array_equal(_out_of_range(t, n), (t < 0) | (t >= n))


def test_cross_entropy_custom_ignore_index_and_alias():
    x = mp.randn(3, 4, dtype=mp.float64)
    t = mp.tensor([1, 7, 2])
    a = F.cross_entropy(x, t, ignore_index=7)
    b = mp.cross_entropy_loss(x, mp.tensor([1, -100, 2]))
    np.testing.assert_allclose(a.item(), b.item(), rtol=1e-12)
    assert mp.ops.get("cross_entropy_loss") is mp.ops.get("cross_entropy")


def test_deprecated_size_average_and_reduce_map_to_reduction():
    x, y = mp.randn(3, 4), mp.randn(3, 4)
    with pytest.warns(DeprecationWarning):
        s = F.mse_loss(x, y, size_average=False)
    np.testing.assert_allclose(s.item(), F.mse_loss(x, y, reduction="sum").item(), rtol=1e-6)
    with pytest.warns(DeprecationWarning):
        assert F.l1_loss(x, y, reduce=False).shape == (3, 4)


def test_kl_div_mean_warns_and_zero_target_contributes_zero():
    x = mp.tensor([[-1.0, -2.0]])
    with pytest.warns(UserWarning, match="batchmean"):
        F.kl_div(x, mp.tensor([[1.0, 0.0]]))
    out = F.kl_div(x, mp.tensor([[1.0, 0.0]]), reduction="none")
    assert out.tolist() == [[1.0, 0.0]]


def test_binary_cross_entropy_clamps_log_at_minus_100():
    out = F.binary_cross_entropy(mp.tensor([0.0, 1.0]), mp.tensor([1.0, 0.0]), reduction="none")
    assert out.tolist() == [100.0, 100.0]


def test_erfinv_edges():
    out = mp.erfinv(mp.tensor([1.0, -1.0, 0.0, 1.5], dtype=mp.float64)).numpy()
    assert out[0] == math.inf and out[1] == -math.inf and out[2] == 0.0 and math.isnan(out[3])


def test_integer_inputs_to_unary_math_give_float32():
    assert mp.log2(mp.tensor([1, 2, 4])).dtype == mp.float32
    assert mp.log2(mp.tensor([1, 2, 4])).tolist() == [0.0, 1.0, 2.0]


def test_norm_gradient_at_zero_vector_is_zero():
    x = mp.zeros(3, dtype=mp.float64, requires_grad=True)
    mp.norm(x).backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0]


def test_norm_inf_splits_gradient_between_ties():
    x = mp.tensor([2.0, -2.0, 1.0], dtype=mp.float64, requires_grad=True)
    mp.norm(x, math.inf).backward()
    assert x.grad.tolist() == [0.5, -0.5, 0.0]


def test_norm_dtype_argument_casts_first():
    x = mp.tensor([3.0, 4.0], dtype=mp.float16, requires_grad=True)
    out = mp.norm(x, dtype=mp.float64)
    assert out.dtype == mp.float64 and out.item() == 5.0
    out.backward()
    assert x.grad.dtype == mp.float16


# ----------------------------------------------------------------- bad input
BAD = [
    (lambda: mp.conv2d(mp.randn(1, 3, 4, 4), mp.randn(2, 2, 3, 3)), RuntimeError, "3 channels"),
    (lambda: mp.conv2d(mp.randn(1, 2, 4, 4), mp.randn(2, 2, 5, 5)), RuntimeError, "smaller than"),
    (lambda: mp.conv2d(mp.randn(1, 2, 4, 4), mp.randn(2, 2, 3, 3, dtype=mp.float16)), TypeError, "should be the same"),
    (lambda: mp.conv2d(mp.randn(2, 4, 4), mp.randn(2, 2, 3)), RuntimeError, "4-D weight"),
    (lambda: mp.conv2d(mp.randn(1, 2, 4, 4), mp.randn(2, 2, 3, 3), stride=2, padding="same"), ValueError, "strided"),
    (lambda: mp.conv2d(mp.randn(1, 2, 4, 4), mp.randn(3, 1, 3, 3), groups=2), RuntimeError, "divisible"),
    (lambda: mp.conv1d(mp.randn(1, 2, 5), mp.randn(2, 2, 3), padding="full"), ValueError, "padding"),
    (lambda: mp.layer_norm(mp.randn(2, 3), (4,)), RuntimeError, "normalized_shape"),
    (lambda: mp.layer_norm(mp.randn(2, 3), 3, mp.randn(4)), RuntimeError, "weight of shape"),
    (lambda: mp.group_norm(mp.randn(2, 6, 3), 4), RuntimeError, "num_groups"),
    (lambda: F.cross_entropy(mp.randn(3, 4), mp.tensor([0, 4, 1])), IndexError, "out of bounds"),
    (lambda: F.cross_entropy(mp.randn(3, 4), mp.tensor([0, 1])), RuntimeError, "target of shape"),
    (lambda: F.cross_entropy(mp.randn(3, 4), mp.tensor([0, 1, 2]), reduction="avg"), ValueError, "reduction"),
    (lambda: F.cross_entropy(mp.randn(3, 4), mp.tensor([0, 1, 2]), label_smoothing=1.5), ValueError, "label_smoothing"),
    (lambda: F.cross_entropy(mp.randn(3, 4), mp.tensor([0, 1, 2]), mp.ones(3)), RuntimeError, "one value per class"),
    (lambda: F.nll_loss(mp.randn(3, 4), mp.randn(3)), TypeError, "integer"),
    (lambda: F.binary_cross_entropy(mp.tensor([0.5, 1.2]), mp.tensor([0.0, 1.0])), ValueError, "between 0 and 1"),
    (lambda: F.binary_cross_entropy(mp.tensor([0.5, 0.2]), mp.tensor([1.0])), ValueError, "same as input size"),
    (lambda: F.mse_loss(mp.randn(3), mp.randn(3), weight=mp.ones(2)), ValueError, "weight"),
    (lambda: F.smooth_l1_loss(mp.randn(3), mp.randn(3), beta=-1.0), ValueError, "beta"),
    (lambda: mp.norm(mp.randn(3), "nuc"), RuntimeError, "exactly two dims"),
    (lambda: mp.norm(mp.tensor([1, 2])), TypeError, "floating"),
    (lambda: mp.tensordot(mp.randn(2, 3), mp.randn(4, 2), 1), RuntimeError, "does not match"),
    (lambda: mp.tensordot(mp.randn(2, 3), mp.randn(3, 2, dtype=mp.float16), 1), TypeError, "same dtype"),
]


@pytest.mark.parametrize("call,exc,match", BAD)
def test_bad_input_raises_clear_error(call, exc, match):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(exc, match=match):
            call()


def test_mismatched_target_size_warns():
    with pytest.warns(UserWarning, match="different to the input size"):
        F.mse_loss(mp.randn(3, 1), mp.randn(3))


# ----------------------------------------------------------------- against torch, where installed
def test_matches_torch_where_semantics_are_subtle():
    torch = pytest.importorskip("torch")
    tF = torch.nn.functional
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 5))
    t = np.array([0, 4, -100, 2, 1, 4])
    w = rng.uniform(0.2, 2.0, 5)
    for kw in (dict(label_smoothing=0.25), dict(reduction="sum", label_smoothing=0.1), dict(reduction="none")):
        ours = F.cross_entropy(mp.tensor(x, dtype=mp.float64), mp.tensor(t), mp.tensor(w, dtype=mp.float64), **kw)
        ref = tF.cross_entropy(torch.tensor(x), torch.tensor(t), torch.tensor(w), **kw)
        np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=1e-12)
    img = rng.standard_normal((2, 4, 5, 6))
    ker = rng.standard_normal((6, 2, 2, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's note about even kernels with padding='same'
        ref = tF.conv2d(torch.tensor(img), torch.tensor(ker), padding="same", dilation=(1, 2), groups=2)
    ours = F.conv2d(mp.tensor(img, dtype=mp.float64), mp.tensor(ker, dtype=mp.float64), padding="same",
                    dilation=(1, 2), groups=2)
    np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=1e-10, atol=1e-12)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    ours = F.huber_loss(mp.tensor(a, dtype=mp.float64), mp.tensor(b, dtype=mp.float64), delta=0.4,
                        weight=mp.tensor(np.abs(b), dtype=mp.float64))
    ref = tF.huber_loss(torch.tensor(a), torch.tensor(b), delta=0.4, weight=torch.tensor(np.abs(b)))
    np.testing.assert_allclose(ours.item(), ref.item(), rtol=1e-12)


# ----------------------------------------------------------------- empty batches, as torch
def test_embedding_of_no_indices_and_of_a_zero_width_table():
    torch = pytest.importorskip("torch")
    for idx, table in ((np.zeros((0,), np.int64), (5, 3)), (np.zeros((2, 0), np.int64), (5, 3)),
                       (np.array([1, 4]), (5, 0))):
        w, tw = mp.zeros(*table, requires_grad=True), torch.zeros(*table, requires_grad=True)
        out, want = F.embedding(mp.tensor(idx), w), torch.nn.functional.embedding(torch.tensor(idx), tw)
        assert out.shape == tuple(want.shape)
        out.sum().backward()
        assert w.grad.shape == table


def test_group_norm_of_an_empty_batch():
    torch = pytest.importorskip("torch")
    x, tx = mp.zeros(0, 4, 3, requires_grad=True), torch.zeros(0, 4, 3, requires_grad=True)
    w, tw = mp.ones(4, requires_grad=True), torch.ones(4, requires_grad=True)
    out, want = F.group_norm(x, 2, w), torch.nn.functional.group_norm(tx, 2, tw)
    assert out.shape == tuple(want.shape) == (0, 4, 3)
    out.sum().backward()
    want.sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), tw.grad.numpy())


# ----------------------------------------------------------------- validation without a host read
class _NoHostRead(np.ndarray):
    """An array that fails if its value is read on the host (what costs a GPU->host wait on CUDA)."""

    def _read(self, *args):
        raise AssertionError("the op read an array's value on the host")

    __bool__ = __int__ = __index__ = __float__ = item = _read


def _no_read(a):
    return mp.Tensor._wrap(np.asarray(a).view(_NoHostRead))


def test_loss_and_embedding_validation_reads_nothing_on_the_host(monkeypatch):
    # on a GPU, device_checks.check hands the test to the device; stand in for it with a recorder
    checked = []
    monkeypatch.setattr(device_checks, "check", lambda bad, error, message, culprit=None: checked.append(message))
    logits = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    x = _no_read(logits).requires_grad_()
    F.cross_entropy(x, _no_read([0, 1, 4, 2])).backward()
    F.nll_loss(_no_read(logits), _no_read([0, -100, 4, 2]))
    w = _no_read(np.ones((10, 3), np.float32)).requires_grad_()
    F.embedding(_no_read([1, 2, 9]), w).sum().backward()
    F.binary_cross_entropy(_no_read([0.2, 0.9]), _no_read([0.0, 1.0]))
    assert any("nll_loss: a target is out of bounds" in m for m in checked)
    assert any("embedding: index out of range" in m for m in checked)
    assert any("binary_cross_entropy" in m for m in checked)


def test_cpu_checks_raise_at_once_naming_the_culprit():
    with pytest.raises(IndexError, match=r"out of bounds for 4 classes.*got target 4"):
        F.nll_loss(mp.randn(3, 4), mp.tensor([0, 4, 1]))
    with pytest.raises(IndexError, match=r"out of range for a table of 5 rows.*\[-1, 2\]"):
        F.embedding(mp.tensor([-1, 2]), mp.randn(5, 2))
    F.nll_loss(mp.randn(3, 4), mp.tensor([0, -100, 1]))  # ignore_index is not out of bounds


def test_embedding_max_norm_and_scale_grad_by_freq_match_torch(torch):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((6, 4))
    idx = np.array([[1, 3, 1], [5, 1, 0]])
    mw, tw = mp.tensor(w, requires_grad=True), torch.tensor(w, requires_grad=True)
    y = F.embedding(mp.tensor(idx), mw, max_norm=1.0, scale_grad_by_freq=True)
    ty = torch.nn.functional.embedding(torch.tensor(idx), tw, max_norm=1.0, scale_grad_by_freq=True)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(mw.detach().numpy(), tw.detach().numpy(), rtol=1e-12)  # the rows renormalised
    g = rng.standard_normal(y.shape)
    y.backward(mp.tensor(g))
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(mw.grad.numpy(), tw.grad.numpy(), rtol=1e-12)


def test_avg_pool_takes_a_one_element_padding_and_a_negative_divisor_as_torch(torch):
    x = np.random.default_rng(1).standard_normal((1, 2, 5, 5))
    for kw in (dict(kernel_size=3, padding=[1]), dict(kernel_size=(3,), stride=(2,), padding=(1,)),
               dict(kernel_size=2, divisor_override=-3)):
        np.testing.assert_allclose(F.avg_pool2d(mp.tensor(x), **kw).numpy(),
                                   torch.nn.functional.avg_pool2d(torch.tensor(x), **kw).numpy(), rtol=1e-12)


def test_pairwise_distance_takes_a_negative_p_as_torch(torch):
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    for p in (-1.0, -2.5, -np.inf):
        np.testing.assert_allclose(F.pairwise_distance(mp.tensor(a), mp.tensor(b), p=p).numpy(),
                                   torch.nn.functional.pairwise_distance(torch.tensor(a), torch.tensor(b), p=p).numpy(),
                                   rtol=1e-12)
