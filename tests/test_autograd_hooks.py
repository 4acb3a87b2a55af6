"""Hooks and graph inspection: tensor, post-accumulate-grad, node pre/post hooks, next_functions and name(),
saved_tensors_hooks / save_on_cpu, and nn.Module full backward hooks; torch (CPU, float64) as the oracle."""
from __future__ import annotations

import contextlib

import numpy as np
import pytest

import mixprec as mp


def f64(lib, values, requires_grad=True):
    return lib.tensor(values, dtype=lib.float64, requires_grad=requires_grad)


# ------------------------------------------------------------------ the order hooks run in
def _hook_order(lib):
    x = f64(lib, [1.0, 2.0])
    seen = []
    x.register_post_accumulate_grad_hook(lambda t: seen.append(("post-accumulate", t.grad.tolist())))
    x.register_hook(lambda g: seen.append(("leaf tensor hook", g.tolist())))
    y = x * 3
    y.register_hook(lambda g: seen.append(("tensor hook", g.tolist())))
    y.grad_fn.register_prehook(lambda go: seen.append(("node prehook", [g.tolist() for g in go])))
    y.grad_fn.register_hook(lambda gi, go: seen.append(
        ("node hook", [None if g is None else g.tolist() for g in gi], [g.tolist() for g in go])))
    (y * 2).sum().backward()
    return seen


def test_hooks_run_in_torchs_order(torch):
    assert _hook_order(mp) == _hook_order(torch)


def test_hooks_can_replace_gradients(torch):
    for lib in (mp, torch):
        x = f64(lib, [1.0, 2.0])
        y = x * 2
        y.grad_fn.register_prehook(lambda go: (go[0] * 10,))
        z = y * 1
        z.grad_fn.register_hook(lambda gi, go: (gi[0] + 1, None))
        h = y.register_hook(lambda g: g * 100)
        h.remove()
        z.sum().backward()
        assert x.grad.tolist() == [40.0, 40.0]  # (1 + 1) * 10 * 2


@pytest.mark.parametrize("where", ["leaf hook", "retained non-leaf", "accumulator pre-hook"])
def test_a_hook_may_not_change_the_gradients_dtype(where):
    # torch refuses it too ("hook ... has changed the type of value"); .grad keeps the tensor's dtype
    x = mp.tensor([1.0, 2.0], dtype=mp.float64, requires_grad=True)
    y = x * 2
    if where == "leaf hook":
        x.register_hook(lambda g: g.to(mp.float32))
    elif where == "retained non-leaf":
        y.retain_grad()
        y.register_hook(lambda g: g.to(mp.float32))
    else:
        accumulator = x.sum().grad_fn.next_functions[0][0]  # x's AccumulateGrad node (one per leaf)
        accumulator.register_prehook(lambda go: (go[0].to(mp.float32),))
    with pytest.raises(RuntimeError, match="dtype float32, but the tensor has dtype float64"):
        y.sum().backward()
    assert x.grad is None or x.grad.dtype == mp.float64


def test_post_accumulate_grad_hook_fires_as_soon_as_the_leaf_is_done():
    """The engine runs a ready accumulator first: the last layer's weight is final (and its hook has run)
    before the first layer's backward starts, which is what lets DDP overlap communication."""
    w1, w2 = f64(mp, [[0.5, -1.0]]), f64(mp, [[2.0], [1.5]])
    events = []
    w2.register_post_accumulate_grad_hook(lambda t: events.append("w2 accumulated"))
    h = f64(mp, [[1.0, 2.0]], False) @ w1.T
    h.grad_fn.register_prehook(lambda go: events.append("layer 1 backward starts"))
    loss = (h @ w2.T).sum()
    loss.backward()
    assert events == ["w2 accumulated", "layer 1 backward starts"]


def test_post_accumulate_grad_hook_rules(torch):
    for lib in (mp, torch):
        with pytest.raises(RuntimeError, match="non-leaf"):
            (f64(lib, [1.0]) * 2).register_post_accumulate_grad_hook(lambda t: None)
    x = f64(mp, [1.0])
    seen = []
    x.register_post_accumulate_grad_hook(lambda t: seen.append(1))
    mp.autograd.grad((x * 2).sum(), x)  # autograd.grad accumulates nothing: no hook
    assert seen == [] and x.grad is None


def test_tensor_hook_registered_before_an_inplace_change_sees_the_old_value(torch):
    def run(lib):
        a = f64(lib, [1.0, 1.0, 1.0])
        b = a * 2
        seen = []
        b.register_hook(lambda g: seen.append(("before", g.tolist())))
        b.mul_(3)
        b.register_hook(lambda g: seen.append(("after", g.tolist())))
        (b * lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64)).sum().backward()
        return seen
    assert run(mp) == run(torch)


# ------------------------------------------------------------------ graph inspection
def test_next_functions_and_names(torch):
    def shape(lib):
        x = f64(lib, [1.0, 2.0])
        loss = (x * 2).sum()
        mul, nr = loss.grad_fn.next_functions[0]
        (acc, acc_nr), (none, none_nr) = mul.next_functions
        assert acc.variable is x and none is None and nr == acc_nr == none_nr == 0
        assert acc.next_functions == ()
        return len(loss.grad_fn.next_functions), len(mul.next_functions)
    assert shape(mp) == shape(torch)
    x = f64(mp, [1.0, 2.0])
    assert (x * 2).grad_fn.name() == "mulBackward" and x.exp().grad_fn.name() == "expBackward"
    assert type((x * 2).grad_fn.next_functions[0][0]).__name__ == "AccumulateGrad"
    assert isinstance((x * 2).grad_fn, mp.autograd.graph.Node)
    node = (x * 2).grad_fn
    node.metadata["tag"] = "mine"
    assert node.metadata == {"tag": "mine"}


# ------------------------------------------------------------------ saved tensors
def _counts(lib, fn, *shapes):
    events = []

    def pack(t):
        events.append("pack")
        return t

    def unpack(t):
        events.append("unpack")
        return t
    xs = [lib.ones(*s, dtype=lib.float64, requires_grad=True) for s in shapes]
    with lib.autograd.graph.saved_tensors_hooks(pack, unpack):
        out = fn(*xs)
    packs = events.count("pack")
    out.sum().backward()
    return packs, events.count("unpack")


SAVED = [
    ("mul", lambda a, b: a * b, [(3,), (3,)]),
    ("exp saves its output", lambda a: a.exp(), [(3,)]),
    ("add saves nothing", lambda a, b: a + b, [(3,), (3,)]),
    ("relu saves its output", lambda a: a.relu(), [(3,)]),
    ("softmax saves its output", lambda a: a.softmax(0), [(3,)]),
    ("sum saves nothing", lambda a: a.sum(), [(3,)]),
    ("sin saves its input", lambda a: a.sin(), [(3,)]),
    ("chain", lambda a, b: (a * b).exp() + a, [(3,), (3,)]),
]


@pytest.mark.parametrize("name,fn,shapes", SAVED, ids=[s[0] for s in SAVED])
def test_pack_and_unpack_once_per_saved_tensor_as_torch(name, fn, shapes, torch):
    assert _counts(mp, fn, *shapes) == _counts(torch, fn, *shapes)


def test_function_saved_tensors_unpack_on_every_access(torch):
    for lib in (mp, torch):
        class Twice(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x, x)
                return x * 2

            @staticmethod
            def backward(ctx, g):
                ctx.saved_tensors
                ctx.saved_tensors
                return g * 2
        assert _counts(lib, Twice.apply, (3,)) == (2, 4)


def test_hooks_keep_gradients_and_second_derivatives():
    """What unpack_hook returns replaces the saved tensor, autograd identity included: gradients and
    gradients of gradients are unchanged (here the hooks store NumPy copies)."""
    def f(x, w):
        return (x.sin() * w).exp().sum()
    x, w = f64(mp, [0.3, -0.4]), f64(mp, [1.5, 0.5])
    plain = mp.autograd.grad(f(x, w), [x, w], create_graph=True)
    with mp.autograd.graph.saved_tensors_hooks(lambda t: t.numpy().copy(), lambda a: mp.tensor(a)):
        out = f(x, w)
    hooked = mp.autograd.grad(out, [x, w], create_graph=True)
    for a, b in zip(plain, hooked):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy())
    second = [mp.autograd.grad(g.sum(), [x, w]) for g in (plain[0], hooked[0])]
    for a, b in zip(*second):
        np.testing.assert_allclose(a.numpy(), b.numpy())


def test_packed_tensors_belong_to_the_hooks_no_version_check_as_torch(torch):
    """What pack_hook stored is what backward gets, so an in-place change afterwards is no error: a copying pair
    (save_on_cpu on a GPU) gives the value at saving, an identity pair the value now; without hooks it fails."""
    def run(lib, pack, unpack, hooked=True):
        x = f64(lib, [1.0, 2.0])
        with lib.autograd.graph.saved_tensors_hooks(pack, unpack) if hooked else contextlib.nullcontext():
            h = x * 1
            y = h * h
        h.add_(1)
        y.sum().backward()
        return x.grad.numpy()
    for pack, unpack in ((lambda t: t.detach().clone(), lambda t: t), (lambda t: t, lambda t: t)):
        np.testing.assert_allclose(run(mp, pack, unpack), run(torch, pack, unpack))
    assert run(mp, lambda t: t.numpy().copy(), lambda a: mp.tensor(a)).tolist() == [2.0, 4.0]  # 2 * x at saving
    for lib in (mp, torch):
        with pytest.raises(RuntimeError, match="modified by an in-?place operation"):
            run(lib, None, None, hooked=False)


def test_only_the_innermost_hooks_are_used_and_they_can_be_disabled(torch):
    for lib in (mp, torch):
        outer, inner = [], []
        graph = lib.autograd.graph
        x = f64(lib, [1.0])
        with graph.saved_tensors_hooks(lambda t: outer.append(1) or t, lambda t: t):
            with graph.saved_tensors_hooks(lambda t: inner.append(1) or t, lambda t: t):
                x.exp()
        assert (outer, inner) == ([], [1])
        with graph.disable_saved_tensors_hooks("no hooks here"):
            with pytest.raises(RuntimeError, match="no hooks here"):
                with graph.save_on_cpu():
                    pass


def test_inference_tensors_cannot_be_saved(torch):
    for lib in (mp, torch):
        with lib.inference_mode():
            t = lib.ones(2, dtype=lib.float64)
        w = f64(lib, [1.0, 2.0])
        (t + w).sum().backward()  # add saves nothing: allowed
        with pytest.raises(RuntimeError, match="(?i)inference tensors cannot be saved for backward"):
            t * w


def test_save_on_cpu_on_the_cpu_is_a_no_op_that_keeps_gradients():
    x, w = f64(mp, [0.3, -0.4]), f64(mp, [1.5, 0.5])
    plain = mp.autograd.grad((x * w).exp().sum(), [x, w])
    for pin in (False, True):
        with mp.autograd.graph.save_on_cpu(pin_memory=pin):
            out = (x * w).exp().sum()
        for a, b in zip(plain, mp.autograd.grad(out, [x, w])):
            np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.gpu
@pytest.mark.parametrize("pin", [False, True])
def test_save_on_cpu_keeps_activations_on_the_host(pin):
    """On the GPU each saved tensor is packed into a host copy (pinned on request) and comes back to the
    device for backward; the gradients equal those without the hook."""
    x = mp.tensor([0.3, -0.4], dtype=mp.float64, device="cuda", requires_grad=True)
    w = mp.tensor([1.5, 0.5], dtype=mp.float64, device="cuda", requires_grad=True)
    plain = mp.autograd.grad((x * w).exp().sum(), [x, w])
    hooks = mp.autograd.graph.save_on_cpu(pin_memory=pin)
    packed = []
    pack = hooks.pack_hook
    hooks.pack_hook = lambda t: packed.append(pack(t)) or packed[-1]
    with hooks:
        out = (x * w).exp().sum()
    assert packed and all(device.type == "cuda" and isinstance(t._array, np.ndarray) for device, t in packed)
    for a, b in zip(plain, mp.autograd.grad(out, [x, w])):
        assert b.device.type == "cuda"
        np.testing.assert_array_equal(a.numpy(), b.numpy())


# ------------------------------------------------------------------ nn.Module full backward hooks
def _module_hooks(lib):
    lib.manual_seed(0)
    net = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.ReLU(), lib.nn.Linear(4, 2)).double()
    with lib.no_grad():
        for i, p in enumerate(net.parameters()):
            p.copy_(lib.tensor(np.linspace(-1, 1, p.numel()).reshape(tuple(p.shape)) * (i + 1), dtype=lib.float64))
    seen = []
    last = net[2]
    last.register_full_backward_pre_hook(lambda m, go: seen.append(("pre", [g.tolist() for g in go])))
    last.register_full_backward_hook(lambda m, gi, go: seen.append(("full", [g.tolist() for g in gi],
                                                                     [g.tolist() for g in go])))
    first = net[0]
    first.register_full_backward_hook(lambda m, gi, go: seen.append(("first", [g is None for g in gi])))
    first.register_full_backward_pre_hook(lambda m, go: (go[0] * 2,))  # doubles everything below it
    x = lib.tensor([[0.5, -1.0, 2.0], [1.0, 0.0, -0.5]], dtype=lib.float64, requires_grad=True)
    (net(x) * lib.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=lib.float64)).sum().backward()
    return seen, [p.grad.numpy().copy() for p in net.parameters()]


def test_module_full_backward_hooks_match_torch(torch):
    mine, theirs = _module_hooks(mp), _module_hooks(torch)
    assert [e[0] for e in mine[0]] == [e[0] for e in theirs[0]]
    for a, b in zip(mine[0], theirs[0]):
        for x, y in zip(a[1:], b[1:]):
            np.testing.assert_allclose(np.array(x, dtype=float), np.array(y, dtype=float))
    for a, b in zip(mine[1], theirs[1]):
        np.testing.assert_allclose(a, b)


def test_module_full_backward_hook_can_replace_grad_input_and_be_removed():
    lin = mp.nn.Linear(2, 2).double()
    x = mp.ones(1, 2, dtype=mp.float64, requires_grad=True)
    handle = lin.register_full_backward_hook(lambda m, gi, go: (gi[0] * 0,))
    lin(x).sum().backward()
    assert x.grad.tolist() == [[0.0, 0.0]]
    handle.remove()
    x.grad = None
    lin(x).sum().backward()
    assert x.grad.tolist() != [[0.0, 0.0]]
    with mp.no_grad():  # nothing to hook without a graph
        lin.register_full_backward_hook(lambda m, gi, go: 1 / 0)
        lin(x)


def test_saves_declarations_are_checked(user_ops):
    """A backward that reads what its op does not save fails naming it; a wrong name fails at registration;
    the default keeps every argument, *args included."""
    def cube(ctx, input):
        return input ** 3
    op = user_ops("test_cube_saves_output", cube, saves=("output",))
    op.grad(lambda ctx, g: (g * 3 * ctx.inputs[0] ** 2,))  # reads the input it did not declare
    op.jvp(lambda ctx, t: t * 3 * ctx.inputs[0] ** 2)
    x = f64(mp, [1.0, 2.0])
    with pytest.raises(RuntimeError, match=r"backward used input 0 \(input\) of test_cube_saves_output, which the "
                                           r"op does not save.*saves="):
        op(x).sum().backward()
    with pytest.raises(ValueError, match="names 'weight', which is neither an argument"):
        user_ops("test_bad_saves", cube, saves=("weight",))

    def product(ctx, *factors):
        out = factors[0]
        for f in factors[1:]:
            out = out * f
        return out
    prod = user_ops("test_product_of_all", product)
    prod.grad(lambda ctx, g: tuple(g * ctx.output / f for f in ctx.inputs))
    with pytest.raises(RuntimeError, match="output 0 of test_product_of_all"):
        prod(x, f64(mp, [3.0, 4.0])).sum().backward()
    prod2 = user_ops("test_product_of_all_2", product, saves=("factors", "output"))
    prod2.grad(lambda ctx, g: tuple(g * ctx.output / f for f in ctx.inputs))
    y = f64(mp, [3.0, 4.0])
    prod2(x, y).sum().backward()
    assert x.grad.tolist() == [3.0, 4.0] and y.grad.tolist() == [1.0, 2.0]


def test_register_multi_grad_hook_as_torchs(torch):
    """mode "all": once per backward pass, None for tensors the pass does not reach; mode "any": the first
    gradient to arrive. Side by side with torch, non-leaf tensors included."""
    seen = {}
    for lib in (torch, mp):
        log = seen[lib] = []
        a, b, c = (lib.ones(2, requires_grad=True) for _ in range(3))
        mid = a * 4

        def as_list(g):
            return None if g is None else g.tolist()
        h = lib.autograd.graph.register_multi_grad_hook(
            (a, b, c, mid), lambda gs: log.append(("all", [as_list(g) for g in gs])))
        (mid + b * 3).sum().backward()
        (a * 5).sum().backward()
        (c * 7).sum().backward()
        h.remove()
        (a * 2 + b).sum().backward()  # removed: not called
        h = lib.autograd.graph.register_multi_grad_hook((a, b), lambda g: log.append(("any", as_list(g))), mode="any")
        (a * 2 + b * 3).sum().backward()
        h.remove()
    assert seen[mp] == seen[torch]
    assert len(seen[mp]) == 4
    with pytest.raises(ValueError, match="register_multi_grad_hook: mode must be 'all' or 'any'"):
        mp.autograd.graph.register_multi_grad_hook([mp.ones(1, requires_grad=True)], print, mode="some")
    with pytest.raises(ValueError, match="tensors that require grad"):
        mp.autograd.graph.register_multi_grad_hook([mp.ones(1)], print)
