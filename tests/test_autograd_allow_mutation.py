"""mp.autograd.graph.allow_mutation_on_saved_tensors: saved tensors changed in place after saving; torch (CPU,
float64) side by side as the oracle."""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp


def allowed(lib):
    return lib.autograd.graph.allow_mutation_on_saved_tensors()


def leaf(lib, values=(0.5, -1.0, 2.0)):
    return lib.tensor(list(values), dtype=lib.float64, requires_grad=True)


def pow_then_sin_(lib):
    a = leaf(lib)
    b = a.clone()
    out = (b ** 2).sum()  # pow saves b
    b.sin_()
    out.backward()
    return [a.grad]


def exp_output_then_mul_(lib):
    a = leaf(lib)
    e = a.clone().exp()  # exp saves its output
    out = e.sum()
    e.mul_(2)
    out.backward()
    return [a.grad]


def leaf_changed_under_no_grad(lib):
    w = leaf(lib)
    out = (w * w).sum()
    with lib.no_grad():
        w.mul_(3)
    out.backward()
    return [w.grad]


def written_through_setitem_and_out(lib):
    a = leaf(lib)
    b, c = a.clone(), a.clone()
    out = (b * c).sum()
    b[0] = 10.0
    lib.mul(lib.ones(3, dtype=lib.float64), 7.0, out=c.detach())
    out.backward()
    return [a.grad]


def optimizer_step_before_backward(lib):
    lin = lib.nn.Linear(3, 2).double()
    with lib.no_grad():
        lin.weight.copy_(lib.tensor([[0.1, 0.2, 0.3], [-0.4, 0.5, -0.6]], dtype=lib.float64))
        lin.bias.zero_()
    opt = lib.optim.SGD(lin.parameters(), lr=0.5)
    x = leaf(lib)
    out = lin(x).tanh().sum()
    (lin.weight * lin.weight).sum().backward()
    opt.step()  # changes the weight lin(x) saved
    opt.zero_grad()
    out.backward()
    return [x.grad, lin.weight.grad, lin.bias.grad]


def twice_with_a_change_between(lib):
    a = leaf(lib)
    b = a.clone()
    out = (b ** 2).sum()
    b.mul_(2)
    out.backward(retain_graph=True)
    b.mul_(2)
    out.backward()
    return [a.grad]


def in_place_chain(lib):
    a = leaf(lib)
    b = a.clone() * 2
    c = b * b
    b.mul_(3)  # b itself goes on as b * 3
    (c.sum() + (b * a).sum()).backward()
    return [a.grad]


def second_derivative(lib):
    a = leaf(lib)
    b = a.clone()
    y = b.sin().sum()
    (g,) = lib.autograd.grad(y, a, create_graph=True)
    b.add_(1)
    g.sum().backward()
    return [a.grad]


CASES = [pow_then_sin_, exp_output_then_mul_, leaf_changed_under_no_grad, written_through_setitem_and_out,
         optimizer_step_before_backward, twice_with_a_change_between, in_place_chain, second_derivative]


@pytest.mark.parametrize("case", CASES, ids=[c.__name__ for c in CASES])
def test_backward_uses_the_saved_value_as_torch(case, torch):
    with allowed(mp):
        ours = case(mp)
    with allowed(torch):
        theirs = case(torch)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", CASES[:4], ids=[c.__name__ for c in CASES[:4]])
def test_outside_the_block_the_same_change_is_the_version_error(case, torch):
    for lib in (mp, torch):
        with pytest.raises(RuntimeError, match="modified by an inplace operation|modified by an in-place operation"):
            case(lib)


def test_a_write_through_a_view_at_another_offset_still_leaves_the_saved_value(torch):
    """torch detects the write by the written tensor's data pointer, which misses b[1:]; here the copy made at
    saving holds the saved value whatever writes later, so the gradient is the one without any write."""
    def run(lib, write):
        a = leaf(lib)
        b = a.clone()
        out = (b[1:] ** 3).sum() + (b ** 2).sum()
        if write:
            b[1:].mul_(5)
        out.backward()
        return a.grad.numpy()
    with allowed(mp):
        ours = run(mp, True)
    np.testing.assert_allclose(ours, run(torch, False), rtol=1e-12)


def test_backward_after_the_block_ended_fails_as_torch(torch):
    for lib in (mp, torch):
        with allowed(lib):
            a = leaf(lib)
            out, out2 = (a.clone() ** 2).sum(), a.clone().sin().sum()
        with pytest.raises(AssertionError, match="allow_mutation_on_saved_tensors"):
            out.backward()
        with allowed(lib):  # a new block does not revive the old one's saved tensors
            with pytest.raises(AssertionError, match="allow_mutation_on_saved_tensors"):
                out2.backward()


def test_blocks_cannot_be_nested_as_torch(torch):
    for lib in (mp, torch):
        with pytest.raises(RuntimeError, match="allow_mutation_on_saved_tensors contexts cannot be nested"):
            with allowed(lib):
                with allowed(lib):
                    pass
        with allowed(lib):  # usable again afterwards
            assert pow_then_sin_(lib)[0].shape == (3,)


def test_a_refused_inner_block_leaves_the_outer_one_working():
    """(torch's refused inner block resets its process-wide flag, which breaks the outer block's backward.)"""
    with allowed(mp):
        a = leaf(mp)
        b = a.clone()
        out = (b ** 2).sum()
        with pytest.raises(RuntimeError, match="cannot be nested"):
            with allowed(mp):
                pass
        b.sin_()
        out.backward()
    np.testing.assert_allclose(a.grad.numpy(), 2 * a.detach().numpy())


def test_inner_saved_tensors_hooks_take_over_as_torch(torch):
    """Only the innermost hooks are active: identity hooks inside the block store the tensor itself, so backward
    sees the change (both libraries; the hooks own what they store, and no version is checked)."""
    results = []
    for lib in (mp, torch):
        with allowed(lib):
            a = leaf(lib)
            b = a.clone()
            with lib.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
                out = (b ** 2).sum()
            b.mul_(2)
            out.backward()
        results.append(a.grad.numpy())
    np.testing.assert_allclose(*results)


def test_each_saved_tensor_is_copied_once_and_the_copies_go_with_the_block():
    with allowed(mp) as ctx:
        x = leaf(mp)
        y = x.clone()
        out = (y * y).sum()  # mul saves y twice: one copy
        assert len(ctx._copies) == 1
        out2 = (y * x).sum()  # y again (same version) and x
        assert len(ctx._copies) == 2
        y.add_(1)
        out3 = (y * y).sum()  # y at its new version: a new copy
        assert len(ctx._copies) == 3
    assert len(ctx._copies) == 0
    for o in (out, out2, out3):
        with pytest.raises(AssertionError, match="has ended"):
            o.backward()
