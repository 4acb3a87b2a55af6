"""Cases for the ops of mixprec/ops/copies.py: each <view>_copy against NumPy's view, and fill."""
from __future__ import annotations

import numpy as np

import mixprec as mp

from .case import Case, rnd

CASES = [
    Case("expand_copy", "expand_copy", [rnd(3, 1)], lambda a: mp.expand_copy(a, (2, 3, 4)),
         lambda a: np.broadcast_to(a, (2, 3, 4))),
    Case("diagonal_copy", "diagonal_copy", [rnd(3, 4)], lambda a: mp.diagonal_copy(a, 1), lambda a: np.diagonal(a, 1)),
    Case("alias_copy", "alias_copy", [rnd(2, 3)], mp.alias_copy, lambda a: a),
    Case("as_strided_copy", "as_strided_copy", [rnd(3, 3)], lambda a: mp.as_strided_copy(a, (2, 2), (1, 2), 1),
         lambda a: a.reshape(-1)[[[1, 3], [2, 4]]]),
    Case("narrow_copy", "narrow_copy", [rnd(3, 5)], lambda a: mp.narrow_copy(a, 1, -3, 2), lambda a: a[:, 2:4]),
    Case("view_copy", "view_copy", [rnd(2, 6)], lambda a: mp.view_copy(a, (3, -1)), lambda a: a.reshape(3, 4)),
    Case("permute_copy", "permute_copy", [rnd(2, 3, 4)], lambda a: mp.permute_copy(a, (2, 0, 1)),
         lambda a: a.transpose(2, 0, 1)),
    Case("split_with_sizes_copy", "split_with_sizes_copy", [rnd(5, 2)], lambda a: mp.split_with_sizes_copy(a, [2, 3]),
         lambda a: np.split(a, [2])),
    Case("unbind_copy", "unbind_copy", [rnd(2, 3)], lambda a: mp.unbind_copy(a, 1), lambda a: list(a.T)),
    Case("unfold_copy", "unfold_copy", [rnd(2, 5)], lambda a: mp.unfold_copy(a, 1, 2, 2),
         lambda a: np.stack([a[:, 0:2], a[:, 2:4]], 1)),
    Case("squeeze_copy", "squeeze_copy", [rnd(2, 1, 3)], mp.squeeze_copy, np.squeeze),
    Case("unsqueeze_copy", "unsqueeze_copy", [rnd(2, 3)], lambda a: mp.unsqueeze_copy(a, 1), lambda a: a[:, None]),
    Case("transpose_copy", "transpose_copy", [rnd(2, 3, 4)], lambda a: mp.transpose_copy(a, 0, 2),
         lambda a: a.swapaxes(0, 2)),
    Case("t_copy", "t_copy", [rnd(2, 3)], mp.t_copy, np.transpose),
    Case("fill", "fill", [rnd(2, 3)], lambda a: mp.fill(a, 1.5), lambda a: np.full_like(a, 1.5)),
    Case("fill-tensor-value", "fill", [rnd(2, 3), rnd()], mp.fill, lambda a, v: np.full_like(a, v)),
]
