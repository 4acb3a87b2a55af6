"""Cases for the ops of mixprec/ops/histograms.py against NumPy's histogram and bincount."""
from __future__ import annotations

import numpy as np

import mixprec as mp

from .case import Case, classes, const, uni

DATA = np.array([0.1, 0.35, 0.35, 0.9, 1.0, 2.5, -0.2, 0.5, 0.62])
POINTS = np.array([[0.1, 0.5], [0.35, -0.25], [0.9, 0.75], [1.0, 1.0], [0.5, 0.0], [2.0, 0.1], [0.62, -0.9]])


def _flat(result):
    return (result.hist, *result.bin_edges)


def _np_flat(result):
    return (result[0], *result[1])


CASES = [
    Case("histc", "histc", [const(DATA)], lambda a: (mp.histc(a, 4, 0, 1), a.histc(bins=3)),
         lambda a: (np.histogram(a, 4, (0, 1))[0].astype(float), np.histogram(a, 3)[0].astype(float)),
         grad=False),
    Case("histogram", "histogram", [const(DATA), uni(9, lo=0.5, hi=2.0)],
         lambda a, w: (*mp.histogram(a, 5), *a.histogram(3, range=(0.0, 1.0), weight=w, density=True)),
         lambda a, w: (np.histogram(a, 5)[0].astype(float), np.histogram(a, 5)[1],
                       *np.histogram(a, 3, (0.0, 1.0), weights=w, density=True)),
         grad=False, lowp=False),
    Case("histogram-edges", "histogram", [const(DATA), const(np.array([-1.0, 0.3, 0.4, 3.0]))],
         lambda a, e: mp.histogram(a, e).hist, lambda a, e: np.histogram(a, e)[0].astype(float), grad=False),
    Case("histogramdd", "histogramdd", [const(POINTS), uni(7, lo=0.5, hi=2.0)],
         lambda p, w: (*_flat(mp.histogramdd(p, [3, 2])), *_flat(mp.histogramdd(p, 2, range=[0.0, 1.0, -1.0, 1.0],
                                                                               weight=w, density=True))),
         lambda p, w: (*_np_flat(np.histogramdd(p, [3, 2])),
                       *_np_flat(np.histogramdd(p, 2, range=[(0.0, 1.0), (-1.0, 1.0)], weights=w, density=True))),
         grad=False, lowp=False),
    Case("bincount", "bincount", [classes(6, 10), uni(10, lo=0.0, hi=1.0)],
         lambda i, w: (mp.bincount(i), i.bincount(w, minlength=8)),
         lambda i, w: (np.bincount(i), np.bincount(i, w, minlength=8)), grad=False),
]
