"""Small tensor idioms torch code uses everywhere: t()/T/mT, max/min with a dim, out= (not autocast, not
differentiable), requires_grad on integers, is_floating_point(); torch (CPU, float64) as the oracle."""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp


def test_transposes_match_torch(torch):
    a = np.arange(6.0).reshape(2, 3)
    for lib in (mp, torch):
        x = lib.tensor(a, dtype=lib.float64)
        assert x.t().tolist() == a.T.tolist() and x.T.tolist() == a.T.tolist()
        assert lib.ones(3).t().shape == (3,) and lib.tensor(2.0).t().shape == ()
        assert lib.ones(2, 3, 4).mT.shape == (2, 4, 3)
        with pytest.raises(RuntimeError, match=r"t\(\) expects a tensor with <= 2 dimensions"):
            lib.ones(2, 3, 4).t()
    x = mp.tensor(a, requires_grad=True)
    x.t().sum().backward()
    assert x.grad.shape == (2, 3) and x.t()._version == x._version  # a view


TIES = [[1.0, 3.0, 3.0, 2.0], [5.0, 5.0, 0.0, 5.0], [np.nan, 1.0, np.nan, 0.0]]


@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_min_with_dim_match_torch_including_ties_and_nan(name, keepdim, torch):
    """(values, indices): the first extreme in a tie, a NaN wins; the gradient goes to that one element."""
    out = {}
    for lib in (mp, torch):
        x = lib.tensor(TIES, dtype=lib.float64, requires_grad=True)
        res = getattr(lib, name)(x, 1, keepdim=keepdim)
        assert res.values is res[0] and res.indices is res[1] and type(res).__name__ == name
        assert not res.indices.requires_grad and res.indices.dtype == lib.int64
        (res.values * lib.tensor([[1.0], [2.0], [3.0]] if keepdim else [1.0, 2.0, 3.0], dtype=lib.float64)).sum() \
            .backward()
        out[lib] = (res.values.detach().numpy(), res.indices.numpy(), x.grad.numpy())
    for got, want in zip(out[mp], out[torch]):
        np.testing.assert_array_equal(got, want)


def test_max_of_all_elements_shares_the_gradient_between_ties(torch):
    grads = []
    for lib in (mp, torch):
        x = lib.tensor(TIES[:2], dtype=lib.float64, requires_grad=True)
        x.max().backward()
        grads.append(x.grad.numpy())
        assert lib.max(x, lib.zeros(2, 4, dtype=lib.float64) + 4).tolist() == [[4, 4, 4, 4], [5, 5, 4, 5]]
    np.testing.assert_array_equal(*grads)
    with pytest.raises(RuntimeError, match="empty input"):
        mp.ones(0).max()


MATMUL_OUT = [
    ("mm", lambda lib, a, b, c, out: lib.mm(a, b, out=out)),
    ("matmul", lambda lib, a, b, c, out: lib.matmul(a, b, out=out)),
    ("addmm", lambda lib, a, b, c, out: lib.addmm(c, a, b, beta=0.5, alpha=2.0, out=out)),
    ("bmm", lambda lib, a, b, c, out: lib.bmm(a[None], b[None], out=out[None])),
    ("baddbmm", lambda lib, a, b, c, out: lib.baddbmm(c[None], a[None], b[None], out=out[None])),
]


@pytest.mark.parametrize("name,call", MATMUL_OUT, ids=[m[0] for m in MATMUL_OUT])
def test_out_calls_write_into_out_and_are_not_autocast(name, call, torch):
    """Under CPU autocast (bfloat16) a call with out= runs in the given float32 types and writes its result into
    out (the same tensor comes back), as torch does."""
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(s).astype(np.float32) for s in [(4, 8), (8, 3), (4, 3)])
    results = []
    for lib in (mp, torch):
        out = lib.empty(4, 3)
        with lib.autocast("cpu", dtype=lib.bfloat16):
            ret = call(lib, lib.tensor(a), lib.tensor(b), lib.tensor(c), out)
        assert ret.dtype == lib.float32 and np.shares_memory(ret.detach().numpy(), out.numpy())
        results.append(out.numpy().copy())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-5, atol=1e-5)


def test_out_calls_are_not_differentiable_and_check_their_target(torch):
    for lib in (mp, torch):
        a = lib.ones(2, 2, requires_grad=True)
        with pytest.raises(RuntimeError, match=r"mm\(\): functions with out=\.\.\. arguments don't support "
                                               r"automatic differentiation"):
            lib.mm(a, lib.ones(2, 2), out=lib.empty(2, 2))
        with lib.no_grad():
            o = lib.empty(2, 2)
            assert lib.mm(a, lib.ones(2, 2), out=o) is o and o.tolist() == [[2, 2], [2, 2]]
    out = mp.empty(3, 3)
    with pytest.raises(RuntimeError, match=r"mm\(\): out= has shape \(3, 3\), but the result has shape \(2, 2\)"):
        mp.mm(mp.ones(2, 2), mp.ones(2, 2), out=out)
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type int64"):
        mp.add(mp.ones(2), mp.ones(2), out=mp.zeros(2, dtype=mp.int64))
    wide = mp.zeros(2, dtype=mp.float64)
    assert mp.add(mp.ones(2), 1.5, out=wide) is wide and wide.tolist() == [2.5, 2.5]
    values, indices = mp.empty(2), mp.zeros(2, dtype=mp.int64)
    res = mp.max(mp.tensor([[1.0, 4.0], [3.0, 2.0]]), 1, out=(values, indices))
    assert res[0] is values and values.tolist() == [4.0, 3.0] and indices.tolist() == [1, 0]


def test_requires_grad_on_integers_is_refused_as_torch_refuses_it(torch):
    for lib in (mp, torch):
        with pytest.raises(RuntimeError, match="(?i)only .*floating.* can require gradients"):
            lib.ones(3, dtype=lib.int64, requires_grad=True)
        with pytest.raises(RuntimeError, match="(?i)only .*floating.* can require gradients"):
            lib.ones(3, dtype=lib.int64).requires_grad_()
        t = lib.ones(3, dtype=lib.int64)
        with pytest.raises(RuntimeError, match="(?i)only .*floating.* can require gradients"):
            t.requires_grad = True
        assert lib.ones(1).is_floating_point() and not t.is_floating_point()
    h = mp.ones(2, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="only change requires_grad flags of leaf"):
        h.requires_grad = False
