"""In-place ops under autograd (mixprec/ops/inplace.py): torch's rules, checked against torch (CPU, float64).

A non-leaf may be changed in place and the graph follows (rebase); an op's own
need for the overwritten value is met by saving a copy; backward fails only
when a value some earlier op saved was overwritten; writing into a view updates
its base; leaves that require grad are protected while grad mode is on.
"""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp

A = [0.5, -1.25, 2.0]
C = [3.0, 0.75, -1.5]

# name, the in-place call on b = a * 2 (c is a second tensor requiring grad)
INPLACE = [
    ("add_", lambda b, c: b.add_(c, alpha=2)),
    ("sub_", lambda b, c: b.sub_(c)),
    ("mul_tensor", lambda b, c: b.mul_(c)),
    ("mul_number", lambda b, c: b.mul_(2)),
    ("div_", lambda b, c: b.div_(c)),
    ("pow_", lambda b, c: b.pow_(2)),
    ("clamp_", lambda b, c: b.clamp_(-1, 1.5)),
    ("exp_", lambda b, c: b.exp_()),
    ("sigmoid_", lambda b, c: b.sigmoid_()),
    ("tanh_", lambda b, c: b.tanh_()),
    ("relu_", lambda b, c: b.relu_()),
    ("sin_", lambda b, c: b.sin_()),
    ("addcmul_", lambda b, c: b.addcmul_(c, c, value=0.5)),
    ("copy_", lambda b, c: b.copy_(c)),
    ("fill_", lambda b, c: b.fill_(1.5)),
    ("zero_", lambda b, c: b.zero_()),
    ("setitem", lambda b, c: b.__setitem__(0, c[1])),
    ("setitem-slice", lambda b, c: b.__setitem__(slice(1, None), c[:2] * 3)),
    ("iadd", lambda b, c: b.__iadd__(c)),
    ("imul", lambda b, c: b.__imul__(c)),
]


def _run(lib, fn):
    """b = a * 2, then fn in place on b, then backward of a weighted sum; the grads and b."""
    tensor = lib.tensor
    kw = {"dtype": lib.float64, "requires_grad": True}
    a, c = tensor(A, **kw), tensor(C, **kw)
    b = a * 2
    fn(b, c)
    (b * tensor([1.0, 2.0, 3.0], dtype=lib.float64)).sum().backward()
    grad = lambda t: None if t.grad is None else t.grad.detach().numpy().copy()  # noqa: E731
    return b.detach().numpy().copy(), grad(a), grad(c)


@pytest.mark.parametrize("name,fn", INPLACE, ids=[n for n, _ in INPLACE])
def test_inplace_on_a_non_leaf_matches_torch(name, fn, torch):
    """The value and both gradients, for each op, equal torch's (which clones the old value where it must)."""
    got, want = _run(mp, fn), _run(torch, fn)
    for g, w in zip(got, want):
        if w is None:
            assert g is None
        else:
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-15)


def test_inplace_rebases_the_graph():
    a = mp.tensor(A, dtype=mp.float64, requires_grad=True)
    b = a * 2
    first = b.grad_fn
    b.mul_(3)
    assert b.grad_fn is not first and b.grad_fn.next_functions[0][0] is first  # the old value feeds the new
    assert not b.is_leaf and b.requires_grad and b._version == 1


def test_only_an_overwritten_saved_value_fails_backward(torch):
    """exp saves its output; add saves nothing. torch's error names the op and the versions."""
    for lib in (mp, torch):
        a = lib.tensor(A, dtype=lib.float64, requires_grad=True)
        y = a.exp()
        y.add_(1)
        with pytest.raises(RuntimeError, match=r"modified by an inplace operation|modified by an in-place"):
            y.sum().backward()
        h = a + 1          # add saves nothing: changing its output is fine
        h.mul_(2)
        h.sum().backward()
        np.testing.assert_array_equal(a.grad.numpy(), [2.0, 2.0, 2.0])
    a = mp.tensor(A, dtype=mp.float64, requires_grad=True)
    h = a * 1
    z = h * h              # mul saves h (version 0)
    h.add_(1)
    with pytest.raises(RuntimeError, match=r"gradient of mul has been modified by an in-place operation "
                                           r"\(version 1, expected 0\): input 0 \(input\) of mul"):
        z.sum().backward()


def test_leaf_that_requires_grad_is_protected(torch):
    for lib in (mp, torch):
        w = lib.ones(3, dtype=lib.float64, requires_grad=True)
        with pytest.raises(RuntimeError, match="leaf .*requires grad .*in-place"):
            w.mul_(2)
        with pytest.raises(RuntimeError, match="view of a leaf .*requires grad .*in-place"):
            w[:2].mul_(2)
        with lib.no_grad():
            w.mul_(2)           # parameter updates go under no_grad
        assert w.tolist() == [2.0, 2.0, 2.0] and w.is_leaf


def test_a_leaf_without_grad_becomes_part_of_the_graph(torch):
    for lib in (mp, torch):
        x = lib.tensor(A, dtype=lib.float64, requires_grad=True)
        buf = lib.zeros(3, dtype=lib.float64)
        buf.add_(x * x)
        assert buf.requires_grad and not buf.is_leaf
        buf.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), 2 * np.array(A))


# ------------------------------------------------------------------ views
def _view_case(lib, change):
    a = lib.tensor([1.0, 2.0, 3.0, 4.0], dtype=lib.float64, requires_grad=True)
    h = a * 2
    v = h[1:3]
    change(h, v)
    loss = (h * lib.tensor([1.0, 10.0, 100.0, 1000.0], dtype=lib.float64)).sum() + (v * v).sum()
    loss.backward()
    return h.detach().numpy().copy(), v.detach().numpy().copy(), a.grad.numpy().copy()


VIEW_CHANGES = [
    ("write-through-view", lambda h, v: v.mul_(3)),
    ("write-base-then-use-view", lambda h, v: h.mul_(3)),
    ("write-other-region", lambda h, v: h[3:].mul_(5)),
    ("view-of-view", lambda h, v: v[:1].add_(7)),
    ("setitem-on-base", lambda h, v: h.__setitem__(slice(0, 2), 0.5)),
    ("transposed-view", lambda h, v: h.view(2, 2).T[0].mul_(2)),
]


@pytest.mark.parametrize("name,change", VIEW_CHANGES, ids=[n for n, _ in VIEW_CHANGES])
def test_inplace_through_views_matches_torch(name, change, torch):
    """Writing into a view rebases its base; a view of a base changed since follows the base (never a stale
    gradient)."""
    for g, w in zip(_view_case(mp, change), _view_case(torch, change)):
        np.testing.assert_allclose(g, w, rtol=1e-12)


def test_view_made_under_no_grad_cannot_be_changed_with_grad_on(torch):
    for lib in (mp, torch):
        h = lib.ones(3, dtype=lib.float64, requires_grad=True) * 2
        with lib.no_grad():
            v = h[:2]
        with pytest.raises(RuntimeError, match=r"no_grad.*(in place|inplace).*grad mode"):
            v.mul_(2)


def test_inplace_on_an_expanded_view_is_refused():
    x = mp.ones(3).expand(2, 3)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        x.add_(1)


def test_inplace_integer_results_and_casts(torch):
    """Arithmetic in place cannot turn an integer tensor into floats (torch's error); copies cast."""
    for lib in (mp, torch):
        i = lib.tensor([1, 2, 3])
        with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
            i.add_(1.5)
        i.copy_(lib.tensor([1.9, 2.1, -0.5], dtype=lib.float64))
        i.fill_(2.7)
        assert i.tolist() == [2, 2, 2]


def test_second_order_through_an_inplace_op():
    """The saved copy of the overwritten value keeps its graph: gradients of gradients still work."""
    x = mp.tensor([0.3, -0.7], dtype=mp.float64, requires_grad=True)

    def f(t):
        b = t * 1.5
        b.sin_()           # sin saves its input: the old b, cloned before it is overwritten
        return b.sum()
    (g,) = mp.autograd.grad(f(x), x, create_graph=True)
    np.testing.assert_allclose(g.numpy(), 1.5 * np.cos(1.5 * x.numpy()))
    assert mp.autograd.gradcheck(lambda t: mp.autograd.grad(f(t), t, create_graph=True)[0], (x,))


def test_retain_grad_moves_with_the_inplace_change(torch):
    for lib in (mp, torch):
        a = lib.tensor(A, dtype=lib.float64, requires_grad=True)
        b = a * 2
        b.retain_grad()
        b.mul_(3)
        (b * 2).sum().backward()
        np.testing.assert_array_equal(b.grad.numpy(), [2.0, 2.0, 2.0])
