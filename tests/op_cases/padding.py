"""Cases for the ops of mixprec/ops/padding.py: F.pad in each mode and the per-mode ops it routes to."""
from __future__ import annotations

import numpy as np

import mixprec as mp
import mixprec.nn.functional as F

from .case import Case, rnd
from .refs_spatial import pad_ref

CASES = [
    Case("pad-constant-value", "constant_pad_nd", [rnd(2, 3, 4)], lambda x: F.pad(x, (1, 2, 0, 1, 2, 0), value=0.5),
         lambda x: pad_ref(x, (1, 2, 0, 1, 2, 0), "constant", 0.5)),
    Case("constant_pad_nd-crop", "constant_pad_nd", [rnd(3, 5, 4)], lambda x: mp.constant_pad_nd(x, (-1, 2, 1, -2)),
         lambda x: np.pad(x[:, :3, 1:], ((0, 0), (1, 0), (0, 2)))),
    Case("pad-reflect-1d", "reflection_pad1d", [rnd(2, 3, 5)], lambda x: F.pad(x, (2, 4), mode="reflect"),
         lambda x: pad_ref(x, (2, 4), "reflect")),
    Case("pad-reflect-2d-unbatched", "reflection_pad2d", [rnd(2, 4, 5)],
         lambda x: F.pad(x, (1, 0, 3, 2), mode="reflect"), lambda x: pad_ref(x, (1, 0, 3, 2), "reflect")),
    Case("pad-reflect-3d", "reflection_pad3d", [rnd(1, 2, 3, 4, 3)],
         lambda x: F.pad(x, (1, 2, 0, 3, 2, 1), mode="reflect"), lambda x: pad_ref(x, (1, 2, 0, 3, 2, 1), "reflect")),
    Case("pad-replicate-1d-unbatched", "replication_pad1d", [rnd(3, 4)],
         lambda x: F.pad(x, (5, 1), mode="replicate"), lambda x: pad_ref(x, (5, 1), "replicate")),
    Case("pad-replicate-2d", "replication_pad2d", [rnd(2, 2, 3, 3)],
         lambda x: F.pad(x, (2, 1, 0, 4), mode="replicate"), lambda x: pad_ref(x, (2, 1, 0, 4), "replicate")),
    Case("replication_pad3d", "replication_pad3d", [rnd(2, 3, 2, 3)],
         lambda x: mp.replication_pad3d(x, (1, 1, 2, 0, 0, 3)), lambda x: pad_ref(x, (1, 1, 2, 0, 0, 3), "replicate")),
    Case("pad-circular-2d", "_pad_circular", [rnd(1, 2, 3, 4)],
         lambda x: F.pad(x, (4, 2, 1, 3), mode="circular"), lambda x: pad_ref(x, (4, 2, 1, 3), "circular")),
    Case("pad-circular-crop", "_pad_circular", [rnd(2, 6)], lambda x: F.pad(x, (-2, 3), mode="circular"),
         lambda x: np.concatenate([x[:, 2:], x[:, 2:5]], axis=1)),
]
