"""mixprec/ops/copies.py: every <view>_copy is its view's values in memory of its own."""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp
from mixprec.ops import copies


@pytest.mark.parametrize("name, args", [
    ("expand_copy", ((2, 3, 4),)), ("diagonal_copy", ()), ("alias_copy", ()), ("as_strided_copy", ((2,), (2,))),
    ("narrow_copy", (0, 1, 2)), ("view_copy", (-1,)), ("permute_copy", ((1, 0, 2),)), ("split_with_sizes_copy", ([1, 2],)),
    ("unbind_copy", ()), ("unfold_copy", (2, 2, 1)), ("squeeze_copy", ()), ("unsqueeze_copy", (0,)),
    ("transpose_copy", (0, 1)), ("t_copy", ())])
def test_copies_have_the_views_values_in_their_own_memory(name, args):
    x = mp.randn(3, 3, 4) if name != "t_copy" else mp.randn(3, 4)
    if name == "expand_copy":
        x = mp.randn(3, 1)
    got = getattr(mp, name)(x, *args)
    view = getattr(x, name[:-5])(*args) if name != "alias_copy" else x
    for g, v in zip(*(o if isinstance(o, tuple) else (o,) for o in (got, view))):
        np.testing.assert_array_equal(g.numpy(), v.numpy())
        assert not np.shares_memory(g._array, x._array)
    assert set(copies.COPIES) >= {name}


def test_fill_gives_the_value_its_gradient_and_the_input_zero():
    x, v = mp.randn(2, 3, requires_grad=True), mp.tensor(2.0, requires_grad=True)
    out = mp.fill(x, v)
    (out * mp.arange(6.0).reshape(2, 3)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((2, 3)))
    assert v.grad.item() == 15.0
    with pytest.raises(RuntimeError, match="fill: value must be a number or a 0-d tensor"):
        mp.fill(x, mp.zeros(2))
