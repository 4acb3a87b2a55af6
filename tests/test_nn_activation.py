"""The activation layers of mixprec/nn/activation.py and their functions (ops/nn_activations.py) against torch."""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp
import mixprec.nn.functional as F

LAYERS = [("LeakyReLU", (0.2,)), ("ELU", (0.5,)), ("CELU", (2.0,)), ("SELU", ()), ("Hardtanh", (-0.5, 2.0)),
          ("ReLU6", ()), ("Hardswish", ()), ("Hardsigmoid", ()), ("Mish", ()), ("Softsign", ()),
          ("Softshrink", (0.3,)), ("Hardshrink", (0.4,)), ("Tanhshrink", ()), ("Threshold", (0.1, -3.0)),
          ("LogSigmoid", ()), ("GLU", (1,)), ("Softplus", (2.0, 1.0)), ("RReLU", (0.1, 0.2))]


def _x():
    return np.random.default_rng(0).uniform(-8, 8, (3, 6)).astype(np.float32)


@pytest.mark.parametrize("name,args", LAYERS, ids=[n for n, _ in LAYERS])
def test_layer_matches_torch_forward_and_gradient(name, args):
    torch = pytest.importorskip("torch")
    m, t = getattr(mp.nn, name)(*args).eval(), getattr(torch.nn, name)(*args).eval()
    x, tx = mp.tensor(_x(), requires_grad=True), torch.tensor(_x(), requires_grad=True)
    y, ty = m(x), t(tx)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-6, atol=1e-6)
    y.sum().backward()
    ty.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", ["leaky_relu", "elu", "celu", "selu", "hardtanh", "relu6", "hardswish",
                                  "hardsigmoid", "mish", "threshold", "rrelu"])
def test_inplace_writes_the_input_and_differentiates_like_torch(name):
    torch = pytest.importorskip("torch")
    args = (0.5, -1.0) if name == "threshold" else ()
    a, ta = mp.tensor(_x(), requires_grad=True), torch.tensor(_x(), requires_grad=True)
    b, tb = a * 2, ta * 2
    out = getattr(F, name)(b, *args, inplace=True)
    getattr(torch.nn.functional, name)(tb, *args, inplace=True)
    assert out is b
    np.testing.assert_allclose(b.detach().numpy(), tb.detach().numpy(), rtol=1e-6, atol=1e-6)
    b.sum().backward()
    tb.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_kinks_take_torchs_derivative():
    torch = pytest.importorskip("torch")
    # each NaN within the first 64 elements, which torch's vectorized kernels take (with AVX2 or AVX-512); its
    # scalar path, for a tensor smaller than a vector and the tail after the last full one, treats a NaN otherwise
    points = [float("nan"), -3.0, 0.0, 3.0, 6.0, -1.0, 1.0, 0.5, -0.5, float("inf"), -float("inf")] * 6
    for name, args in [("hardtanh", ()), ("relu6", ()), ("hardswish", ()), ("hardsigmoid", ()), ("elu", ()),
                       ("celu", (2.0,)), ("selu", ()), ("leaky_relu", (0.1,)), ("softshrink", (0.5,)),
                       ("hardshrink", (0.5,)), ("threshold", (0.5, 2.0)), ("softsign", ())]:
        x, tx = mp.tensor(points, requires_grad=True), torch.tensor(points, requires_grad=True)
        y, ty = getattr(F, name)(x, *args), getattr(torch.nn.functional, name)(tx, *args)
        np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-6, err_msg=name)
        y.sum().backward()
        ty.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6, err_msg=name)


def test_rrelu_in_training_follows_the_seed_and_its_gradient_is_the_slope():
    x = mp.tensor(_x(), requires_grad=True)
    mp.manual_seed(3)
    y = F.rrelu(x, 0.1, 0.3, training=True)
    mp.manual_seed(3)
    again = F.rrelu(x.detach(), 0.1, 0.3, training=True)
    np.testing.assert_array_equal(y.detach().numpy(), again.numpy())
    xs = x.detach().numpy()
    slope = np.where(xs <= 0, y.detach().numpy() / xs, 1.0)
    assert np.all((slope[xs <= 0] >= 0.1) & (slope[xs <= 0] <= 0.3)) and len(np.unique(slope)) > 2
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), slope, rtol=1e-6)


@pytest.mark.parametrize("fn,exc,match", [
    (lambda: F.leaky_relu(mp.tensor([1, 2])), TypeError, r"leaky_relu: expected a floating-point input, got int64"),
    (lambda: F.hardtanh(mp.ones(2), 1.0, -1.0), ValueError, r"hardtanh: min_val \(1.0\) must not be greater"),
    (lambda: F.softshrink(mp.ones(2), -0.5), ValueError, r"softshrink: lambd must be >= 0"),
    (lambda: F.glu(mp.ones(2, 3)), RuntimeError, r"glu: the halved dim -1 must have an even size, got 3"),
    (lambda: F.glu(mp.tensor(1.0)), RuntimeError, r"glu: does not support 0-d"),
    (lambda: F.celu(mp.ones(2), 0.0), ValueError, r"celu: alpha must not be 0"),
    (lambda: F.unfold(mp.ones(1, 1, 4, 4, dtype=mp.int64), 2), NotImplementedError,
     r"unfold: not implemented for integer tensors"),
    (lambda: F.unfold(mp.ones(0, 4, 4), 2), RuntimeError, r"unfold: expected an input whose dims are non-zero"),
    (lambda: F.fold(mp.ones(1, 4, 0), (2, 2), 2), RuntimeError, r"fold: expected an input whose dims are non-zero"),
    (lambda: F.rrelu(mp.ones(2), 0.5, 0.1, True), ValueError, r"rrelu: lower \(0.5\) must not be greater"),
    (lambda: F.elu(mp.ones(2), "a"), TypeError, r"elu: alpha must be a number, got str"),
    (lambda: mp.nn.Threshold(0.1), TypeError, r"Threshold\(\) missing required arguments: value"),
    (lambda: mp.nn.ELU(beta=1), TypeError, r"ELU\(\) got an unexpected keyword argument 'beta'"),
])
def test_bad_arguments_raise_a_clear_error(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()


@pytest.mark.parametrize("name,args,shape", [
    ("PixelShuffle", (2,), (2, 8, 3, 3)), ("PixelUnshuffle", (2,), (2, 2, 4, 6)), ("ChannelShuffle", (2,), (2, 4, 3)),
    ("Unfold", ((2, 3), 1, 1, 2), (2, 3, 5, 6)), ("Fold", ((4, 5), (2, 2)), (2, 8, 12))])
def test_rearranging_layers_match_torch(name, args, shape):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    m, t = getattr(mp.nn, name)(*args), getattr(torch.nn, name)(*args)
    np.testing.assert_allclose(m(mp.tensor(x)).numpy(), t(torch.tensor(x)).numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name,shape", [("Dropout1d", (4, 6, 5)), ("Dropout2d", (4, 6, 3, 3)),
                                        ("Dropout3d", (2, 6, 2, 2, 2))])
def test_channel_dropout_layers_drop_whole_channels_in_training_only(name, shape):
    x = mp.ones(*shape)
    layer = getattr(mp.nn, name)(0.5)
    mp.manual_seed(0)
    y = layer(x).numpy().reshape(shape[0], shape[1], -1)
    assert set(np.unique(y)) == {0.0, 2.0} and np.all(y.min(-1) == y.max(-1))  # a channel is all kept or all dropped
    mp.manual_seed(0)
    np.testing.assert_array_equal(layer(x).numpy().reshape(y.shape), y)
    np.testing.assert_array_equal(layer.eval()(x).numpy(), x.numpy())


def test_alpha_dropout_keeps_zero_mean_and_unit_variance():
    mp.manual_seed(0)
    x = mp.randn(200000)
    y = mp.nn.AlphaDropout(0.3)(x).numpy()
    assert abs(y.mean()) < 0.01 and abs(y.std() - 1) < 0.01
    assert np.isclose(y, -1.7580993408473766 / np.sqrt((1.7580993408473766 ** 2 * 0.3 + 1) * 0.7)
                      + 1.7580993408473766 / np.sqrt((1.7580993408473766 ** 2 * 0.3 + 1) * 0.7) * 0.3).mean() > 0.25
