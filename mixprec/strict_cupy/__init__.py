"""A strict CuPy stand-in: mixprec's GPU path, run on the CPU under CuPy's rules.

    MIXPREC_CUPY=strict python -m pytest -m gpu      # every gpu-marked test, no GPU needed

With ``MIXPREC_CUPY=strict`` in the environment, ``mixprec.backend`` takes
this package's ``cupy`` and ``cupyx`` instead of the real ones, and "cuda" is
one device whose memory is host memory. It refuses what CuPy refuses, read
from the real CuPy package (which imports without a GPU):

- names: a function, keyword or ndarray method CuPy lacks is an error here;
- dtype loops: each elementwise kernel picks its loop from the real kernel's
  table (bfloat16 into a kernel with no bfloat16 loop comes back float32);
- host memory: NumPy arrays as operands raise ``TypeError``, and an array
  will not turn into a NumPy array implicitly (``np.asarray``, ``__array__``);
- host reads: ``.get()``, ``.item()``, ``float()``, ``int()``, ``bool()``,
  ``tolist()``, ``repr`` are counted; reductions and scalar indexing give 0-d
  arrays, as CuPy's;
- capture: while a stream captures, work is recorded, not run (results hold
  garbage until ``Graph.launch`` replays it); host reads, host-to-device
  copies, synchronisation and CuPy's cuBLAS/cuSOLVER/cuRAND calls raise, as in
  CUDA and CuPy (a direct call into libcublas, as mixprec makes, is recorded);
- kernels: ``RawModule`` builds the kernel's own .cu source for the host.

Count what a block of code makes the host do::

    from mixprec import strict_cupy
    with strict_cupy.counting() as seen:
        step()
    assert seen.host_reads == 0 and seen.uploads == 0

What it cannot catch (docs/cuda.md): GPU numerics (cuBLAS's algorithms,
fused multiply-adds, atomics' order), races and memory ordering, the real
rules of a capture beyond those above, NCCL, and the CUDA installation itself
(drivers, toolkits, NVRTC).
"""
from __future__ import annotations

import contextlib
import types

import numpy as np

from . import _array, _cuda, _raw, _state
from ._namespace import Namespace, ROOT
from ._real import real, real_x
from ._state import COUNTS, CaptureError, Counts

__all__ = ["cupy", "cupyx", "counting", "Counts", "CaptureError"]


def _random_namespace():
    draws = {"random_sample", "rand", "randn", "standard_normal", "uniform", "normal", "randint"}
    extra = {name: (lambda *a, _n=name, **k: getattr(_cuda.RandomState.default(), _n)(*a, **k)) for name in draws}
    return Namespace("cupy.random", real.random, None, extra)


cupy = ROOT
cupy._extra.update({
    "__version__": real.__version__,
    "cuda": _cuda.make_module(),
    "RawModule": _raw.RawModule,
    "linalg": Namespace("cupy.linalg", real.linalg, np.linalg),
    "fft": Namespace("cupy.fft", real.fft, np.fft),
    "random": _random_namespace(),
    "lib": types.SimpleNamespace(stride_tricks=Namespace("cupy.lib.stride_tricks", real.lib.stride_tricks,
                                                          np.lib.stride_tricks)),
})


class _ErrState:
    """cupyx.errstate: with linalg="raise", each cuSOLVER call's status is read back on the host."""

    def __init__(self, *, divide=None, over=None, under=None, invalid=None, linalg=None):
        self.new, self.old = linalg, None

    def __enter__(self):
        self.old, _state.ERRSTATE.linalg = _state.ERRSTATE.linalg, self.new
        return self

    def __exit__(self, *exc):
        _state.ERRSTATE.linalg = self.old
        return False


def _scatter_add(a, slices, value):
    return a.scatter_add(slices, value)


def _empty_pinned(shape, dtype=float, order="C"):
    return np.empty(shape, dtype=dtype, order=order)


def _special():
    """cupyx.scipy.special with SciPy's functions as the twins. CuPy's zeta is a two-input ufunc (Hurwitz's
    zeta(x, q)); SciPy's is a Python function with q optional, so its twin is that function made a ufunc."""
    import scipy.special as twin
    zeta = np.frompyfunc(lambda x, q: twin.zeta(x, q), 2, 1)
    return Namespace("cupyx.scipy.special", real_x.scipy.special, twin,
                     {"zeta": _array.ufunc(real_x.scipy.special.zeta, zeta)})


cupyx = Namespace("cupyx", real_x, None, {
    "scatter_add": _scatter_add, "empty_pinned": _empty_pinned, "errstate": _ErrState,
    "scipy": types.SimpleNamespace(special=_special()),
})


_LIBRARIES = {"cublas": _cuda.LibCublas()}


def library(name: str):
    """The stand-in's twin of a CUDA library mixprec calls directly (backend.cuda_libraries.cuda_library)."""
    try:
        return _LIBRARIES[name]
    except KeyError:
        raise NotImplementedError(f"the strict CuPy stand-in has no twin of lib{name}") from None


@contextlib.contextmanager
def counting():
    """Count what the block makes the host do: yields a Counts that holds the block's figures when it ends."""
    before = COUNTS.copy()
    seen = Counts()
    try:
        yield seen
    finally:
        for name, value in vars(COUNTS - before).items():
            setattr(seen, name, value)

