"""Failures predicted for the first GPU run (issue 14, item 7), each pinned down on the CPU.

CuPy differs from NumPy in a few places mixprec relied on. Each test feeds
the code a CuPy-like stand-in (NumPy with CuPy's signature or loop table) or
checks the code path that replaced a host synchronisation, so the fix is
proven here and the GPU run has one thing less to find.
"""
from __future__ import annotations

import tomllib
import types
from pathlib import Path

import numpy as np
import pytest

import mixprec as mp
import mixprec.nn.functional as F
from mixprec import backend
from mixprec.backend import device_checks
from mixprec.backend.bfloat16 import cuda_bfloat16_unsupported_reason, require_dtype_support
from mixprec.distributed import _nccl
from mixprec.ops import elementwise, shape

ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------- scatter_add: CuPy's indices has no sparse=
class _CupyIndices:
    """NumPy, except that ``indices`` has CuPy's signature (dimensions, dtype) and no ``sparse``."""

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def indices(dimensions, dtype=int):
        return np.indices(dimensions, dtype=dtype)


def test_open_grid_matches_numpys_sparse_indices():
    for dims in [(3,), (2, 4), (2, 1, 3), ()]:
        got = backend.open_grid(_CupyIndices(), dims)
        want = np.indices(dims, sparse=True)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
            assert g.shape == w.shape


def test_scatter_add_and_gather_backward_use_no_sparse_indices(monkeypatch):
    monkeypatch.setattr(shape, "array_module", lambda a: _CupyIndices())
    x = mp.zeros(3, 4)
    index = mp.tensor([[0, 2, 2, 1], [1, 0, 2, 2]])
    src = mp.arange(8, dtype=mp.float32).reshape(2, 4)
    out = x.scatter_add(0, index, src)
    want = np.zeros((3, 4), np.float32)
    np.add.at(want, (index.numpy(), np.arange(4)[None, :]), src.numpy())
    np.testing.assert_array_equal(out.numpy(), want)
    # gather's backward is a scatter_add: it must take the same path
    w = mp.randn(3, 4, requires_grad=True)
    w.gather(1, mp.tensor([[0, 0], [3, 1], [2, 2]])).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [[2, 0, 0, 0], [0, 1, 0, 1], [0, 0, 2, 0]])


# ---------------------------------------------------------------- where: no bfloat16 loop in CuPy
class _CupyWhere:
    """NumPy, except that ``where`` follows CuPy's loop table: no bfloat16 loop, so bfloat16 comes back float32."""

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def where(condition, a, b):
        def lift(v):
            return np.asarray(v).astype(np.float32) if np.asarray(v).dtype == mp.bfloat16 else v
        return np.where(condition, lift(a), lift(b))


def test_where_keeps_bfloat16_exactly_on_a_cupy_like_backend(monkeypatch):
    fake = _CupyWhere()
    monkeypatch.setattr(backend, "array_module", lambda a: fake)
    monkeypatch.setattr(elementwise, "array_module", lambda a: fake)
    a = mp.tensor([1.0, -2.5, 3.0e38, 7.0], dtype=mp.bfloat16)
    b = mp.tensor([0.1, 0.2, -0.3, float("nan")], dtype=mp.bfloat16)
    c = mp.tensor([True, False, True, False])
    for out, want in [(mp.where(c, a, b), np.where(c.numpy(), a.numpy(), b.numpy())),
                      (mp.where(c, a, 0.5), np.where(c.numpy(), a.numpy(), np.asarray(0.5, mp.bfloat16))),
                      (mp.where(c, -1.0, b), np.where(c.numpy(), np.asarray(-1.0, mp.bfloat16), b.numpy()))]:
        assert out.dtype == mp.bfloat16
        np.testing.assert_array_equal(out.numpy().view(np.uint16), want.view(np.uint16))  # bit for bit


# ---------------------------------------------------------------- host synchronisations in a plain step
class _NoHostRead(np.ndarray):
    """An array that fails if its value is read on the host (what costs a GPU->host wait on CUDA)."""

    def _read(self, *args):
        raise AssertionError("the op read an array's value on the host")

    __bool__ = __int__ = __index__ = __float__ = item = _read


def _no_read(a):
    return mp.Tensor._wrap(np.asarray(a).view(_NoHostRead))


def test_loss_and_embedding_validation_reads_nothing_on_the_host(monkeypatch):
    # on a GPU, device_checks.check hands the test to the device; stand in for it with a recorder
    checked = []
    monkeypatch.setattr(device_checks, "check", lambda bad, error, message, culprit=None: checked.append(message))
    logits = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    x = _no_read(logits).requires_grad_()
    F.cross_entropy(x, _no_read([0, 1, 4, 2])).backward()
    F.nll_loss(_no_read(logits), _no_read([0, -100, 4, 2]))
    w = _no_read(np.ones((10, 3), np.float32)).requires_grad_()
    F.embedding(_no_read([1, 2, 9]), w).sum().backward()
    F.binary_cross_entropy(_no_read([0.2, 0.9]), _no_read([0.0, 1.0]))
    assert any("nll_loss: a target is out of bounds" in m for m in checked)
    assert any("embedding: index out of range" in m for m in checked)
    assert any("binary_cross_entropy" in m for m in checked)


def test_cpu_checks_still_raise_at_once_naming_the_culprit():
    with pytest.raises(IndexError, match=r"out of bounds for 4 classes.*got target 4"):
        F.nll_loss(mp.randn(3, 4), mp.tensor([0, 4, 1]))
    with pytest.raises(IndexError, match=r"out of range for a table of 5 rows.*\[-1, 2\]"):
        F.embedding(mp.tensor([-1, 2]), mp.randn(5, 2))
    F.nll_loss(mp.randn(3, 4), mp.tensor([0, -100, 1]))  # ignore_index is not out of bounds


def test_check_on_the_cpu_is_immediate_and_empty_arrays_pass():
    device_checks.check(np.zeros(0, bool), ValueError, "never")
    device_checks.check(np.array([False, False]), ValueError, "never")
    with pytest.raises(KeyError, match="boom"):
        device_checks.check(np.array([False, True]), KeyError, "boom")


# ---------------------------------------------------------------- NCCL unique id: tuple in CuPy 13, bytes in 14
def test_nccl_unique_id_takes_the_form_of_the_installed_cupy():
    raw = bytes(range(256))[:128]
    as14 = _nccl.unique_id_for_cupy(raw, "14.0.1")
    assert isinstance(as14, bytes) and as14 == raw
    as13 = _nccl.unique_id_for_cupy(raw, "13.6.0")
    assert isinstance(as13, tuple) and len(as13) == 128
    assert min(as13) >= -128 and max(as13) <= 127  # signed chars, as CuPy 13's get_unique_id returned
    assert bytes(b & 0xFF for b in as13) == raw  # what rank 0 sends is recovered exactly
    assert isinstance(_nccl.unique_id_for_cupy(raw, "15.0.0a1"), bytes)


# ---------------------------------------------------------------- bfloat16 on CUDA: versions
@pytest.mark.parametrize("cupy_version,numpy_version,ok", [
    ("13.6.0", "2.4.6", False), ("14.0.0", "2.1.1", False), ("14.0.0", "2.1.2", True),
    ("14.2.0", "1.26.4", False), ("14.0.0rc1", "2.3.0", True), ("15.0.0", "2.2.0", True)])
def test_bfloat16_on_cuda_needs_cupy_14_and_numpy_2_1_2(cupy_version, numpy_version, ok):
    reason = cuda_bfloat16_unsupported_reason(cupy_version, numpy_version)
    if ok:
        assert reason is None
    else:
        assert "CuPy >= 14.0 and NumPy >= 2.1.2" in reason and cupy_version in reason and numpy_version in reason


def test_bfloat16_to_an_old_cupy_is_a_clear_type_error(monkeypatch):
    monkeypatch.setattr(backend, "_cupy", types.SimpleNamespace(__version__="13.6.0"))
    with pytest.raises(TypeError, match=r"bfloat16 on CUDA needs CuPy >= 14.0.*CuPy 13.6.0"):
        require_dtype_support(mp.bfloat16, mp.Device("cuda", 0))
    require_dtype_support(mp.float16, mp.Device("cuda", 0))  # float16 is fine on CuPy 13
    require_dtype_support(mp.bfloat16, mp.Device("cpu"))


def test_cuda_extras_pin_the_versions_that_hold_bfloat16_and_bring_the_cuda_libraries():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for name, package in (("cuda12", "cupy-cuda12x"), ("cuda13", "cupy-cuda13x")):
        assert f"{package}[ctk]>=14" in extras[name] and "numpy>=2.1.2" in extras[name]
