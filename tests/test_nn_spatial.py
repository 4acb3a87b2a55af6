"""Convolutions, pools, pads, grid_sample, prelu and bilinear beyond the case table: torch (CPU, float64) as the
oracle for values and gradients, autocast dtypes, empty inputs, errors, randomness, and the nn modules."""
import itertools
import warnings

import numpy as np
import pytest

import mixprec as mp

nn = mp.nn
F = nn.functional
rng = np.random.default_rng(12)
torch = pytest.importorskip("torch")
tF = torch.nn.functional


def _mp(a):
    if isinstance(a, np.ndarray) and a.dtype.kind == "f":
        return mp.tensor(a, dtype=mp.float64, requires_grad=True)
    return mp.tensor(a) if isinstance(a, np.ndarray) else a


def _torch(a):
    if isinstance(a, np.ndarray) and a.dtype.kind == "f":
        return torch.tensor(a, requires_grad=True)
    return torch.tensor(a) if isinstance(a, np.ndarray) else a


def same_as_torch(name, *arrays, rtol=1e-10, **kw):
    """F.<name> in mixprec and torch on the same float64 inputs: equal outputs (indices exactly) and gradients."""
    ours, theirs = [_mp(a) for a in arrays], [_torch(a) for a in arrays]
    kw_ours = {k: mp.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
    kw_theirs = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
    out, ref = getattr(F, name)(*ours, **kw_ours), getattr(tF, name)(*theirs, **kw_theirs)
    if isinstance(ref, tuple):
        np.testing.assert_array_equal(out[1].numpy(), ref[1].numpy())
        out, ref = out[0], ref[0]
    assert out.shape == tuple(ref.shape)
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=rtol, atol=1e-12)
    g = rng.standard_normal(out.shape)
    out.backward(mp.tensor(g, dtype=mp.float64))
    ref.backward(torch.tensor(g))
    for a, b in zip(ours, theirs):
        if isinstance(b, torch.Tensor) and b.requires_grad:
            want = b.grad.numpy()
            got = a.grad.numpy() if a.grad is not None else np.zeros_like(want)  # no path: torch's zeros
            np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-11)


# ----------------------------------------------------------------- convolutions
CONV_CONFIGS = [dict(), dict(stride=2, padding=1, groups=2), dict(stride=3, padding=2, dilation=2),
                dict(padding=1, dilation=2, groups=2), dict(stride=2)]


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("cfg", CONV_CONFIGS, ids=str)
def test_conv_and_conv_transpose_match_torch(nd, cfg):
    size, kernel = (7, 6, 5)[:nd], (3, 2, 3)[:nd]
    groups = cfg.get("groups", 1)
    x, b = rng.standard_normal((2, 4) + size), rng.standard_normal(6)
    same_as_torch(f"conv{nd}d", x, rng.standard_normal((6, 4 // groups) + kernel), b, **cfg)
    extra = 1 if max(cfg.get("stride", 1), cfg.get("dilation", 1)) > 1 else 0
    same_as_torch(f"conv_transpose{nd}d", x, rng.standard_normal((4, 6 // groups) + kernel), b,
                  output_padding=extra, **cfg)


def test_conv_same_padding_and_internal_names_match_torch():
    x, w = rng.standard_normal((2, 3, 5, 4, 6)), rng.standard_normal((4, 3, 2, 3, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's note about even kernels with padding='same'
        same_as_torch("conv3d", x, w, padding="same", dilation=(2, 1, 1))
    args = (rng.standard_normal((2, 2, 5, 4)), rng.standard_normal((2, 3, 3, 2)), rng.standard_normal(3))
    for transposed in (False, True):
        w = args[1] if transposed else args[1].transpose(1, 0, 2, 3).copy()
        ours = mp.ops.get("_convolution")(*map(_mp, (args[0], w, args[2])), (2, 1), (1, 0), (1, 1), transposed,
                                         (1, 0) if transposed else (0, 0), 1, False, False, True, True)
        ref = torch._convolution(*map(_torch, (args[0], w, args[2])), (2, 1), (1, 0), (1, 1), transposed,
                                 (1, 0) if transposed else (0, 0), 1, False, False, True, True)
        np.testing.assert_allclose(ours.detach().numpy(), ref.detach().numpy(), rtol=1e-10)
    x, w, b = rng.standard_normal((6, 2, 3)), rng.standard_normal((3, 3, 4)), rng.standard_normal(4)
    np.testing.assert_allclose(mp.conv_tbc(*map(_mp, (x, w, b)), 1).detach().numpy(),
                               torch.conv_tbc(*map(_torch, (x, w, b)), 1).detach().numpy(), rtol=1e-10)


@pytest.mark.parametrize("dtype", [mp.float16, mp.bfloat16])
def test_conv_transpose_half_keeps_dtype_and_agrees_with_float64(dtype):
    x = mp.randn(2, 3, 4, 4, dtype=dtype, requires_grad=True)
    w = mp.randn(3, 2, 3, 3, dtype=dtype, requires_grad=True)
    out = F.conv_transpose2d(x, w, stride=2, padding=1)
    out.sum().backward()
    assert (out.dtype, x.grad.dtype, w.grad.dtype) == (dtype, dtype, dtype)
    exact = tF.conv_transpose2d(torch.tensor(x.numpy().astype(np.float64)), torch.tensor(w.numpy().astype(np.float64)),
                                stride=2, padding=1).numpy()
    eps = 2.0 ** -10 if dtype == mp.float16 else 2.0 ** -7
    assert np.abs(out.numpy().astype(np.float64) - exact).max() <= 4 * eps * max(1.0, np.abs(exact).max())


# ----------------------------------------------------------------- pools
POOL_CONFIGS = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                dict(kernel_size=3, stride=2, padding=1, ceil_mode=True), dict(kernel_size=2, stride=1, dilation=2),
                dict(kernel_size=2, ceil_mode=True)]


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("cfg", POOL_CONFIGS, ids=str)
def test_pools_match_torch(nd, cfg):
    size = (7, 6, 5)[:nd]
    x = rng.permutation(2 * 3 * int(np.prod(size))).reshape((2, 3) + size) / 7.0  # no ties
    same_as_torch(f"max_pool{nd}d", x, return_indices=True, **cfg)
    same_as_torch(f"max_pool{nd}d", x[0], **cfg)
    avg = {k: v for k, v in cfg.items() if k != "dilation"}
    for count_include_pad in (True, False):
        same_as_torch(f"avg_pool{nd}d", x, count_include_pad=count_include_pad, **avg)
    if nd > 1:
        same_as_torch(f"avg_pool{nd}d", x, divisor_override=3, **avg)


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_adaptive_pools_match_torch(nd):
    size = (7, 6, 5)[:nd]
    x = rng.permutation(2 * 3 * int(np.prod(size))).reshape((2, 3) + size) / 7.0
    for output_size in (1, 3, (2, None, 4)[:nd], 5, 9):
        same_as_torch(f"adaptive_avg_pool{nd}d", x, output_size=output_size)
        same_as_torch(f"adaptive_max_pool{nd}d", x, output_size=output_size, return_indices=True)
    same_as_torch(f"adaptive_avg_pool{nd}d", x[1], output_size=2)


@pytest.mark.parametrize("nd", [2, 3])
def test_fractional_max_pool_matches_torch_for_given_samples(nd):
    x = rng.permutation(2 * 3 * 8 ** nd).reshape((2, 3) + (8,) * nd) / 5.0
    samples = rng.random((2, 3, nd))
    for cfg in (dict(kernel_size=2, output_size=3), dict(kernel_size=(3, 2, 2)[:nd], output_ratio=(0.5,) * nd),
                dict(kernel_size=2, output_size=(7, 1, 4)[:nd] if nd == 2 else (6, 1, 4))):
        same_as_torch(f"fractional_max_pool{nd}d", x, return_indices=True, _random_samples=samples, **cfg)


def test_fractional_max_pool_draws_from_mixprecs_generator():
    x = mp.randn(2, 3, 9, 9)
    mp.manual_seed(4)
    a, ia = F.fractional_max_pool2d(x, 2, output_size=4, return_indices=True)
    mp.manual_seed(4)
    b, ib = F.fractional_max_pool2d(x, 2, output_size=4, return_indices=True)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    c, ic = F.fractional_max_pool2d(x, 2, output_size=4, return_indices=True)  # the generator moved on
    assert not np.array_equal(ia.numpy(), ic.numpy())
    # every output is the value at its index, and windows differ between planes (a sample per plane)
    np.testing.assert_array_equal(np.take_along_axis(x.numpy().reshape(2, 3, -1), ia.numpy().reshape(2, 3, -1), 2),
                                  a.numpy().reshape(2, 3, -1))
    module = nn.FractionalMaxPool2d(2, output_ratio=0.5)
    assert module(x).shape == (2, 3, 4, 4)


def test_max_unpool_inverts_max_pool_like_torch():
    x = rng.permutation(2 * 3 * 6 * 7).reshape(2, 3, 6, 7) / 3.0
    out, idx = tF.max_pool2d(torch.tensor(x), 2, return_indices=True)
    same_as_torch("max_unpool2d", out.numpy(), idx.numpy(), kernel_size=2, output_size=(6, 7))
    x3 = rng.permutation(4 ** 3 * 2).reshape(1, 2, 4, 4, 4) / 3.0
    out, idx = tF.max_pool3d(torch.tensor(x3), 2, return_indices=True)
    same_as_torch("max_unpool3d", out.numpy(), idx.numpy(), kernel_size=2)
    x1 = rng.permutation(14).reshape(1, 2, 7) / 3.0
    out, idx = tF.max_pool1d(torch.tensor(x1), 2, return_indices=True)
    same_as_torch("max_unpool1d", out.numpy(), idx.numpy(), kernel_size=2, output_size=[7])
    with pytest.raises(IndexError, match=r"out of range .* 16 elements \(valid: 0 to 15\); got indices spanning "
                                         r"\[-1, 3\]"):
        F.max_unpool2d(mp.ones(1, 1, 2, 2), mp.tensor([[[[0, -1], [2, 3]]]]), 2)
    with pytest.raises(IndexError, match=r"spanning \[0, 18\]"):
        F.max_unpool2d(mp.ones(1, 1, 2, 2), mp.tensor([[[[0, 18], [2, 3]]]]), 2)


def test_pools_keep_half_dtypes_and_propagate_nan():
    for dt in (mp.float16, mp.bfloat16):
        x = mp.randn(2, 3, 4, 5, 6).to(dt)
        for fn in (lambda a: F.max_pool3d(a, 2), lambda a: F.avg_pool3d(a, 2), lambda a: F.adaptive_avg_pool3d(a, 2),
                   lambda a: F.adaptive_max_pool1d(a[0, 0], 3), lambda a: F.max_pool1d(a[0, 0], 2)):
            assert fn(x).dtype == dt
    x = mp.zeros(1, 1, 4, 4)
    x[0, 0, 1, 2] = float("nan")
    for out in (F.max_pool2d(x, 2), F.adaptive_max_pool2d(x, 2), F.avg_pool2d(x, 2), F.adaptive_avg_pool2d(x, 2)):
        assert np.isnan(out.numpy()[0, 0, 0, 1]) and np.isfinite(out.numpy()[0, 0, 1]).all()


# ----------------------------------------------------------------- pads, grid_sample, prelu, bilinear
PAD_CASES = [((2, 3, 5), (1, 2)), ((3, 5), (2, 0)), ((2, 3, 4, 5), (1, 2, 3, 0)), ((3, 4, 5), (0, 1, 2, 3)),
             ((1, 2, 3, 4, 5), (1, 0, 2, 1, 2, 2)), ((2, 3, 4, 5), (-1, 2, 1, -2)), ((2, 5), (-2, 1))]


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad_matches_torch(mode):
    for shape, pad in PAD_CASES:
        same_as_torch("pad", rng.standard_normal(shape), pad, mode=mode)
    same_as_torch("pad", rng.standard_normal((2, 3, 4)), (1, 2, 0, 1, 1, 1), value=2.5)


@pytest.mark.parametrize("nd", [2, 3])
def test_grid_sample_matches_torch(nd):
    x = rng.standard_normal((2, 3) + (5, 4, 6)[:nd])
    grid = rng.uniform(-1.6, 1.6, (2,) + (3, 4, 2)[:nd] + (nd,))
    modes = ("bilinear", "nearest", "bicubic") if nd == 2 else ("bilinear", "nearest")
    for mode, padding_mode, align_corners in itertools.product(modes, ("zeros", "border", "reflection"),
                                                                (True, False)):
        same_as_torch("grid_sample", x, grid, mode=mode, padding_mode=padding_mode, align_corners=align_corners,
                      rtol=1e-9)


def test_grid_sample_nan_and_default_align_corners_as_torch():
    x = np.arange(16.0).reshape(1, 1, 4, 4)
    grid = np.array([[[[np.nan, 0.2], [0.1, 0.3], [np.inf, 0.0]]]])
    for mode in ("bilinear", "nearest"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # inf - inf, on purpose
            ours = F.grid_sample(mp.tensor(x), mp.tensor(grid), mode=mode, align_corners=False).numpy()
        ref = tF.grid_sample(torch.tensor(x), torch.tensor(grid), mode=mode, align_corners=False).numpy()
        np.testing.assert_allclose(ours, ref, rtol=1e-12)  # NaN where torch has NaN (bilinear), 0 (nearest)
    with pytest.warns(UserWarning, match="align_corners"):
        F.grid_sample(mp.tensor(x), mp.zeros(1, 1, 1, 2, dtype=mp.float64))


def test_prelu_and_bilinear_match_torch():
    same_as_torch("prelu", rng.standard_normal((2, 3, 4, 5)), rng.random(3))
    same_as_torch("prelu", rng.standard_normal((2, 3)), np.array(0.3))
    same_as_torch("prelu", np.array([0.0, -1.0, 2.0]), np.array([0.25]))  # the slope applies at 0 (torch's x > 0)
    same_as_torch("bilinear", rng.standard_normal((4, 3)), rng.standard_normal((4, 2)), rng.standard_normal((5, 3, 2)),
                  rng.standard_normal(5))
    same_as_torch("bilinear", rng.standard_normal((2, 4, 3)), rng.standard_normal((2, 4, 2)),
                  rng.standard_normal((5, 3, 2)))
    same_as_torch("bilinear", rng.standard_normal(3), rng.standard_normal(2), rng.standard_normal((5, 3, 2)))


# ----------------------------------------------------------------- autocast: the dtype each op returns, as torch
def _bf16(*shape):
    return rng.standard_normal(shape).astype(np.float32)


AUTOCAST_CALLS = {  # name -> (float32 inputs, keyword options); the first input is cast to bfloat16 beforehand
    "conv3d": ([_bf16(1, 2, 4, 4, 4), _bf16(3, 2, 2, 2, 2)], {}),
    "conv_transpose1d": ([_bf16(1, 2, 5), _bf16(2, 3, 3)], {}),
    "conv_transpose2d": ([_bf16(1, 2, 5, 5), _bf16(2, 3, 3, 3)], {}),
    "prelu": ([_bf16(2, 3), _bf16(3)], {}),
    "bilinear": ([_bf16(2, 3), _bf16(2, 4), _bf16(5, 3, 4)], {}),
    "avg_pool3d": ([_bf16(1, 2, 4, 4, 4)], dict(kernel_size=2)),
    "max_pool3d": ([_bf16(1, 2, 4, 4, 4)], dict(kernel_size=2)),
    "max_pool2d": ([_bf16(1, 2, 4, 4)], dict(kernel_size=2)),
    "avg_pool2d": ([_bf16(1, 2, 4, 4)], dict(kernel_size=2)),
    "adaptive_avg_pool2d": ([_bf16(1, 2, 4, 4)], dict(output_size=2)),
    "adaptive_avg_pool3d": ([_bf16(1, 2, 4, 4, 4)], dict(output_size=2)),
    "adaptive_max_pool2d": ([_bf16(1, 2, 4, 4)], dict(output_size=2)),
    "adaptive_max_pool3d": ([_bf16(1, 2, 4, 4, 4)], dict(output_size=2)),
    "fractional_max_pool2d": ([_bf16(1, 2, 6, 6)], dict(kernel_size=2, output_size=3)),
    "grid_sample": ([_bf16(1, 2, 4, 4), _bf16(1, 3, 3, 2) / 2], dict(align_corners=False)),
}
PAD_AUTOCAST = [((1, 2, 5), (1, 1), "reflect"), ((1, 2, 5, 5), (1, 1, 1, 1), "reflect"),
                ((1, 1, 2, 5, 5), (1, 1, 1, 1, 1, 1), "reflect"), ((1, 2, 5), (1, 1), "replicate"),
                ((1, 2, 5, 5), (1, 1, 1, 1), "replicate"), ((1, 1, 2, 5, 5), (1, 1, 1, 1, 1, 1), "replicate"),
                ((1, 2, 5, 5), (1, 1, 1, 1), "circular"), ((1, 2, 5, 5), (1, 1, 1, 1), "constant")]


def _autocast_dtypes(name, arrays, kw, second_bf16):
    ours = [mp.tensor(a) for a in arrays]
    theirs = [torch.tensor(a) for a in arrays]
    ours[0], theirs[0] = ours[0].to(mp.bfloat16), theirs[0].bfloat16()
    if second_bf16 and len(arrays) > 1:
        ours[1], theirs[1] = ours[1].to(mp.bfloat16), theirs[1].bfloat16()
    try:
        with mp.autocast("cpu"):
            ours = getattr(F, name)(*ours, **kw).dtype.name
    except (TypeError, RuntimeError):
        ours = "refused"
    try:
        with torch.autocast("cpu"):
            theirs = str(getattr(tF, name)(*theirs, **kw).dtype).replace("torch.", "")
    except RuntimeError:
        theirs = "refused"  # (bilinear refuses mixed dtypes in both)
    return ours, theirs


@pytest.mark.parametrize("name", sorted(AUTOCAST_CALLS))
def test_cpu_autocast_dtype_matches_torch(name):
    arrays, kw = AUTOCAST_CALLS[name]
    for second_bf16 in (False, True):
        ours, theirs = _autocast_dtypes(name, arrays, kw, second_bf16)
        assert ours == theirs


@pytest.mark.parametrize("shape,pad,mode", PAD_AUTOCAST, ids=lambda v: str(v))
def test_pad_under_cpu_autocast_follows_the_op_of_its_mode_and_rank(shape, pad, mode):
    ours, theirs = _autocast_dtypes("pad", [_bf16(*shape)], dict(pad=pad, mode=mode), False)
    assert ours == theirs
    # the policy lives on the per-mode op; pad itself has none
    assert mp.ops.policy("pad", "cpu") is None


def test_policies_of_the_mapped_names():
    LP, FP32 = mp.ops.CastPolicy.LOWER_PRECISION_FP, mp.ops.CastPolicy.FP32
    # CUDA: torch 2.13's table beyond its documented list (mixprec/ops/policies.py)
    assert mp.ops.policy("_convolution", "cpu") is LP and mp.ops.policy("_convolution", "cuda") is LP
    assert mp.ops.policy("conv_tbc", "cpu") is LP and mp.ops.policy("conv_tbc", "cuda") is LP
    assert mp.ops.get("grid_sampler_2d") is mp.ops.get("grid_sampler_3d") is mp.ops.get("grid_sampler")
    assert mp.ops.policy("grid_sampler", "cpu") is FP32 and mp.ops.policy("grid_sample", "cuda") is \
        mp.ops.CastPolicy.PROMOTE


# ----------------------------------------------------------------- empty inputs, as torch
EMPTY = [
    ("conv1d", [(0, 2, 4), (3, 2, 3)], {}), ("conv2d", [(0, 2, 4, 4), (3, 2, 3, 3)], {}),
    ("conv3d", [(0, 2, 4, 4, 4), (3, 2, 3, 3, 3)], {}), ("conv_transpose2d", [(0, 2, 4, 4), (2, 3, 3, 3)], {}),
    ("max_pool2d", [(0, 2, 4, 4)], dict(kernel_size=2)), ("avg_pool1d", [(0, 2, 4)], dict(kernel_size=2)),
    ("max_pool3d", [(0, 2, 4, 4, 4)], dict(kernel_size=2)),
    ("adaptive_avg_pool2d", [(0, 2, 4, 4)], dict(output_size=2)),
    ("adaptive_avg_pool2d", [(1, 0, 4, 4)], dict(output_size=2)),
    ("adaptive_avg_pool2d", [(1, 2, 4, 4)], dict(output_size=0)),
    ("adaptive_max_pool2d", [(0, 2, 4, 4)], dict(output_size=2)),
    ("fractional_max_pool2d", [(0, 2, 6, 6)], dict(kernel_size=2, output_size=3)),
    ("pad", [(0, 2, 4, 4)], dict(pad=(1, 1, 1, 1), mode="reflect")),
    ("pad", [(0, 2, 4, 4)], dict(pad=(1, 1, 2, 0), mode="circular")),
    ("prelu", [(0, 3), (3,)], {}), ("bilinear", [(0, 3), (0, 4), (5, 3, 4)], {}),
    ("grid_sample", [(0, 3, 4, 4), (0, 2, 2, 2)], dict(align_corners=False)),
    ("grid_sample", [(1, 3, 4, 4), (1, 0, 2, 2)], dict(align_corners=False)),
]


@pytest.mark.parametrize("name,shapes,kw", EMPTY, ids=[f"{e[0]}-{e[1][0]}" for e in EMPTY])
def test_empty_inputs_give_torchs_shapes(name, shapes, kw):
    arrays = [rng.standard_normal(s) for s in shapes]
    out = getattr(F, name)(*[mp.tensor(a, requires_grad=True) for a in arrays], **kw)
    ref = getattr(tF, name)(*[torch.tensor(a) for a in arrays], **kw)
    assert out.shape == tuple(ref.shape) and out.numel() == 0
    out.sum().backward()  # and the gradients exist, zero-sized or zero


EMPTY_ERRORS = [  # empty where torch refuses too
    ("max_pool2d", (1, 0, 4, 4), dict(kernel_size=2), "non-empty dims"),
    ("avg_pool2d", (1, 2, 0, 4), dict(kernel_size=2), "non-empty dims"),
    ("adaptive_avg_pool2d", (1, 2, 0, 4), dict(output_size=2), "non-empty dims"),
    ("pad", (1, 2, 0, 4), dict(pad=(1, 1, 1, 1), mode="replicate"), "non-empty dims"),
    ("conv2d", (1, 2, 0, 4), dict(weight=mp.randn(3, 2, 3, 3, dtype=mp.float64), padding=1), "non-empty spatial"),
]


@pytest.mark.parametrize("name,shape,kw,match", EMPTY_ERRORS, ids=[e[0] for e in EMPTY_ERRORS])
def test_empty_inputs_torch_refuses_are_refused_with_a_reason(name, shape, kw, match):
    tkw = {k: torch.tensor(v.numpy()) if isinstance(v, mp.Tensor) else v for k, v in kw.items()}
    with pytest.raises(RuntimeError):
        getattr(tF, name)(torch.zeros(shape, dtype=torch.float64), **tkw)
    with pytest.raises((RuntimeError, ValueError), match=match):
        getattr(F, name)(mp.zeros(*shape, dtype=mp.float64), **kw)


# ----------------------------------------------------------------- bad input names the argument
def _x(*shape, dtype=mp.float32):
    return mp.zeros(*shape, dtype=dtype)


BAD = [
    (lambda: F.conv3d(_x(2, 4, 4), _x(3, 2, 2, 2, 2)), RuntimeError, "4-D .unbatched. or 5-D"),
    (lambda: F.conv3d(_x(1, 2, 4, 4, 4), _x(3, 2, 2, 2)), RuntimeError, "5-D weight"),
    (lambda: F.conv2d(_x(1, 2, 4, 4), _x(3, 2, 2, 2), stride=0), ValueError, "stride must be an int >= 1"),
    (lambda: F.conv2d(_x(1, 2, 4, 4), _x(3, 2, 2, 2), dilation=(1, 2, 3)), ValueError, "dilation"),
    (lambda: F.conv2d(_x(1, 2, 4, 4), _x(3, 2, 2, 2), padding=-1), ValueError, "padding must be"),
    (lambda: F.conv2d(_x(1, 2, 4, 4), _x(3, 2, 0, 2)), RuntimeError, "empty kernel"),
    (lambda: F.conv2d(_x(1, 2, 4, 4), _x(3, 2, 2, 2), _x(4)), RuntimeError, "bias of shape"),
    (lambda: F.conv2d([[1.0]], _x(3, 2, 2, 2)), TypeError, "input must be a Tensor"),
    (lambda: F.conv_transpose2d(_x(1, 3, 4, 4), _x(2, 3, 3, 3)), RuntimeError, "input has 3 channels"),
    (lambda: F.conv_transpose2d(_x(1, 2, 4, 4), _x(2, 3, 3, 3), stride=2, output_padding=2), ValueError,
     "output_padding .* smaller than either stride"),
    (lambda: F.conv_transpose2d(_x(1, 2, 4, 4), _x(2, 3, 3, 3), padding="same"), ValueError, "padding must be"),
    (lambda: F.conv_transpose2d(_x(1, 2, 4, 4), _x(2, 3, 3, 3), groups=4), RuntimeError, "divisible by groups"),
    (lambda: F.conv_transpose1d(_x(1, 2, 2), _x(2, 3, 2), padding=3), RuntimeError, "removes the whole output"),
    (lambda: mp.conv_tbc(_x(5, 2, 3), _x(3, 4, 4), _x(4)), RuntimeError, "input has 3 channels"),
    (lambda: mp.ops.get("_convolution")(_x(1, 2, 4), _x(2, 2), None, 1, 0, 1, False, 0, 1), RuntimeError,
     "3-D, 4-D or 5-D weight"),
    (lambda: F.max_pool3d(_x(2, 4, 4), 2), ValueError, "4-D .* or 5-D"),
    (lambda: F.max_pool1d(_x(1, 2, 4), 3, padding=2), ValueError, "at most half the kernel"),
    (lambda: F.avg_pool3d(_x(1, 1, 2, 2, 2), 3), ValueError, "too small"),
    (lambda: F.max_pool2d(_x(1, 1, 4, 4, dtype=mp.int64), 2), TypeError, "floating"),
    (lambda: F.adaptive_avg_pool2d(_x(1, 1, 4, 4), (2, 2, 2)), ValueError, "output_size must be"),
    (lambda: F.adaptive_max_pool3d(_x(1, 1, 4, 4, 4), -1), ValueError, "output_size must be an int >= 0"),
    (lambda: F.fractional_max_pool2d(_x(1, 1, 6, 6), 2), ValueError, "exactly one of output_size and output_ratio"),
    (lambda: F.fractional_max_pool2d(_x(1, 1, 6, 6), 2, output_ratio=1.5), ValueError, "output_ratio"),
    (lambda: F.fractional_max_pool2d(_x(1, 1, 6, 6), 3, output_size=5), ValueError, "too large"),
    (lambda: F.fractional_max_pool3d(_x(1, 1, 8, 8, 8), 2, output_size=7), ValueError, "< input size"),
    (lambda: F.fractional_max_pool2d(_x(2, 1, 6, 6), 2, output_size=3, _random_samples=_x(1, 1, 2)), ValueError,
     r"_random_samples must be .* \(2, 1, 2\)"),
    (lambda: F.max_unpool2d(_x(1, 1, 2, 2), mp.zeros(1, 1, 2, 2, dtype=mp.int32), 2), ValueError,
     "indices must be an int64"),
    (lambda: F.max_unpool2d(_x(1, 1, 2, 2), mp.zeros(1, 1, 2, 2, dtype=mp.int64), 2, output_size=(9, 9)),
     ValueError, "invalid output_size"),
    (lambda: F.pad(_x(2, 3), (1, 1, 1)), ValueError, "even length"),
    (lambda: F.pad(_x(2, 3), (1, 1, 1, 1, 1, 1)), ValueError, "pads 3 dims, but the input has only 2"),
    (lambda: F.pad(_x(1, 2, 4), (4, 1), mode="reflect"), RuntimeError, r"pads \(4, 1\) are too large for dim 2"),
    (lambda: F.pad(_x(1, 2, 4), (5, 1), mode="circular"), RuntimeError, "too large"),
    (lambda: F.pad(_x(4), (1, 1), mode="reflect"), NotImplementedError, "last 1, 2 or 3 dims"),
    (lambda: F.pad(_x(1, 2, 4), (1, 1), mode="wrap"), ValueError, "mode must be"),
    (lambda: F.pad(_x(1, 2, 4), (1, 1), mode="reflect", value=1.0), ValueError, "does not take a value"),
    (lambda: F.pad(_x(1, 2, 4), (-3, -2)), RuntimeError, "negative size"),
    (lambda: F.pad(_x(1, 2, 4), (1.5, 1)), TypeError, "sequence of ints"),
    (lambda: F.grid_sample(_x(1, 1, 4, 4), _x(1, 2, 2, 3), align_corners=False), RuntimeError, "grid of shape"),
    (lambda: F.grid_sample(_x(1, 1, 4, 4), _x(1, 2, 2, 2, dtype=mp.float64), align_corners=False), TypeError,
     "same dtype"),
    (lambda: F.grid_sample(_x(1, 1, 2, 4, 4), _x(1, 2, 2, 2, 3), mode="bicubic", align_corners=False),
     RuntimeError, "bicubic interpolation only supports a 4-D input"),
    (lambda: F.grid_sample(_x(1, 1, 4, 4), _x(1, 2, 2, 2), mode="area"), ValueError, "mode must be"),
    (lambda: F.grid_sample(_x(1, 1, 4, 4), _x(1, 2, 2, 2), padding_mode="wrap"), ValueError, "padding_mode"),
    (lambda: F.prelu(_x(2, 4), _x(3)), RuntimeError, "3 slopes, but .* 4 channels"),
    (lambda: F.prelu(_x(2, 4), _x(2, 2)), RuntimeError, "scalar or 1-D"),
    (lambda: F.prelu(_x(2, 4), _x(4, dtype=mp.float64)), TypeError, "same dtype"),
    (lambda: F.bilinear(_x(2, 3), _x(3, 4), _x(5, 3, 4)), RuntimeError, "same batch dims"),
    (lambda: F.bilinear(_x(2, 3), _x(2, 4), _x(5, 3, 5)), RuntimeError, r"input2 of shape \(2, 4\)"),
    (lambda: F.bilinear(_x(2, 3), _x(2, 4), _x(5, 3, 4), _x(4)), RuntimeError, "bias of shape"),
]


@pytest.mark.parametrize("call,exc,match", BAD)
def test_bad_input_raises_clear_error(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# ----------------------------------------------------------------- nn modules against torch, weights copied
def _copy_into_torch(module, torch_module):
    state = {k: torch.tensor(v.numpy()) for k, v in module.state_dict().items()}
    assert set(state) == set(torch_module.state_dict())
    for k, v in torch_module.state_dict().items():
        assert tuple(v.shape) == tuple(state[k].shape), k
    torch_module.load_state_dict(state)


MODULES = [
    ("Conv1d", (3, 4, 3), dict(stride=2, padding=1, bias=False), (2, 3, 9)),
    ("Conv2d", (2, 4, 3), dict(padding="same", padding_mode="reflect", dilation=2), (2, 2, 7, 6)),
    ("Conv2d", (2, 4, (2, 3)), dict(padding=(1, 2), padding_mode="circular"), (2, 2, 5, 6)),
    ("Conv3d", (2, 4, 2), dict(padding=1, padding_mode="replicate", groups=2), (1, 2, 4, 3, 5)),
    ("ConvTranspose1d", (3, 4, 3), dict(stride=2, padding=1, output_padding=1), (2, 3, 5)),
    ("ConvTranspose2d", (4, 2, 3), dict(stride=2, groups=2, dilation=(1, 2)), (2, 4, 3, 4)),
    ("ConvTranspose3d", (2, 3, 2), dict(stride=(1, 2, 2), bias=False), (1, 2, 3, 2, 3)),
    ("PReLU", (3,), {}, (2, 3, 4)), ("PReLU", (), dict(init=0.1), (5,)),
    ("MaxPool1d", (3,), dict(stride=2, padding=1, ceil_mode=True), (2, 3, 8)),
    ("MaxPool3d", (2,), dict(return_indices=True), (1, 2, 4, 5, 4)),
    ("AvgPool1d", (3,), dict(stride=2, count_include_pad=False, padding=1), (2, 3, 8)),
    ("AvgPool3d", (2,), dict(divisor_override=5), (1, 2, 4, 5, 4)),
    ("AdaptiveAvgPool1d", (3,), {}, (2, 3, 8)), ("AdaptiveAvgPool2d", ((3, None),), {}, (2, 3, 8, 5)),
    ("AdaptiveAvgPool3d", (1,), {}, (1, 2, 4, 5, 4)), ("AdaptiveMaxPool1d", (3,), dict(return_indices=True), (2, 3, 8)),
    ("AdaptiveMaxPool2d", (2,), {}, (2, 3, 8, 5)), ("AdaptiveMaxPool3d", ((2, 3, 2),), {}, (1, 2, 4, 5, 4)),
    ("ZeroPad1d", ((1, 2),), {}, (2, 3, 4)), ("ZeroPad2d", (1,), {}, (2, 3, 4)),
    ("ZeroPad3d", ((1, 0, 2, 1, 0, 1),), {}, (1, 2, 3, 4, 2)), ("ConstantPad1d", (2, 3.5), {}, (2, 4)),
    ("ConstantPad2d", ((1, 0, 2, 1), -1.0), {}, (2, 3, 4)), ("ConstantPad3d", (1, 0.5), {}, (1, 2, 2, 3)),
    ("ReflectionPad1d", (2,), {}, (2, 3, 4)), ("ReflectionPad2d", ((1, 0, 2, 1),), {}, (2, 3, 4)),
    ("ReflectionPad3d", (1,), {}, (1, 2, 2, 3, 2)), ("ReplicationPad1d", ((3, 1),), {}, (2, 3, 4)),
    ("ReplicationPad2d", (2,), {}, (1, 2, 3, 4)), ("ReplicationPad3d", ((1, 0, 2, 1, 0, 1),), {}, (1, 2, 3, 2)),
    ("CircularPad1d", (2,), {}, (2, 3, 4)), ("CircularPad2d", ((1, 0, 2, 1),), {}, (2, 3, 4)),
    ("CircularPad3d", (1,), {}, (1, 2, 2, 3, 2)),
]


@pytest.mark.parametrize("name,args,kw,shape", MODULES, ids=[m[0] for m in MODULES])
def test_modules_match_torch_with_copied_weights(name, args, kw, shape):
    mp.manual_seed(0)
    ours = getattr(nn, name)(*args, **kw).double()
    theirs = getattr(torch.nn, name)(*args, **kw).double()
    _copy_into_torch(ours, theirs)
    x = rng.standard_normal(shape)
    xm, xt = mp.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out, ref = ours(xm), theirs(xt)
    if isinstance(ref, tuple):
        np.testing.assert_array_equal(out[1].numpy(), ref[1].numpy())
        out, ref = out[0], ref[0]
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-10, atol=1e-12)
    g = rng.standard_normal(out.shape)
    out.backward(mp.tensor(g))
    ref.backward(torch.tensor(g))
    np.testing.assert_allclose(xm.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-12)
    tparams = dict(theirs.named_parameters())
    for pname, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), tparams[pname].grad.numpy(), rtol=1e-9, atol=1e-12)


def test_bilinear_and_unpool_modules_match_torch():
    ours, theirs = nn.Bilinear(3, 2, 4).double(), torch.nn.Bilinear(3, 2, 4).double()
    _copy_into_torch(ours, theirs)
    a, b = rng.standard_normal((5, 3)), rng.standard_normal((5, 2))
    np.testing.assert_allclose(ours(mp.tensor(a), mp.tensor(b)).detach().numpy(),
                               theirs(torch.tensor(a), torch.tensor(b)).detach().numpy(), rtol=1e-12)
    x = rng.permutation(2 * 2 * 6 * 6).reshape(2, 2, 6, 6) / 3.0
    out, idx = nn.MaxPool2d(2, return_indices=True)(mp.tensor(x))
    back = nn.MaxUnpool2d(2)(out, idx, output_size=(6, 6))
    ref = torch.nn.MaxUnpool2d(2)(*torch.nn.MaxPool2d(2, return_indices=True)(torch.tensor(x)), output_size=(6, 6))
    np.testing.assert_array_equal(back.numpy(), ref.numpy())
    ours, theirs = nn.ConvTranspose2d(2, 3, 3, stride=2).double(), torch.nn.ConvTranspose2d(2, 3, 3, stride=2).double()
    _copy_into_torch(ours, theirs)
    x = rng.standard_normal((1, 2, 4, 4))
    for size in ((9, 9), (10, 10), (1, 3, 10, 9)):
        np.testing.assert_allclose(ours(mp.tensor(x), output_size=size).detach().numpy(),
                                   theirs(torch.tensor(x), output_size=size).detach().numpy(), rtol=1e-12)
    with pytest.raises(ValueError, match="valid sizes range from"):
        ours(mp.tensor(x), output_size=(11, 9))


@pytest.mark.parametrize("cls,args,fan_in", [("Conv3d", (4, 6, (2, 3, 1)), 4 * 6),
                                             ("ConvTranspose2d", (4, 6, 3), 6 * 9),
                                             ("ConvTranspose1d", (4, 6, 3, 1, 0, 0, 2), 3 * 3),
                                             ("Bilinear", (5, 3, 2), 5)])
def test_module_init_follows_torch(cls, args, fan_in):
    """kaiming_uniform(a=sqrt(5)) weights and biases bounded by 1/sqrt(fan_in) (fan_in from weight dim 1)."""
    mp.manual_seed(0)
    m = getattr(nn, cls)(*args)
    bound = 1 / np.sqrt(fan_in)
    for p in (m.weight, m.bias):
        values = np.abs(p.numpy())
        assert values.max() <= bound and values.max() > 0.5 * bound
    assert nn.PReLU(3).weight.tolist() == [0.25] * 3


def test_module_argument_errors():
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.ConvTranspose2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="padding_mode='zeros' is supported for transposed"):
        nn.ConvTranspose1d(2, 2, 3, padding_mode="reflect")
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        nn.Conv3d(2, 2, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match="strided"):
        nn.Conv1d(2, 2, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match=r"Conv3d\(2, 4.*with 2 channels"):
        nn.Conv3d(2, 4, 3)(mp.zeros(1, 3, 4, 4, 4))
    with pytest.raises(ValueError, match="tuple of 4 ints"):
        nn.ReflectionPad2d((1, 2))
    with pytest.raises(ValueError, match=r"Bilinear\(in1_features=3.*input2\[\.\.\., 2\]"):
        nn.Bilinear(3, 2, 4)(mp.zeros(5, 3), mp.zeros(5, 3))
    with pytest.raises(ValueError, match="exactly one"):
        nn.FractionalMaxPool3d(2)
    assert repr(nn.Conv3d(2, 4, 3, padding=1, bias=False)) == \
        "Conv3d(2, 4, kernel_size=(3, 3, 3), stride=(1, 1, 1), padding=(1, 1, 1), bias=False)"
    assert repr(nn.ConvTranspose2d(2, 4, 3, stride=2, output_padding=1)) == \
        "ConvTranspose2d(2, 4, kernel_size=(3, 3), stride=(2, 2), output_padding=(1, 1))"


def test_conv_over_zero_input_channels_returns_its_bias():
    """An empty sum: mixprec gives the bias in the weight's output channels (torch returns an empty tensor)."""
    x = mp.zeros(1, 0, 4, 4, requires_grad=True)
    w = mp.zeros(3, 0, 3, 3, requires_grad=True)
    b = mp.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = F.conv2d(x, w, b)
    assert y.shape == (1, 3, 2, 2)
    np.testing.assert_array_equal(y.detach().numpy()[0, :, 0, 0], [1.0, 2.0, 3.0])
    y.sum().backward()
    assert x.grad.shape == (1, 0, 4, 4) and b.grad.tolist() == [4.0, 4.0, 4.0]

