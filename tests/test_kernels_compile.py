"""The CUDA kernels compile with NVRTC alone (no GPU), and compile to what the reference assumes.

Runs wherever libnvrtc can be found (.ci/run installs nvidia-cuda-nvrtc-cu12 for
it); skipped elsewhere, except under CI=true, where a missing NVRTC is a failure.
tools/compile_kernels.py compiles every source for sm_70 (sm_75 with NVRTC 13+),
sm_80 and sm_90 in CI, with the options CuPy really passes (ours, then its
-ftz=true); here one PTX target is read to check the code generation the
bit-exact reference relies on.
"""
import importlib.util
import os
import re
from fnmatch import fnmatch
from pathlib import Path

import pytest

from mixprec.amp import _kernels
from mixprec.amp.fp8 import _sources

ROOT = Path(__file__).resolve().parent.parent


def _load_tool():
    spec = importlib.util.spec_from_file_location("compile_kernels", ROOT / "tools" / "compile_kernels.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


tool = _load_tool()


@pytest.fixture(scope="module")
def nvrtc():
    try:
        return tool.Nvrtc()
    except tool.NvrtcError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI must compile the kernels but NVRTC is missing: {exc}")
        pytest.skip(f"NVRTC not available: {exc}")


@pytest.fixture(scope="module")
def ptx(nvrtc):
    """PTX of every source for compute_80, split into {kernel name expression: entry text}."""
    out = {}
    for filename, exprs in _kernels.MODULES.items():
        lowered, text, _ = tool.compile_kernel(nvrtc, filename, "compute_80")
        entries = re.split(r"\n(?=\.(?:visible|weak) \.entry )", text)
        for expr in exprs:
            entry = rf"\.(?:visible|weak) \.entry {re.escape(lowered[expr])}\("
            out[expr] = next(e for e in entries if re.match(entry, e))
    return out


def test_every_source_compiles_for_the_ci_targets(nvrtc):
    for arch in tool.default_archs(nvrtc.version()):
        for filename, exprs in _kernels.MODULES.items():
            lowered, _, cubin = tool.compile_kernel(nvrtc, filename, arch)
            assert set(lowered) == set(exprs) and cubin


def test_a_compile_error_is_reported_with_the_log(nvrtc):
    with pytest.raises(tool.NvrtcError, match="undefined"):
        nvrtc.compile("extern \"C\" __global__ void k() { undefined_thing(); }", "broken.cu",
                      ("--gpu-architecture=compute_80",))


@pytest.mark.parametrize("pair", _kernels.UNSCALE_PAIRS, ids=lambda p: f"{p[0]}->{p[1]}")
def test_unscale_kernels_load_128_bits_at_a_time_and_multiply_without_shortcuts(ptx, pair):
    entry = ptx[_kernels.unscale_kernel_name(*pair)]
    assert re.search(r"\bld(\.global)?(\.nc)?\.v(4\.(u32|f32|b32)|2\.(f64|u64|b64))\b", entry), \
        "no 128-bit vector load in the aligned path"
    assert "mul.rn.f" in entry and "fma" not in entry  # IEEE multiply, no contraction ...
    assert flushing(entry) == set()  # ... and no subnormal flushed, although CuPy passes -ftz=true


def flushing(entry):
    """Instructions that -ftz=true turned into flushing ones (a NaN test is unaffected by flushing)."""
    return {m for m in re.findall(r"\b[a-z]+(?:\.[a-z0-9]+)*\.ftz(?:\.[a-z0-9]+)*", entry)
            if not m.startswith("setp.nan.")}


def test_compiles_with_the_flags_cupy_really_uses():
    assert "-ftz=true" in _kernels.CUPY_APPENDED_OPTIONS


def test_update_kernel_rounds_float64_products_once_to_float32(ptx):
    entry = ptx["update_scale"]
    assert "mul.rn.f64" in entry and "cvt.rn.f32.f64" in entry and flushing(entry) == set()


def test_sources_are_package_data_and_headers_are_spliced():
    """The non-editable install ships every file of kernels/ as mixprec/kernels (package-dir + package-data)."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = config["tool"]["setuptools"]["package-data"]["mixprec.kernels"]
    files = [p.name for p in _kernels.SOURCE_DIR.iterdir() if p.is_file()]
    assert files and all(any(fnmatch(f, g) for g in globs) for f in files)
    for filename in _kernels.MODULES:  # every header spliced in; the loss-scaling sources read the generated layout
        text = _kernels.load_source(filename)
        assert '#include "' not in text and "pragma once" not in text
        assert ("amp_layout.h: generated" in text) == (filename != "fp8_scaling.cu")  # FP8's take int64 tables


def test_every_subpackage_is_listed_for_install():
    """pyproject lists packages explicitly (kernels/ is mapped in), so a new subpackage must be added there."""
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"])
    pkg = ROOT / "mixprec"
    found = {"mixprec." + ".".join(p.parent.relative_to(pkg).parts) for p in pkg.rglob("__init__.py")
             if p.parent != pkg and "__pycache__" not in p.parts}
    assert found | {"mixprec", "mixprec.kernels"} <= listed, sorted(found - listed)


def test_the_oldest_default_target_follows_the_nvrtc_version():
    assert tool.default_archs((12, 9)) == ("sm_70", "sm_80", "sm_90")
    assert tool.default_archs((13, 0)) == ("sm_75", "sm_80", "sm_90")


def test_fp8_kernels_divide_and_multiply_without_flushing(ptx):
    for expr in _sources.MODULES[_sources.SOURCE]:
        assert flushing(ptx[expr]) == set() and "fma" not in ptx[expr], expr
    for expr in ("fp8_current_scale", "fp8_delayed_update"):
        assert "div.rn.f32" in ptx[expr], expr
    assert "mul.rn.f32" in ptx[_sources.cast_kernel("bfloat16", "float8_e4m3fn")]
    assert "atom.global.max.u32" in ptx[_sources.amax_kernel("float32")]
