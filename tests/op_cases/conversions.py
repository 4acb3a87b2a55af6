"""Cases for the ops of mixprec/ops/conversions.py."""
from __future__ import annotations

import numpy as np

import mixprec as mp

from .case import Case, rnd

CASES = [
    Case("conj_physical", "conj_physical", [rnd(2, 3)], mp.conj_physical, np.conj),
    Case("conj_physical-complex", "conj_physical", [rnd(4), rnd(4)],
         lambda re, im: mp.complex(re, im).conj_physical().imag, lambda re, im: -im, lowp=False),
]
