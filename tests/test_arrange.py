"""mixprec/ops/arrange.py beyond the op cases: which results are views, shape functions, errors, torch's values."""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp


@pytest.mark.parametrize("make", [
    lambda x: x.view_as(mp.zeros(6, 2)), lambda x: x.movedim(0, 1), lambda x: mp.broadcast_to(x[:1], (5, 3, 4)),
    lambda x: x.unflatten(1, (2, 2)), lambda x: mp.slice(x, 1, 0, 4, 2), lambda x: x.tensor_split(2, 1)[1],
    lambda x: mp.meshgrid(x[0, 0], x[1, 1])[1], lambda x: mp.atleast_3d(x), lambda x: x.expand_as(mp.zeros(2, 3, 4)),
    lambda x: x.mH])
def test_view_results_share_memory_and_version_counter(make):
    x = mp.randn(3, 4)
    v = make(x)
    assert v._base is x
    before = v._version
    x.add_(1.0)
    assert v._version == before + 1


def test_writing_through_a_view_is_seen_by_autograd():
    a = mp.randn(2, 6, requires_grad=True)
    b = a * 1
    b.unflatten(1, (2, 3))[:, 0].mul_(2)
    b.sum().backward()
    want = np.ones((2, 6))
    want[:, :3] = 2
    np.testing.assert_allclose(a.grad.numpy(), want)


def test_copies_share_no_memory_with_the_input():
    x = mp.randn(3, 4)
    for out in (x.roll(1), x.fliplr(), x.repeat(1, 1), mp.diag(x), x.rot90(0), x[0].repeat(1)):
        assert not np.shares_memory(out._array, x._array)


def test_broadcast_shapes_matches_torch():
    torch = pytest.importorskip("torch")
    for shapes in [((2, 1), (3,)), (4, (1, 4), ()), ((0, 1), (5,)), ()]:
        assert mp.broadcast_shapes(*shapes) == tuple(torch.broadcast_shapes(*shapes))
    with pytest.raises(RuntimeError, match="broadcast_shapes: shapes"):
        mp.broadcast_shapes((2,), (3,))


def test_conjugate_transposes_match_torch():
    torch = pytest.importorskip("torch")
    z = np.arange(6.0).reshape(2, 3) + 1j * np.arange(6.0).reshape(2, 3) ** 2
    np.testing.assert_array_equal(mp.tensor(z).H.numpy(), torch.tensor(z).H.resolve_conj().numpy())
    np.testing.assert_array_equal(mp.tensor(z[None]).mH.numpy(), torch.tensor(z[None]).mH.resolve_conj().numpy())
    with pytest.raises(RuntimeError, match="H: only matrices"):
        mp.zeros(2, 2, 2).H


@pytest.mark.parametrize("fn, exc, match", [
    (lambda: mp.movedim(mp.zeros(2, 3), (0, 0), (1, 0)), RuntimeError, "movedim: dims .* repeat"),
    (lambda: mp.zeros(2, 6).unflatten(1, (4, -1)), RuntimeError, "unflatten: sizes"),
    (lambda: mp.zeros(2, 3).repeat(2), RuntimeError, "repeat: sizes"),
    (lambda: mp.repeat_interleave(mp.zeros(3), mp.tensor([1, 2])), RuntimeError, "repeat_interleave: repeats holds"),
    (lambda: mp.repeat_interleave(mp.zeros(3), -1), RuntimeError, "repeat_interleave: repeats must not be negative"),
    (lambda: mp.hsplit(mp.zeros(2, 5), 2), RuntimeError, "hsplit: dim 1"),
    (lambda: mp.vsplit(mp.zeros(4), 2), RuntimeError, "vsplit: the input must have at least 2"),
    (lambda: mp.rot90(mp.zeros(2, 2), 1, (0, 0)), RuntimeError, "rot90: dims"),
    (lambda: mp.outer(mp.zeros(2, 2), mp.zeros(2)), RuntimeError, "outer: input must be 1-D"),
    (lambda: mp.inner(mp.zeros(2, 3), mp.zeros(2)), RuntimeError, "inner: the last dims"),
    (lambda: mp.zeros(2, 3).sum_to_size(2), RuntimeError, "sum_to_size: size"),
    (lambda: mp.meshgrid(mp.zeros(2), indexing="yx"), RuntimeError, "meshgrid: indexing"),
    (lambda: mp.hstack([]), TypeError, "hstack: expected a Tensor"),
    (lambda: mp.hstack(mp.zeros(2)), RuntimeError, "hstack: expected a non-empty list"),
])
def test_bad_input_raises_a_clear_error(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()
