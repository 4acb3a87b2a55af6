"""mixprec.backend.bfloat16: which CuPy and NumPy hold bfloat16 on a GPU, the error when they cannot, and the
CUDA extras that ask for versions that can."""
from __future__ import annotations

import tomllib
import types
from pathlib import Path

import pytest

import mixprec as mp
from mixprec import backend
from mixprec.backend.bfloat16 import cuda_bfloat16_unsupported_reason, require_dtype_support

ROOT = Path(__file__).resolve().parent.parent


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
