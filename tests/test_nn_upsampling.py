"""interpolate (mixprec/ops/interpolate.py) and the Upsample layers (mixprec/nn/upsampling.py) against torch."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import mixprec as mp
import mixprec.nn.functional as F

torch = pytest.importorskip("torch")

SHAPES = {1: (2, 3, 7), 2: (1, 2, 5, 6), 3: (1, 2, 3, 4, 5)}
MODES = [("nearest", 1), ("nearest", 2), ("nearest", 3), ("nearest-exact", 2), ("linear", 1), ("bilinear", 2),
         ("bicubic", 2), ("trilinear", 3), ("area", 1), ("area", 2), ("area", 3)]
RESIZES = [dict(scale_factor=2), dict(scale_factor=0.6), dict(scale_factor=1.7, recompute_scale_factor=True),
           dict(scale_factor=1.3), dict(size=4), dict(size=9), dict(size=1)]


@pytest.mark.parametrize("mode,nd", MODES, ids=[f"{m}-{n}d" for m, n in MODES])
@pytest.mark.filterwarnings("ignore")
def test_interpolate_matches_torch_in_value_and_gradient(mode, nd):
    x = np.random.default_rng(nd).standard_normal(SHAPES[nd])
    corners = (None, True, False) if mode in ("linear", "bilinear", "bicubic", "trilinear") else (None,)
    for resize, align in itertools.product(RESIZES, corners):
        kw = dict(resize, mode=mode, align_corners=align)
        mx, tx = mp.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        y, ty = F.interpolate(mx, **kw), torch.nn.functional.interpolate(tx, **kw)
        assert tuple(y.shape) == tuple(ty.shape), kw
        np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-12, err_msg=str(kw))
        if mode == "nearest" and "scale_factor" in resize and any(
                a == b for a, b in zip(x.shape[2:], ty.shape[2:])) and resize["scale_factor"] != 1:
            continue  # torch's gradient copies such a dim, which its forward resampled: not its derivative
        g = np.random.default_rng(0).standard_normal(tuple(ty.shape))
        y.backward(mp.tensor(g))
        ty.backward(torch.tensor(g))
        np.testing.assert_allclose(mx.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=str(kw))


def test_half_input_is_computed_in_float32_and_rounded_once():
    x = np.random.default_rng(3).standard_normal((1, 1, 4, 4)).astype(np.float16)
    y = F.interpolate(mp.tensor(x), scale_factor=1.5, mode="bilinear")
    want = torch.nn.functional.interpolate(torch.tensor(x.astype(np.float32)), scale_factor=1.5, mode="bilinear")
    assert y.dtype == mp.float16
    np.testing.assert_allclose(y.numpy().astype(np.float32), want.numpy().astype(np.float16).astype(np.float32),
                               rtol=2 ** -10)


@pytest.mark.filterwarnings("ignore")
def test_upsample_layers_match_torch():
    x = np.random.default_rng(4).standard_normal((1, 2, 3, 4)).astype(np.float32)
    for m, t in [(mp.nn.Upsample(scale_factor=2, mode="bilinear"), torch.nn.Upsample(scale_factor=2, mode="bilinear")),
                 (mp.nn.Upsample(size=(5, 3)), torch.nn.Upsample(size=(5, 3))),
                 (mp.nn.UpsamplingNearest2d(scale_factor=3), torch.nn.UpsamplingNearest2d(scale_factor=3)),
                 (mp.nn.UpsamplingBilinear2d(size=6), torch.nn.UpsamplingBilinear2d(size=6))]:
        np.testing.assert_allclose(m(mp.tensor(x)).numpy(), t(torch.tensor(x)).numpy(), rtol=1e-6, atol=1e-6)
    with pytest.warns(UserWarning, match="upsample_bilinear is deprecated"):
        F.upsample_bilinear(mp.tensor(x), scale_factor=2)


@pytest.mark.parametrize("fn,exc,match", [
    (lambda: F.interpolate(mp.ones(1, 1, 4)), ValueError, r"interpolate: give exactly one of size and scale_factor"),
    (lambda: F.interpolate(mp.ones(1, 1, 4), size=2, scale_factor=2), ValueError, r"exactly one"),
    (lambda: F.interpolate(mp.ones(1, 1, 4), size=2, mode="bilinear"), NotImplementedError,
     r"mode 'bilinear' needs a 4-D input, got a 3-D one"),
    (lambda: F.interpolate(mp.ones(1, 1, 4), size=2, align_corners=True), ValueError, r"align_corners can only"),
    (lambda: F.interpolate(mp.ones(1, 1, 4), size=2, mode="cubic"), ValueError, r"mode must be one of"),
    (lambda: F.interpolate(mp.ones(1, 4), size=2), ValueError, r"expected a 3-D, 4-D or 5-D input"),
    (lambda: F.interpolate(mp.ones(1, 1, 4, 4), size=(2, 2, 2)), ValueError, r"size must be an int or 2"),
    (lambda: F.interpolate(mp.ones(1, 1, 4), scale_factor=-1.0), ValueError, r"scale_factor must be a positive"),
    (lambda: F.interpolate(mp.ones(1, 1, 4, 4), size=2, mode="bilinear", antialias=True), NotImplementedError,
     r"antialias"),
    (lambda: F.interpolate(mp.ones(1, 1, 4, dtype=mp.int64), size=2), TypeError, r"floating-point input"),
])
def test_bad_arguments_raise_a_clear_error(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()
