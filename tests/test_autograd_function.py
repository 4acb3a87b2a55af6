"""mp.autograd.Function: several outputs, ctx methods, once_differentiable, setup_context, custom_fwd/custom_bwd;
torch (CPU, float64) as the oracle."""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp


def _lib_function(lib):
    return lib.autograd.Function


def two_outputs(lib, materialize=True):
    class Two(_lib_function(lib)):
        @staticmethod
        def forward(ctx, x, scale):
            ctx.set_materialize_grads(materialize)
            ctx.save_for_backward(x)
            ctx.scale = scale
            return x * scale, x * x

        @staticmethod
        def backward(ctx, g_scaled, g_square):
            (x,) = ctx.saved_tensors
            ctx.received = (g_scaled, g_square)
            gx = g_scaled * ctx.scale if g_scaled is not None else 0
            if g_square is not None:
                gx = gx + g_square * 2 * x
            return gx, None
    return Two


@pytest.mark.parametrize("use", ["both", "first", "second"])
def test_several_outputs_match_torch(use, torch):
    results = []
    for lib in (mp, torch):
        x = lib.tensor([0.5, -2.0], dtype=lib.float64, requires_grad=True)
        a, b = two_outputs(lib).apply(x, 3.0)
        assert a.grad_fn is b.grad_fn and a.grad_fn.name() == "TwoBackward"
        loss = {"both": a.sum() + (b * 2).sum(), "first": a.sum(), "second": b.sum()}[use]
        loss.backward()
        received = a.grad_fn.received if hasattr(a.grad_fn, "received") else None
        results.append((x.grad.numpy().copy(), [None if g is None else g.numpy().copy() for g in received or ()]))
    np.testing.assert_allclose(results[0][0], results[1][0])
    for got, want in zip(results[0][1], results[1][1]):  # materialized zeros for the unused output
        np.testing.assert_array_equal(got, want)
    x = mp.tensor([1.0, 2.0], dtype=mp.float64, requires_grad=True)
    assert mp.autograd.gradcheck(lambda t: two_outputs(mp).apply(t, 3.0), (x,))


def test_set_materialize_grads_false_passes_none(torch):
    for lib in (mp, torch):
        x = lib.tensor([1.0], dtype=lib.float64, requires_grad=True)
        a, b = two_outputs(lib, materialize=False).apply(x, 3.0)
        a.sum().backward()
        assert a.grad_fn.received[1] is None and x.grad.tolist() == [3.0]


def test_mark_non_differentiable(torch):
    for lib in (mp, torch):
        class SortedWithIndex(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                idx = x.argsort() if lib is torch else mp.tensor(np.argsort(x.numpy()))
                y = x * 2
                ctx.mark_non_differentiable(idx)
                return y, idx

            @staticmethod
            def backward(ctx, g, g_idx):
                ctx.g_idx = g_idx
                return g * 2
        x = lib.tensor([3.0, 1.0], dtype=lib.float64, requires_grad=True)
        y, idx = SortedWithIndex.apply(x)
        assert y.requires_grad and not idx.requires_grad and idx.grad_fn is None
        y.sum().backward()
        assert x.grad.tolist() == [2.0, 2.0] and y.grad_fn.g_idx.tolist() == [0, 0]  # a zero gradient


def test_mark_dirty(torch):
    for lib in (mp, torch):
        class MulTwo_(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                x.mul_(2)
                ctx.mark_dirty(x)
                return x

            @staticmethod
            def backward(ctx, g):
                return g * 2
        a = lib.tensor([1.0, 3.0], dtype=lib.float64, requires_grad=True)
        h = a * 1
        out = MulTwo_.apply(h)
        assert out is h and h.grad_fn.name() == "MulTwo_Backward" and h._version == 2
        (h * h).sum().backward()
        np.testing.assert_array_equal(a.grad.numpy(), [8.0, 24.0])  # d/da (2a)^2
        with pytest.raises(RuntimeError, match="leaf .*requires grad .*in-place"):
            MulTwo_.apply(lib.ones(2, dtype=lib.float64, requires_grad=True))


def test_needs_input_grad_and_no_graph_inside_forward():
    seen = {}

    class Probe(mp.autograd.Function):
        @staticmethod
        def forward(ctx, a, b, c):
            seen["needs"], seen["grad"] = ctx.needs_input_grad, mp.is_grad_enabled()
            return a * b

        @staticmethod
        def backward(ctx, g):
            return g, None, None
    Probe.apply(mp.ones(2, requires_grad=True), mp.ones(2), 3)
    assert seen == {"needs": (True, False, False), "grad": False}


def test_once_differentiable(torch):
    for lib in (mp, torch):
        once = mp.autograd.once_differentiable if lib is mp else torch.autograd.function.once_differentiable

        class Square(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            @once
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                assert not lib.is_grad_enabled()
                return 2 * x * g
        x = lib.tensor([1.5], dtype=lib.float64, requires_grad=True)
        (g,) = lib.autograd.grad(Square.apply(x).sum(), x, create_graph=True)
        assert g.tolist() == [3.0] and not g.requires_grad  # no grad_output requires grad: a plain result
        v = lib.tensor([1.0], dtype=lib.float64, requires_grad=True)
        (g,) = lib.autograd.grad(Square.apply(x), x, grad_outputs=v, create_graph=True)
        with pytest.raises(RuntimeError, match="differentiate twice a function that was marked with "
                                               "@once_differentiable"):
            g.sum().backward()


def test_setup_context_style():
    class Cube(mp.autograd.Function):
        @staticmethod
        def forward(x):
            return x ** 3

        @staticmethod
        def setup_context(ctx, inputs, output):
            (x,) = inputs
            ctx.save_for_backward(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x * x * g
    x = mp.tensor([0.5, 2.0], dtype=mp.float64, requires_grad=True)
    assert mp.autograd.gradcheck(Cube.apply, (x,))


def test_wrong_backward_results_are_clear_errors(torch):
    class WrongCount(mp.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, g):
            return g

    class WrongShape(mp.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return mp.ones(3, dtype=mp.float64)
    x = mp.ones(2, dtype=mp.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"WrongCountBackward returned an incorrect number of gradients "
                                           r"\(expected 2, got 1\)"):
        WrongCount.apply(x, mp.ones(2, dtype=mp.float64)).sum().backward()
    with pytest.raises(RuntimeError, match=r"WrongShapeBackward returned an invalid gradient at index 0: got shape "
                                           r"\(3,\), but expected a shape compatible with \(2,\)"):
        WrongShape.apply(x).sum().backward()


def test_returning_an_input_gives_a_new_tensor(torch):
    for lib in (mp, torch):
        class Identity(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x

            @staticmethod
            def backward(ctx, g):
                return g * 5
        x = lib.ones(2, dtype=lib.float64, requires_grad=True)
        y = Identity.apply(x)
        assert y is not x and y.grad_fn is not None
        y.sum().backward()
        assert x.grad.tolist() == [5.0, 5.0]


def test_custom_fwd_bwd_on_a_several_output_dirty_function():
    """custom_fwd casts the inputs and runs forward with autocast off; custom_bwd replays that state."""
    seen = {}

    class ScaleAndNorm(mp.autograd.Function):
        @staticmethod
        @mp.amp.custom_fwd(device_type="cpu", cast_inputs=mp.float32)
        def forward(ctx, x, buf):
            seen["fwd"] = (x.dtype, mp.amp.is_autocast_enabled("cpu"))
            buf.add_(1)
            ctx.mark_dirty(buf)
            ctx.save_for_backward(x)
            return x * 2, (x * x).sum(), buf

        @staticmethod
        @mp.amp.custom_bwd(device_type="cpu")
        def backward(ctx, g2, gs, gbuf):
            seen["bwd"] = mp.amp.is_autocast_enabled("cpu")
            (x,) = ctx.saved_tensors
            return g2 * 2 + gs * 2 * x, gbuf
    x = mp.ones(3, dtype=mp.bfloat16, requires_grad=True)
    buf = mp.zeros(3) * x.float()
    with mp.autocast("cpu"):
        y, s, b = ScaleAndNorm.apply(x, buf)
    assert seen["fwd"] == (mp.float32, False) and y.dtype == mp.float32 and b is buf
    (y.sum() + s + b.sum()).backward()
    assert seen["bwd"] is False and x.grad.dtype == mp.bfloat16
    # 2 from y, 2x from s; buf (0 * x, then + 1 in place) sends 0 * gbuf back to x
    np.testing.assert_array_equal(x.grad.float().numpy(), [4.0] * 3)


def test_a_function_class_is_freed_when_nothing_uses_it():
    import gc
    import weakref
    refs = []
    for _ in range(3):
        class Twice(mp.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2
        x = mp.tensor([1.0], requires_grad=True)
        Twice.apply(x).sum().backward()
        refs.append(weakref.ref(Twice))
        del Twice, x
    gc.collect()
    assert all(r() is None for r in refs)


def test_a_function_may_keep_its_own_class_attributes():
    class Scaled(mp.autograd.Function):
        _op = "user's"  # a name a user may well pick
        factor = 3.0

        @staticmethod
        def forward(ctx, x):
            return x * Scaled.factor

        @staticmethod
        def backward(ctx, g):
            return g * Scaled.factor
    x = mp.tensor([1.0, 2.0], requires_grad=True)
    Scaled.apply(x).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0] and Scaled._op == "user's"
