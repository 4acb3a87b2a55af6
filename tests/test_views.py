"""Views against torch, as a table: every view op x every in-place op, with and without autograd.

A view shares its base's memory and version counter: writing into it changes the base and every other view of
it, and autograd differentiates the write (torch's CopySlices). Each row of the table is run in mixprec and in
torch on the same values; the values of base and view, the version counters, the gradients, and whether the
call is refused must all agree.
"""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp

# view op: (lib, tensor of shape (3, 4)) -> a view of it
VIEWS = {
    "int": lambda lib, t: t[1],
    "int-every-dim": lambda lib, t: t[1, 2],
    "0d-tensor-index": lambda lib, t: t[lib.tensor(2, device=t.device)],
    "slice": lambda lib, t: t[:, 1:3],
    "step-slice": lambda lib, t: t[::2, 1::2],
    "none-and-int": lambda lib, t: t[None, 1],
    "ellipsis": lambda lib, t: t[..., 1],
    "select": lambda lib, t: t.select(1, -1),
    "narrow": lambda lib, t: t.narrow(1, 1, 2),
    "diagonal": lambda lib, t: t.diagonal(),
    "diagonal-offset": lambda lib, t: t.diagonal(1),
    "t": lambda lib, t: t.t(),
    "T": lambda lib, t: t.T,
    "mT": lambda lib, t: t.mT,
    "transpose": lambda lib, t: t.transpose(0, 1),
    "permute": lambda lib, t: t.permute(1, 0),
    "view": lambda lib, t: t.view(2, 6),
    "reshape": lambda lib, t: t.reshape(12),
    "flatten": lambda lib, t: t.flatten(),
    "unsqueeze": lambda lib, t: t.unsqueeze(1),
    "squeeze": lambda lib, t: t[None].squeeze(0),
    "expand": lambda lib, t: t[:, :1].expand(3, 4),
    "split": lambda lib, t: t.split(2, 1)[1],
    "chunk": lambda lib, t: t.chunk(3, 0)[0],
    "unbind": lambda lib, t: t.unbind(1)[2],
    "unfold": lambda lib, t: t.unfold(1, 2, 2),
    "as_strided": lambda lib, t: t.as_strided((2, 2), (4, 1), 1),
    "view-of-view": lambda lib, t: t[1:].t()[2],
}

# in-place op: (lib, view) -> None
INPLACE = {
    "mul_": lambda lib, v: v.mul_(2.0),
    "add_tensor": lambda lib, v: v.add_(lib.ones(v.shape, dtype=lib.float64) * 0.5),
    "fill_": lambda lib, v: v.fill_(5.0),
    "zero_": lambda lib, v: v.zero_(),
    "copy_": lambda lib, v: v.copy_(lib.full(v.shape, -1.5, dtype=lib.float64)),
    "sin_": lambda lib, v: v.sin_(),
    "setitem": lambda lib, v: v.__setitem__(..., 7.0),
    "iadd": lambda lib, v: v.__iadd__(1.0),
}

VALUES = np.random.default_rng(0).standard_normal((3, 4))
WEIGHTS = np.random.default_rng(1).standard_normal((3, 4))


def run(lib, view, inplace, mode, device="cpu"):
    """One row in one library: what it did (values, versions, gradient), or the exception type it raised."""
    x = lib.tensor(VALUES.copy(), dtype=lib.float64, requires_grad=mode != "plain", device=device)
    try:
        if mode == "plain":  # no autograd anywhere
            v = VIEWS[view](lib, x)
            INPLACE[inplace](lib, v)
            return x.detach().cpu().numpy().copy(), v.detach().cpu().numpy().copy(), x._version, v._version
        if mode == "leaf-no-grad":  # the parameter-init idiom: write into a view of a leaf under no_grad
            with lib.no_grad():
                INPLACE[inplace](lib, VIEWS[view](lib, x))
            return x.detach().numpy().copy(), x.is_leaf, x.requires_grad
        if mode == "view-made-no-grad":  # made under no_grad, written with grad on: refused in both
            y = x * 1.0
            with lib.no_grad():
                v = VIEWS[view](lib, y)
            INPLACE[inplace](lib, v)
            return y.detach().numpy().copy()
        y = x * 2.0  # "grad": a non-leaf base, differentiated through the write
        v = VIEWS[view](lib, y)
        INPLACE[inplace](lib, v)
        w = lib.tensor(WEIGHTS, dtype=lib.float64)
        ((y * w).sum() + (v * v).sum()).backward()
        return y.detach().numpy().copy(), v.detach().numpy().copy(), x.grad.numpy().copy()
    except (RuntimeError, ValueError, TypeError, IndexError) as exc:
        return type(exc).__name__


@pytest.mark.parametrize("mode", ["plain", "grad", "leaf-no-grad", "view-made-no-grad"])
@pytest.mark.parametrize("inplace", list(INPLACE))
@pytest.mark.parametrize("view", list(VIEWS))
def test_writes_through_views_match_torch(view, inplace, mode, torch):
    mine, theirs = run(mp, view, inplace, mode), run(torch, view, inplace, mode)
    if isinstance(theirs, str) or isinstance(mine, str):
        assert isinstance(mine, str) and isinstance(theirs, str), (mine, theirs)
        return
    for a, b in zip(mine if isinstance(mine, tuple) else (mine,), theirs if isinstance(theirs, tuple) else (theirs,)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("view", list(VIEWS))
def test_a_view_sees_later_writes_to_its_base_and_differentiates_them(view, torch):
    got = {}
    for lib in (mp, torch):
        x = lib.tensor(VALUES.copy(), dtype=lib.float64, requires_grad=True)
        y = x * 1.0
        v = VIEWS[view](lib, y)
        y.mul_(3.0)  # the base changes after the view was made
        try:
            (v * v).sum().backward()
        except RuntimeError:  # one of several views one call made: autograd cannot follow it (both refuse)
            got[lib] = None
            continue
        got[lib] = (v.detach().numpy().copy(), x.grad.numpy().copy(), v._version, y._version)
    assert (got[mp] is None) == (got[torch] is None)
    for a, b in zip(got[mp] or (), got[torch] or ()):
        np.testing.assert_allclose(a, b, rtol=1e-12)


@pytest.mark.parametrize("view", list(VIEWS))
def test_layout_of_every_view_matches_torch(view, torch):
    a, b = VIEWS[view](mp, mp.tensor(VALUES)), VIEWS[view](torch, torch.tensor(VALUES))
    base = mp.tensor(VALUES)
    v = VIEWS[view](mp, base)
    assert v._base is base and v._is_view() and v.untyped_storage().data_ptr() == base.data_ptr()
    stepped = [i for i, n in enumerate(a.shape) if n > 1]  # (a size-1 dim's stride is never used)
    assert (a.shape, [a.stride(i) for i in stepped], a.storage_offset(), a.is_contiguous()) == \
        (tuple(b.shape), [b.stride(i) for i in stepped], b.storage_offset(), b.is_contiguous())


@pytest.mark.gpu
@pytest.mark.parametrize("inplace", ["mul_", "fill_", "copy_", "setitem"])
@pytest.mark.parametrize("view", list(VIEWS))
def test_writes_through_views_on_the_gpu_match_the_cpu(view, inplace):
    mine, there = run(mp, view, inplace, "plain"), run(mp, view, inplace, "plain", device="cuda")
    assert type(mine) is type(there)
    if not isinstance(mine, str):
        for a, b in zip(mine, there):
            np.testing.assert_array_equal(a, b)


def test_advanced_indexing_copies_as_in_torch():
    for key in ([0, 2], mp.tensor([0, 2]), mp.tensor([True, False, True])):
        a = mp.arange(3.0)
        c = a[key]
        c.fill_(9.0)
        assert a.tolist() == [0.0, 1.0, 2.0] and not c._is_view() and c._base is None


def test_views_of_complex_tensors_share_memory(torch):
    z = mp.tensor(np.array([1 + 2j, 3 - 1j]))
    z.real.mul_(10.0)
    z.imag.fill_(0.5)
    assert z.tolist() == [10 + 0.5j, 30 + 0.5j]
    assert z.real._base is z and z.real.stride() == torch.tensor([1 + 2j, 3 - 1j]).real.stride()


def test_a_row_written_in_a_loop_lands_in_the_matrix():
    m = mp.zeros(3, 2)
    for i, row in enumerate(m):
        row.fill_(float(i))
        row[1].add_(0.5)
    assert m.tolist() == [[0.0, 0.5], [1.0, 1.5], [2.0, 2.5]]


def test_the_init_idiom_writes_into_the_parameter():
    layer = mp.nn.Linear(2, 3)
    with mp.no_grad():
        layer.weight[0][1].fill_(4.0)
        layer.bias[2].zero_()
    assert layer.weight[0, 1].item() == 4.0 and layer.bias[2].item() == 0.0 and layer.weight.is_leaf


def test_view_bad_arguments_are_named():
    t = mp.ones(3, 4)
    with pytest.raises(RuntimeError, match="as_strided: .* reach element 12 of a storage of 12 elements"):
        t.as_strided((2, 2), (4, 1), 7)
    with pytest.raises(RuntimeError, match="must not be negative"):
        t.as_strided((2,), (-1,))
    with pytest.raises(RuntimeError, match="unfold: size 5 does not fit dim 1 of size 4"):
        t.unfold(1, 5, 1)
    with pytest.raises(RuntimeError, match="unfold: step must be positive"):
        t.unfold(1, 2, 0)
    with pytest.raises(IndexError, match="narrow: start 5 is out of range"):
        t.narrow(1, 5, 1)
    with pytest.raises(RuntimeError, match=r"narrow: start \(3\) \+ length \(2\) must lie within dim 1 of size 4"):
        t.narrow(1, 3, 2)
