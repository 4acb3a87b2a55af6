"""The reverse-mode engine: accumulation, retain_graph, grad modes, autograd.grad, Function, anomaly mode."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import mixprec as mp


def f64(values, requires_grad=True, device="cpu"):
    return mp.tensor(values, dtype=mp.float64, requires_grad=requires_grad, device=device)


# ------------------------------------------------------------------ accumulation and graph shape
def test_gradients_accumulate_into_leaves_over_two_backwards(device):
    x = f64([1.0, 2.0], device=device)
    (x * x).sum().backward()
    (3 * x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2 + 3, 4 + 3])


def test_shared_subexpressions_sum_their_paths(device):
    """z = y*y + y with y = 2x: dz/dx = (2y + 1) * 2, visiting y's node once in topological order."""
    x = f64([0.5, -1.0], device=device)
    y = x * 2
    z = (y * y + y).sum()
    z.backward()
    np.testing.assert_allclose(x.grad.numpy(), (2 * 2 * np.array([0.5, -1.0]) + 1) * 2)


def test_a_leaf_used_twice_in_one_op(device):
    x = f64([3.0], device=device)
    (x * x).backward()
    assert x.grad.item() == 6.0


def test_long_chains_do_not_recurse():
    x = f64([1.0])
    y = x
    for _ in range(3000):
        y = y * 1.0001
    y.backward()
    np.testing.assert_allclose(x.grad.item(), 1.0001 ** 3000)


def test_broadcast_gradients_are_reduced_to_each_input_shape(device):
    a = f64(np.ones((2, 1, 3)), device=device)
    b = f64(np.ones((4, 1)), device=device)
    c = f64(2.0, device=device)
    (a * b * c).sum().backward()
    assert a.grad.shape == (2, 1, 3) and b.grad.shape == (4, 1) and c.grad.shape == ()
    np.testing.assert_array_equal(a.grad.numpy(), np.full((2, 1, 3), 4 * 2.0))
    np.testing.assert_array_equal(b.grad.numpy(), np.full((4, 1), 6 * 2.0))
    assert c.grad.item() == 24.0


def test_each_leaf_gets_its_own_dtype_and_shape(device):
    """A float16 leaf and a float32 leaf in one op (promoted to float32): each grad in its leaf's dtype."""
    h = mp.tensor([1.0, 2.0, 3.0], dtype=mp.float16, requires_grad=True, device=device)
    w = mp.tensor([[0.5], [2.0]], dtype=mp.float32, requires_grad=True, device=device)
    b = mp.tensor(1.0, dtype=mp.bfloat16, requires_grad=True, device=device)
    out = h * w + b
    assert out.dtype == mp.float32 and out.shape == (2, 3)
    out.sum().backward()
    assert (h.grad.dtype, h.grad.shape) == (mp.float16, (3,))
    assert (w.grad.dtype, w.grad.shape) == (mp.float32, (2, 1))
    assert (b.grad.dtype, b.grad.shape) == (mp.bfloat16, ())
    np.testing.assert_array_equal(h.grad.numpy(), [2.5, 2.5, 2.5])
    np.testing.assert_array_equal(w.grad.numpy(), [[6.0], [6.0]])
    assert b.grad.item() == 6.0


def test_backward_on_a_tensor_without_grad_is_an_error():
    with pytest.raises(RuntimeError, match="does not require grad"):
        mp.ones(2).sum().backward()
    x = mp.ones(2, requires_grad=True)
    with mp.no_grad():
        y = (x * 2).sum()
    with pytest.raises(RuntimeError, match="no_grad"):
        y.backward()


def test_backward_inputs_limits_accumulation():
    x, y = f64([1.0]), f64([2.0])
    (x * y).backward(inputs=[x])
    assert x.grad.item() == 2.0 and y.grad is None


# ------------------------------------------------------------------ retain_graph
def test_second_backward_needs_retain_graph():
    x = f64([1.0, 2.0])
    loss = (x.exp() * x).sum()
    loss.backward(retain_graph=True)
    first = x.grad.numpy().copy()
    loss.backward()  # the graph was kept
    np.testing.assert_allclose(x.grad.numpy(), 2 * first)
    with pytest.raises(RuntimeError, match=r"second time.*retain_graph=True"):
        loss.backward()


def test_freed_graph_error_names_the_op():
    x = f64([1.0])
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match=r"through sum.*pass retain_graph=True"):
        y.backward()


# ------------------------------------------------------------------ grad modes
def test_no_grad_and_enable_grad():
    x = mp.ones(2, requires_grad=True)
    with mp.no_grad():
        assert not mp.is_grad_enabled()
        y = x * 2
        with mp.enable_grad():
            z = x * 2
    assert mp.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None
    assert z.requires_grad and z.grad_fn is not None


def test_no_grad_as_decorator_and_set_grad_enabled():
    x = mp.ones(2, requires_grad=True)

    @mp.no_grad()
    def double(t):
        return t * 2
    assert not double(x).requires_grad and mp.is_grad_enabled()
    mp.set_grad_enabled(False)
    try:
        assert not (x * 2).requires_grad
    finally:
        mp.set_grad_enabled(True)
    assert (x * 2).requires_grad


def test_no_grad_restores_on_exception():
    with pytest.raises(ValueError):
        with mp.no_grad():
            raise ValueError("boom")
    assert mp.is_grad_enabled()


def test_no_grad_is_thread_local():
    """A thread inside no_grad does not switch grad mode off for another thread."""
    x = mp.ones(2, requires_grad=True)
    inside, finish = threading.Event(), threading.Event()
    seen = {}

    def worker():
        with mp.no_grad():
            inside.set()
            finish.wait(5)
            seen["worker"] = (x * 2).requires_grad

    t = threading.Thread(target=worker)
    t.start()
    assert inside.wait(5)
    seen["main"] = (x * 2).requires_grad  # while the worker sits inside no_grad
    finish.set()
    t.join(5)
    assert seen == {"main": True, "worker": False}

    with mp.no_grad():  # and a new thread starts with grad enabled whatever its parent does
        t = threading.Thread(target=lambda: seen.__setitem__("fresh", mp.is_grad_enabled()))
        t.start()
        t.join(5)
    assert seen["fresh"] is True


# ------------------------------------------------------------------ autograd.grad
def test_grad_returns_instead_of_accumulating():
    x, y = f64([1.0, 2.0]), f64([3.0, 4.0])
    gx, gy = mp.autograd.grad((x * y).sum(), [x, y])
    assert gx.tolist() == [3.0, 4.0] and gy.tolist() == [1.0, 2.0]
    assert x.grad is None and y.grad is None


def test_grad_with_grad_outputs_and_unused_inputs():
    x, unused = f64([1.0, 2.0]), f64([5.0])
    (gx, gu) = mp.autograd.grad(x * 3, [x, unused], grad_outputs=f64([1.0, 10.0], requires_grad=False),
                                allow_unused=True)
    assert gx.tolist() == [3.0, 30.0] and gu is None
    with pytest.raises(RuntimeError, match="allow_unused"):
        mp.autograd.grad((x * 3).sum(), [x, unused], allow_unused=False)
    with pytest.raises(RuntimeError, match=r"index 1 \(shape \(1,\)\).*allow_unused=True"):  # torch's default
        mp.autograd.grad((x * 3).sum(), [x, unused])
    with pytest.raises(RuntimeError, match="does not require grad"):
        mp.autograd.grad((x * 3).sum(), [mp.ones(1)])
    with pytest.raises(RuntimeError, match="scalar outputs"):
        mp.autograd.grad(x * 3, [x])


def test_higher_order_derivatives(device):
    """x**3: first 3x^2, second 6x, third 6 -- each gradient is itself differentiable."""
    x = f64([0.5, 2.0, -1.0], device=device)
    y = (x ** 3).sum()
    (g1,) = mp.autograd.grad(y, x, create_graph=True)
    (g2,) = mp.autograd.grad(g1.sum(), x, create_graph=True)
    (g3,) = mp.autograd.grad(g2.sum(), x)
    xs = np.array([0.5, 2.0, -1.0])
    np.testing.assert_allclose(g1.numpy(), 3 * xs ** 2)
    np.testing.assert_allclose(g2.numpy(), 6 * xs)
    np.testing.assert_allclose(g3.numpy(), [6.0, 6.0, 6.0])
    assert g1.requires_grad and not g3.requires_grad


def test_higher_order_through_transcendental_ops():
    """d2/dx2 sin(x) * exp(x) = 2 cos(x) exp(x)."""
    x = f64([0.3, 1.1])
    (g1,) = mp.autograd.grad((x.sin() * x.exp()).sum(), x, create_graph=True)
    (g2,) = mp.autograd.grad(g1.sum(), x)
    xs = np.array([0.3, 1.1])
    np.testing.assert_allclose(g2.numpy(), 2 * np.cos(xs) * np.exp(xs))


def test_gradient_penalty_style_double_backward():
    """backward() through a graph that contains a gradient (create_graph=True)."""
    w = f64([1.5, -0.5])
    x = f64([2.0, 3.0], requires_grad=True)
    (gx,) = mp.autograd.grad((w * x * x).sum(), x, create_graph=True)  # 2 w x
    penalty = (gx * gx).sum()  # 4 w^2 x^2 -> d/dw = 8 w x^2
    penalty.backward()
    np.testing.assert_allclose(w.grad.numpy(), 8 * np.array([1.5, -0.5]) * np.array([4.0, 9.0]))


# ------------------------------------------------------------------ custom Function
class Cube(mp.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale=1.0):
        ctx.save_for_backward(x)
        ctx.scale = scale
        return x * x * x * scale

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x * x * ctx.scale, None


def test_custom_function_forward_backward_and_gradcheck():
    x = f64([0.5, -1.5, 2.0])
    y = Cube.apply(x, 2.0)
    assert y.grad_fn is not None and y.grad_fn.name() == "CubeBackward"
    np.testing.assert_allclose(y.numpy(), 2 * np.array([0.5, -1.5, 2.0]) ** 3)
    assert mp.autograd.gradcheck(lambda t: Cube.apply(t, 2.0), (x,))


def test_custom_function_second_derivative():
    x = f64([0.5, 2.0])
    (g,) = mp.autograd.grad(Cube.apply(x).sum(), x, create_graph=True)
    (g2,) = mp.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(g2.numpy(), [3.0, 12.0])


def test_custom_function_needs_input_grad_and_no_grad_inside_forward():
    seen = {}

    class Probe(mp.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            seen["needs"] = ctx.needs_input_grad
            seen["grad_mode"] = mp.is_grad_enabled()
            return a * b

        @staticmethod
        def backward(ctx, g):
            return g, None

    Probe.apply(f64([1.0]), f64([2.0], requires_grad=False))
    assert seen == {"needs": (True, False), "grad_mode": False}


def test_custom_function_saved_tensor_modified_in_place_is_detected():
    x = f64([1.0, 2.0])
    base = x * 1
    y = Cube.apply(base)
    with mp.no_grad():
        base.add_(1)
    with pytest.raises(RuntimeError, match="saved by Cube.*modified by an in-place operation"):
        y.sum().backward()


def test_custom_function_must_return_a_tensor():
    class Bad(mp.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.numpy()

    with pytest.raises(TypeError, match="must return one Tensor"):
        Bad.apply(f64([1.0]))


def test_gradcheck_catches_a_wrong_backward_and_refuses_float32():
    class Wrong(mp.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x  # should be 2 x

    x = f64([1.0, 2.0])
    with pytest.raises(AssertionError, match="Jacobian mismatch"):
        mp.autograd.gradcheck(Wrong.apply, (x,))
    assert mp.autograd.gradcheck(Wrong.apply, (x,), raise_exception=False) is False
    with pytest.raises(TypeError, match="float64"):
        mp.autograd.gradcheck(mp.exp, (mp.ones(2, requires_grad=True),))


# ------------------------------------------------------------------ in-place checks
def test_input_saved_for_backward_modified_in_place_is_detected():
    x = f64([1.0, 2.0])
    a = x * 1
    b = a * a  # mul saves its inputs
    with mp.no_grad():
        a.mul_(2)
    with pytest.raises(RuntimeError, match=r"gradient of mul has been modified by an in-place.*version 1, expected 0"):
        b.sum().backward()


def test_output_saved_for_backward_modified_in_place_is_detected():
    x = f64([1.0, 2.0])
    y = x.exp()  # exp's backward uses its output
    with mp.no_grad():
        y.add_(1)
    with pytest.raises(RuntimeError, match="output of exp.*in-place"):
        y.sum().backward()


def test_in_place_change_through_a_view_is_detected():
    x = f64([[1.0, 2.0], [3.0, 4.0]])
    a = x * 1
    b = (a * a).sum()
    v = a.reshape(4)  # shares a's version counter
    with mp.no_grad():
        v.zero_()
    with pytest.raises(RuntimeError, match="modified by an in-place"):
        b.backward()


# ------------------------------------------------------------------ anomaly mode
@pytest.mark.filterwarnings("ignore:.*anomaly:UserWarning")
def test_detect_anomaly_fails_on_nan_not_on_inf_as_torchs(torch):
    """check_nan=True: an inf gradient (sqrt at 0) passes, a NaN one (sqrt of a negative) names the forward op."""
    with np.errstate(divide="ignore", invalid="ignore"):
        for lib, make in ((torch, lambda v: torch.tensor(v, dtype=torch.float64, requires_grad=True)),
                          (mp, lambda v: f64(v))):
            with lib.autograd.detect_anomaly(check_nan=True):
                x = make([0.0, 1.0])
                x.sqrt().sum().backward()  # d sqrt / dx at 0 is inf: not an anomaly
                assert np.isinf(x.grad.numpy()[0])
                with pytest.raises(RuntimeError, match=r"(?i)sqrtBackward0?'? returned nan values"):
                    make([-1.0]).sqrt().sum().backward()
    with mp.autograd.detect_anomaly(), np.errstate(invalid="ignore"):
        with pytest.raises(RuntimeError, match=r"sqrtBackward returned NaN(.|\n)*forward call of sqrt"):
            f64([-1.0]).sqrt().sum().backward()


def test_without_anomaly_mode_nan_gradients_pass_silently():
    x = f64([0.0, 1.0])
    with np.errstate(divide="ignore"):
        x.sqrt().sum().backward()
    assert np.isinf(x.grad.numpy()[0])


def test_detect_anomaly_restores_and_is_quiet_on_finite_grads():
    x = f64([1.0, 4.0])
    with mp.autograd.detect_anomaly():
        assert mp.autograd.is_anomaly_enabled()
        x.sqrt().sum().backward()
    assert not mp.autograd.is_anomaly_enabled()
    np.testing.assert_allclose(x.grad.numpy(), [0.5, 0.25])


def test_basic_index_is_a_view_sharing_the_version_counter():
    """x[0] shares memory with x, so an in-place change through it is seen by x's saved-tensor checks;
    advanced indexing copies and does not."""
    x = f64([[1.0, 2.0], [3.0, 4.0]])
    a = x * 1
    b = (a * a).sum()
    row = a.detach()[0]
    assert row._version == a._version
    with mp.no_grad():
        row.mul_(2)
    assert a.tolist() == [[2.0, 4.0], [3.0, 4.0]] and a._version == 1
    with pytest.raises(RuntimeError, match="modified by an in-place"):
        b.backward()
    copy = a.detach()[[0, 0]]
    with mp.no_grad():
        copy.zero_()
    assert a._version == 1 and a.tolist() == [[2.0, 4.0], [3.0, 4.0]]


def test_leaf_grads_are_owned_writable_and_never_aliased():
    """Optimizers and the grad scaler update .grad in place, so a leaf's grad must be its own array:
    not another leaf's (add passes one gradient to both inputs), not a read-only broadcast view
    (sum's gradient is an expand), not the caller's seed, not a tensor a custom backward returned."""
    a, b = mp.ones(3, requires_grad=True), mp.ones(3, requires_grad=True)
    (a + b).sum().backward()
    assert a.grad is not b.grad and not np.shares_memory(a.grad._array, b.grad._array)
    for g in (a.grad, b.grad):
        assert g._array.flags.writeable and g._array.flags.c_contiguous
    a.grad._array *= 0.5  # an in-place unscale touches only a's gradient
    assert a.grad.tolist() == [0.5] * 3 and b.grad.tolist() == [1.0] * 3

    seed = mp.full((3,), 2.0)
    c = mp.ones(3, requires_grad=True)
    (c * 1).backward(seed)
    assert not np.shares_memory(c.grad._array, seed._array)

    keep = mp.full((2,), 7.0)

    class ReturnsSaved(mp.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return keep

    d = mp.ones(2, requires_grad=True)
    ReturnsSaved.apply(d).sum().backward()
    assert not np.shares_memory(d.grad._array, keep._array)


def test_later_gradients_accumulate_in_place():
    x = mp.ones(2, requires_grad=True)
    (x * 2).sum().backward()
    g = x.grad
    (x * 3).sum().backward()
    assert x.grad is g and g.tolist() == [5.0, 5.0] and g._version == 1


def test_retained_grad_is_not_aliased_with_a_leaf_grad():
    x = mp.ones(3, requires_grad=True)
    y = x + 0  # add hands its incoming gradient straight on to x
    y.retain_grad()
    y.sum().backward()
    assert y.grad.tolist() == [1.0] * 3 and x.grad.tolist() == [1.0] * 3
    assert not np.shares_memory(y.grad._array, x.grad._array)
    y.grad._array[0] = 5.0
    assert x.grad.tolist() == [1.0] * 3


# ------------------------------------------------------------------ torch.autograd's entry points and checks
def test_autograd_backward_with_inputs_matches_torch(torch):
    """autograd.backward(tensors, grad_tensors, inputs=): only the listed tensors' .grad change, a non-leaf
    among them included."""
    results = []
    for lib in (mp, torch):
        x = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
        w = lib.tensor([3.0, -1.0], dtype=lib.float64, requires_grad=True)
        h = x * w
        out1, out2 = h.exp(), (h * h).sum()
        lib.autograd.backward([out1, out2], [lib.tensor([1.0, 0.5], dtype=lib.float64), None], inputs=[w, h])
        results.append((x.grad, w.grad.numpy().copy(), h.grad.numpy().copy()))
    assert results[0][0] is None and results[1][0] is None
    for a, b in zip(results[0][1:], results[1][1:]):
        np.testing.assert_allclose(a, b)


def test_grad_materialize_grads_and_allow_unused_rules(torch):
    for lib in (mp, torch):
        x, u = f64([1.0, 2.0]), f64([5.0])
        if lib is torch:
            x, u = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True), \
                torch.tensor([5.0], dtype=torch.float64, requires_grad=True)
        gx, gu = lib.autograd.grad((x * 2).sum(), [x, u], materialize_grads=True)
        assert gu.tolist() == [0.0] and gx.tolist() == [2.0, 2.0]
        with pytest.raises((RuntimeError, ValueError), match="allow_unused"):
            lib.autograd.grad((x * 2).sum(), [x, u], materialize_grads=True, allow_unused=False)


def test_gradgradcheck_and_gradcheck_error():
    x = f64([0.4, -0.3])
    assert mp.autograd.gradgradcheck(lambda t: (t.sin() * t).sum() * t, (x,))
    assert mp.autograd.gradgradcheck(lambda t: t.exp() * t, (x,), check_fwd_over_rev=True)

    class DetachedSecond(mp.autograd.Function):
        """Right first derivative, but backward uses a detached copy, so the second derivative is wrong."""
        @staticmethod
        def forward(ctx, t):
            ctx.save_for_backward(t)
            return t ** 3

        @staticmethod
        def backward(ctx, g):
            (t,) = ctx.saved_tensors
            return g * 3 * t.detach() ** 2
    assert mp.autograd.gradcheck(DetachedSecond.apply, (x,))
    with pytest.raises(mp.autograd.GradcheckError, match="Jacobian mismatch") as info:
        mp.autograd.gradgradcheck(DetachedSecond.apply, (x,))
    assert isinstance(info.value, RuntimeError)
    assert mp.autograd.gradgradcheck(DetachedSecond.apply, (x,), raise_exception=False) is False


def test_gradcheck_forward_mode_and_fast_mode():
    x, w = f64([0.4, -0.3, 1.1]), f64([[0.5, 1.0, -2.0], [0.1, 0.2, 0.3]])
    fn = lambda a, b: (b @ a.tanh()).softmax(0)  # noqa: E731
    assert mp.autograd.gradcheck(fn, (x, w), check_forward_ad=True)
    assert mp.autograd.gradcheck(fn, (x, w), fast_mode=True, check_forward_ad=True)

    class WrongJvp(mp.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

        @staticmethod
        def jvp(ctx, t):
            return t * 3
    with pytest.raises(mp.autograd.GradcheckError, match="forward mode"):
        mp.autograd.gradcheck(WrongJvp.apply, (x,), check_forward_ad=True)
    with pytest.raises(mp.autograd.GradcheckError, match="fast mode"):
        mp.autograd.gradcheck(WrongJvp.apply, (x,), check_forward_ad=True, check_backward_ad=False, fast_mode=True)


def test_graph_of_ops_without_saved_tensors_is_still_used_once():
    """Without retain_graph a graph can be backpropagated once (stricter than torch, which allows it again
    through nodes that saved nothing): the error names the first node reached."""
    x = f64([1.0])
    y = (x + 1).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="through sum.*retain_graph=True"):
        y.backward()


# ------------------------------------------------------------------ the one front door
def test_a_node_is_built_once_and_only_releases_what_it_saved():
    x = f64([1.0, 2.0])
    y = x.exp()  # saves its output
    node = y.grad_fn
    assert isinstance(node.ctx, mp.autograd.graph.Notes) and node.ctx is not node  # forward's notes, apart
    before = {k: v for k, v in vars(node).items() if k not in ("saved", "_saved_outputs", "ctx", "freed")}
    assert node._saved_outputs is not None
    y.sum().backward()
    after = {k: v for k, v in vars(node).items() if k not in ("saved", "_saved_outputs", "ctx", "freed")}
    assert after == before and node.freed and node.saved is None and node._saved_outputs is None
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.sum().backward()


def test_a_rule_cannot_be_registered_twice(user_ops):
    op = user_ops("twice_ruled", lambda ctx, input: input * 2)
    op.grad(lambda ctx, g: (g * 2,))
    with pytest.raises(ValueError, match="already has a backward"):
        op.grad(lambda ctx, g: (g * 3,))
    with pytest.raises(ValueError, match="already has a backward"):
        op.partials(lambda ctx: (2.0,))
    op.jvp(lambda ctx, t: t * 2)
    with pytest.raises(ValueError, match="already has a tangent rule"):
        op.jvp(lambda ctx, t: t * 3)


def test_every_built_in_op_keeps_the_rules_it_registered():
    """No built-in rule was registered twice (it would raise at import), and a differentiable op has a backward."""
    missing = [op.name for op in mp.ops.ops() if op.differentiable and not op.composite and op.backward is None]
    assert not missing


def test_a_custom_function_goes_through_dispatch_where_observers_see_it():
    class Double(mp.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    class Seen:
        def __init__(self):
            self.names = []

        def enter(self, call):
            self.names.append((call.name, call.depth))

        def exit(self, call):
            pass
    seen = Seen()
    x = f64([1.0])
    with mp.observers.observe(seen):
        y = Double.apply(x)
    assert seen.names == [("Double", 0), ("mul", 1)]  # its forward's ops are its children
    assert y.grad_fn.name() == "DoubleBackward" and y.grad_fn.op.cls is Double
    y.sum().backward()
    assert x.grad.tolist() == [2.0]


def test_requires_grad_on_a_tensor_with_history_keeps_it(torch):
    for lib in (mp, torch):
        x = lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64, requires_grad=True)
        y = x * 2
        y.requires_grad_()
        view = (x * 1.0)[1:]
        view.requires_grad_(True)
        assert y.grad_fn is not None and not y.is_leaf and view.grad_fn is not None
        (y.sum() + view.sum()).backward()
        assert x.grad.tolist() == [2.0, 3.0, 3.0]


def test_grad_takes_a_generator_of_inputs_as_torchs(torch):
    """autograd.grad(loss, model.parameters(), create_graph=True): the gradient-penalty recipe, verbatim."""
    torch.manual_seed(0)
    tm = torch.nn.Linear(3, 2)
    m = mp.nn.Linear(3, 2)
    m.load_state_dict({k: mp.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    tg = torch.autograd.grad((tm(torch.tensor(x)) ** 2).sum(), inputs=tm.parameters(), create_graph=True)
    g = mp.autograd.grad((m(mp.tensor(x)) ** 2).sum(), inputs=m.parameters(), create_graph=True)
    assert len(g) == len(tg) == 2 and all(t.grad_fn is not None for t in g)
    for a, b in zip(g, tg):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)
    sum((t ** 2).sum() for t in g).backward()  # the penalty is differentiable
    assert m.weight.grad is not None
    with pytest.raises(TypeError, match="grad: inputs must be a Tensor or an iterable of Tensors, got str"):
        mp.autograd.grad(g[0].sum(), "weight")


# ------------------------------------------------------------------ torch.autograd.graph's API
def test_gradient_edges_are_grad_inputs_as_torchs(torch):
    """get_gradient_edge(t) names where t's gradient goes; grad(..., inputs=edge) gives the gradient there."""
    results = {}
    for lib, make in ((torch, lambda: torch.tensor([0.5, 1.0, 2.0], requires_grad=True)),
                      (mp, lambda: mp.tensor([0.5, 1.0, 2.0], requires_grad=True))):
        from_graph = lib.autograd.graph
        a = make()
        b = a * 2
        c = b.exp().sum()
        edge = from_graph.get_gradient_edge(b)
        assert isinstance(edge, from_graph.GradientEdge) and edge.node is b.grad_fn and edge.output_nr == 0
        assert type(from_graph.get_gradient_edge(a).node).__name__ == "AccumulateGrad"
        (g_edge,) = lib.autograd.grad(c, edge, retain_graph=True)
        g_list = lib.autograd.grad(c, [edge, a])
        results[lib] = [g.detach().numpy() for g in (g_edge, *g_list)]
        with pytest.raises(RuntimeError):
            from_graph.get_gradient_edge(lib.ones(2))
    for x, y in zip(results[mp], results[torch]):
        np.testing.assert_allclose(x, y, rtol=1e-6)


def test_saved_attributes_of_grad_fn_as_torchs(torch):
    """grad_fn._saved_self / _saved_other / _saved_result / _saved_dim: what backward keeps, by torch's names."""
    ta, a = torch.tensor([1.0, 2.0], requires_grad=True), mp.tensor([1.0, 2.0], requires_grad=True)
    tb, b = torch.tensor([3.0, 4.0], requires_grad=True), mp.tensor([3.0, 4.0], requires_grad=True)
    prod, tprod = a * b, ta * tb
    assert prod.grad_fn._saved_self is a and tprod.grad_fn._saved_self is ta  # the input itself
    assert prod.grad_fn._saved_other is b and tprod.grad_fn._saved_other is tb
    e, te = a.exp(), ta.exp()
    np.testing.assert_allclose(e.grad_fn._saved_result.detach().numpy(), te.grad_fn._saved_result.detach().numpy())
    assert a.sum(0).grad_fn._saved_dim in (0, (0,)) and ta.sum(0).grad_fn._saved_dim == (0,)
    for lib_e in (e, te):
        with pytest.raises(AttributeError):
            lib_e.grad_fn._saved_self  # exp keeps its result, not its input
    e.sum().backward()
    te.sum().backward()
    for lib_e in (e, te):
        with pytest.raises(RuntimeError, match="(?i)backward through the graph a second time"):
            lib_e.grad_fn._saved_result


def test_set_multithreading_enabled_is_accepted_as_torchs(torch):
    for lib in (torch, mp):
        x = lib.ones(2, requires_grad=True)
        with lib.autograd.set_multithreading_enabled(False):
            (x * 3).sum().backward()
        assert x.grad.numpy().tolist() == [3.0, 3.0]
        lib.autograd.set_multithreading_enabled(True)  # a plain call, and a decorator
        assert lib.autograd.set_multithreading_enabled(False)(lambda: (x * 2).sum())().item() == 4.0
    with pytest.raises(TypeError, match="set_multithreading_enabled: mode must be True or False"):
        mp.autograd.set_multithreading_enabled("no")
