"""FP8 scale arithmetic (mixprec.amp.fp8.scaling) against independent references, and its kernels against the twins.

References written here: float64 arithmetic with ml_dtypes' (and torch's) float8 casts for
the quantized values; Transformer Engine's documented delayed-scaling formula
(scale = fp8_max / amax / 2**margin over a window of amaxes) replayed step by step;
the OCP Microscaling v1.0 rule (shared_exp = floor(log2(amax)) - emax_elem, clamped to
E8M0's range) with Python's math.frexp. The kernels of kernels/fp8_scaling.cu run on the
host build (tools/host_kernels.py: g++, no GPU) and on the strict CuPy stand-in (gpu mark),
and must give the twins' bits.
"""
import math
import runpy
from collections import deque
from pathlib import Path
from types import SimpleNamespace

import ml_dtypes
import numpy as np
import pytest

import mixprec as mp
from mixprec import backend
from mixprec.amp import _host_build, _kernels
from mixprec.amp.fp8 import kernels as fp8_kernels
from mixprec.amp.fp8 import scaling as S

ROOT = Path(__file__).resolve().parent.parent
E4M3, E5M2 = "float8_e4m3fn", "float8_e5m2"
FORMATS = (E4M3, E5M2)
FP8 = {E4M3: np.dtype(ml_dtypes.float8_e4m3fn), E5M2: np.dtype(ml_dtypes.float8_e5m2)}
TOP = {name: float(ml_dtypes.finfo(dt).max) for name, dt in FP8.items()}
EMAX = {E4M3: 8, E5M2: 15}  # exponent of the largest normal: 448 = 1.75 * 2**8, 57344 = 1.75 * 2**15
FLT_MAX = float(np.finfo(np.float32).max)
INPUTS = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16),
          "bfloat16": np.dtype(ml_dtypes.bfloat16)}


def u8(a):
    return np.ascontiguousarray(a).view(np.uint8)


def f32(v):
    return np.float32(v)


def data(shape, rng, poison=0.0, dtype=np.float32):
    """Values over many binades (FP8 subnormals, saturation and float32 subnormals included)."""
    x = (rng.uniform(-2, 2, shape) * np.exp2(rng.integers(-140, 20, shape).astype(float))).astype(np.float32)
    if poison:
        idx = rng.random(shape) < poison
        x[idx] = rng.choice([np.inf, -np.inf, np.nan, -np.nan], int(idx.sum()))
    with np.errstate(over="ignore"):
        return x.astype(dtype)


# ---- references ----
def ref_cast(x, scale, fmt):
    """fp8(saturate(float32(x * scale))): the product rounded once to float32 (float64 holds it exactly);
    a NaN is 0x7F with x's sign bit (torch's NaN bits, checked against torch below)."""
    y = (np.asarray(x, np.float64) * np.asarray(scale, np.float64)).astype(np.float32)
    q = np.clip(y.astype(np.float64), -TOP[fmt], TOP[fmt]).astype(FP8[fmt])
    bits = u8(q).copy()
    nan = np.isnan(y)
    bits[nan] = np.where(np.signbit(np.asarray(x, np.float32)), 0xFF, 0x7F)[nan]
    return bits


def ref_current_scale(amax, fmt, margin=0):
    """Transformer Engine's current scaling: 1 for amax 0/inf/NaN, float32 max for an overflowing quotient."""
    if not math.isfinite(amax) or amax == 0:
        return f32(1.0)
    with np.errstate(over="ignore"):
        q = f32(np.float64(f32(TOP[fmt] * 2.0 ** -margin)) / np.float64(amax))
    return f32(FLT_MAX) if math.isinf(q) else q


def ref_mx_exponent(amax, fmt):
    """OCP MX v1.0: floor(log2(amax)) - emax_elem clamped to [-127, 127]; a zero block as 2**-126; None for NaN."""
    if not math.isfinite(amax):
        return None
    _, e = math.frexp(amax if amax else 2.0 ** -126)  # amax = m * 2**e, m in [0.5, 1)
    return min(max(e - 1 - EMAX[fmt], -127), 127)


def amax64(x):
    x = np.abs(np.asarray(x, np.float64))
    return np.nan if np.isnan(x).any() else (x.max() if x.size else 0.0)


# ---- per-tensor and per-row quantization ----
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("scale", [1.0, 0.37, 1e-3, 2.0 ** 20])
def test_cast_to_fp8_saturates_and_rounds_to_nearest_even(fmt, scale):
    rng = np.random.default_rng(1)
    x = data((37, 29), rng, poison=0.02)
    x[0, :6] = [TOP[fmt] * 1.01 / scale, -np.inf, np.inf, np.nan, 0.0, -0.0]
    q, amax = S.cast_to_fp8(x, np.array([scale], np.float32), fmt)
    assert q.dtype == FP8[fmt] and q.shape == x.shape
    assert u8(q).tobytes() == ref_cast(x, f32(scale), fmt).tobytes()
    assert np.isnan(amax[0])  # the NaN in x wins
    finite = np.where(np.isfinite(x), x, 0)
    _, amax2 = S.cast_to_fp8(finite, np.array([scale], np.float32), fmt)
    assert amax2[0] == f32(amax64(finite))


def test_cast_folds_the_amax_into_a_given_array():
    amax = np.array([3.0], np.float32)
    S.cast_to_fp8(np.array([1.0, -2.0], np.float32), np.ones(1, np.float32), E4M3, amax=amax)
    assert amax[0] == 3.0
    S.cast_to_fp8(np.array([-5.0], np.float16), np.ones(1, np.float32), E4M3, amax=amax)
    assert amax[0] == 5.0


@pytest.mark.parametrize("fmt", FORMATS)
def test_saturated_values_match_torchs_float8_cast(fmt):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    x = data(4096, rng)
    scale = np.array([3.5], np.float32)
    q, _ = S.cast_to_fp8(x, scale, fmt)
    t = torch.clamp(torch.from_numpy(x) * torch.from_numpy(scale), -TOP[fmt], TOP[fmt]).to(getattr(torch, fmt))
    assert u8(q).tobytes() == t.view(torch.uint8).numpy().tobytes()


# NaNs of both signs, quiet and signalling, with payloads (as float32 bits)
NANS = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FC12345, 0xFFFFFFFF], np.uint32).view(np.float32)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", INPUTS)
def test_nan_bits_are_torchs(fmt, dtype):
    """A NaN becomes torch's float8 NaN: 0x7F with the input's sign bit, in E4M3 and E5M2 alike."""
    torch = pytest.importorskip("torch")
    with np.errstate(invalid="ignore"):
        x = np.concatenate([NANS, [1.0, -3.0]]).astype(np.float32).astype(INPUTS[dtype])
    x32 = torch.from_numpy(x.astype(np.float32))
    for scale in (1.0, 0.5):
        q, _ = S.cast_to_fp8(x, np.array([scale], np.float32), fmt)
        want = (x32 * scale).to(getattr(torch, fmt)).view(torch.uint8).numpy()
        assert u8(q).tolist() == want.tolist(), scale
    assert u8(q)[:len(NANS)].tolist() == [0x7F, 0xFF] * 3
    for name, call in calls(x, fmt).items():   # every quantizer stores its NaNs the same way
        if name != "quantize_mxfp8":
            assert u8(call()[0])[:len(NANS)].tolist() == [0x7F, 0xFF] * 3, name


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("margin", [0, 2])
@pytest.mark.parametrize("power_2", [False, True])
def test_quantize_rowwise_scales_each_row_from_its_own_amax(fmt, margin, power_2):
    rng = np.random.default_rng(3)
    x = data((9, 70), rng)
    x[1] = 0.0  # an all-zero row: scale 1
    x[2, 5] = np.nan  # a NaN row: scale 1, the NaN stays NaN
    x[3, :] = 2.0 ** -140  # a tiny amax: the quotient overflows float32
    q = S.quantize_rowwise(x, fmt, margin=margin, use_power_2_scales=power_2)
    assert q.scale.shape == q.scale_inv.shape == q.amax.shape == (9, 1)
    for r in range(9):
        want = ref_current_scale(amax64(x[r]), fmt, margin)
        if power_2:
            want = f32(2.0 ** math.floor(math.log2(want)))
        assert u8(q.scale[r]).tobytes() == u8(np.array([want])).tobytes(), r
        assert q.scale_inv[r, 0] == f32(1 / np.float64(want))
        assert u8(q.data[r]).tobytes() == ref_cast(x[r], want, fmt).tobytes(), r
    assert np.all(np.isfinite(q.scale)) and q.scale[1, 0] == q.scale[2, 0] == 1.0 and q.scale[3, 0] == (
        2.0 ** 127 if power_2 else FLT_MAX)
    top = np.abs(q.data[0].astype(np.float64)).max()  # the row's amax lands on fp8_max / 2**margin ...
    if power_2:  # ... or within a factor 2 below it
        assert TOP[fmt] * 2.0 ** (-margin - 1) < top <= TOP[fmt] * 2.0 ** -margin
    else:
        assert top == TOP[fmt] * 2.0 ** -margin


@pytest.mark.parametrize("dtype", INPUTS)
def test_quantize_tensorwise_uses_the_whole_tensors_amax(dtype):
    rng = np.random.default_rng(4)
    x = data((5, 3, 33), rng, dtype=INPUTS[dtype])
    q = S.quantize_tensorwise(x, E4M3)
    want = ref_current_scale(amax64(x), E4M3)
    assert q.scale.shape == (1,) and q.scale[0] == want and q.amax[0] == f32(amax64(x))
    assert u8(q.data).tobytes() == ref_cast(x, want, E4M3).tobytes()


@pytest.mark.parametrize("amax, fmt", [(0.0, E4M3), (np.inf, E4M3), (np.nan, E5M2), (1e-45, E4M3), (3e38, E5M2),
                                       (1.0, E5M2), (448.0, E4M3)])
def test_current_scale_follows_transformer_engines_rule(amax, fmt):
    scale, scale_inv = S.current_scale(np.array([amax], np.float32), fmt)
    assert scale[0] == ref_current_scale(float(f32(amax)), fmt) and np.isfinite(scale[0])
    assert scale_inv[0] == f32(1 / np.float64(scale[0]))


# ---- MXFP8 ----
def crafted_blocks():
    """One block of 32 per case, with its amax placed among smaller values."""
    cases = {"one": 1.0, "power of two": 2.0 ** 10, "below a power of two": np.nextafter(f32(2.0 ** 10), f32(0)),
             "above a power of two": np.nextafter(f32(2.0 ** -3), f32(1)), "tiny normal": 2.0 ** -120,
             "subnormal amax": 2.0 ** -140, "largest float32": FLT_MAX, "zero block": 0.0, "nan": np.nan,
             "inf": np.inf, "fp8 max exactly": 448.0}
    rng = np.random.default_rng(5)
    rows = []
    for amax in cases.values():
        row = (rng.uniform(-1, 1, 32) * (amax if np.isfinite(amax) else 1.0)).astype(np.float32)
        row[rng.integers(32)] = -amax if amax == amax and amax not in (np.inf,) else amax
        rows.append(row)
    return list(cases), np.stack(rows)


@pytest.mark.parametrize("fmt", FORMATS)
def test_mx_block_scales_follow_the_ocp_rule(fmt):
    names, x = crafted_blocks()
    q = S.quantize_mxfp8(x, fmt)
    assert q.scale.dtype == np.uint8 and q.scale.shape == (len(names), 1) and q.data.shape == x.shape
    for i, name in enumerate(names):
        shared = ref_mx_exponent(amax64(x[i]), fmt)
        if shared is None:  # inf or NaN in the block: the NaN scale, NaN data
            assert q.scale[i, 0] == 0xFF and np.isnan(q.data[i].astype(np.float32)).all(), name
            continue
        assert q.scale[i, 0] == shared + 127, name
        assert q.scale[i].view(ml_dtypes.float8_e8m0fnu).astype(np.float64)[0] == 2.0 ** shared, name
        assert u8(q.data[i]).tobytes() == ref_cast(x[i], 2.0 ** -shared, fmt).tobytes(), name
        if 0 < amax64(x[i]) < FLT_MAX and shared > -127:  # the block's amax lands in [2**emax, fp8_max]
            assert 2.0 ** EMAX[fmt] <= np.abs(q.data[i].astype(np.float64)).max() <= TOP[fmt], name


def test_mx_scale_examples_by_hand():
    x = np.zeros((1, 96), np.float32)
    x[0, 0], x[0, 32], x[0, 64] = 448.0, 1.0, 300.0
    q = S.quantize_mxfp8(x)
    # floor(log2(448)) = 8 -> 2**0; floor(log2(1)) = 0 -> 2**-8; floor(log2(300)) = 8 -> 2**0
    assert q.scale.tolist() == [[127, 119, 127]]
    assert q.data[0, [0, 32, 64]].astype(np.float32).tolist() == [448.0, 256.0, 288.0]


@pytest.mark.parametrize("shape", [(3, 33), (7,), ()])
def test_mx_needs_whole_blocks(shape):
    with pytest.raises(ValueError, match="multiple of 32"):
        S.quantize_mxfp8(np.ones(shape, np.float32))


# ---- delayed scaling ----
def te_trajectory(amax_steps, fp8s, length, algo, margin):
    """Transformer Engine's documented delayed scaling, replayed independently: per tensor a window of the last
    `length` amaxes; scale = fp8_max / amax / 2**margin with amax = max(window) or the newest; a zero or
    non-finite amax leaves the tensor as it was; a scale past float32 becomes its largest value."""
    n = len(fp8s)
    windows = [deque([0.0] * length, maxlen=length) for _ in range(n)]
    scales = [f32(1.0)] * n
    out = []
    for amaxes in amax_steps:
        for t, a in enumerate(amaxes):
            if not (math.isfinite(a) and a > 0):
                continue
            windows[t].append(a)
            use = max(windows[t]) if algo == "max" else a
            with np.errstate(over="ignore"):
                s = f32(np.float64(f32(TOP[fp8s[t]] / 2.0 ** margin)) / np.float64(use))
            scales[t] = f32(FLT_MAX) if math.isinf(s) else s
        out.append(([list(w) for w in windows], list(scales)))
    return out


AMAX_SCRIPT = [  # three tensors: forward (E4M3), weight (E4M3), gradient (E5M2)
    [1.0, 0.5, 1e-3], [3.0, 0.5, 2e-3], [2.0, 0.0, 1e-2], [0.25, 0.6, np.inf], [0.5, 0.6, np.nan],
    [100.0, 1e-44, 5e-3], [0.1, 0.7, 4e-3], [0.2, 0.7, 3e-3], [0.3, 0.7, 2e-3], [0.4, 0.7, 1e-3],
]


@pytest.mark.parametrize("algo", ["max", "most_recent"])
@pytest.mark.parametrize("length, margin", [(1, 0), (4, 0), (4, 1), (16, 3)])
def test_delayed_scaling_trajectory_matches_transformer_engines_formula(algo, length, margin):
    fp8s = [E4M3, E4M3, E5M2]
    history = np.zeros((3, length), np.float32)
    scales = np.ones(3, np.float32)
    scale_inv = np.ones(3, np.float32)
    amaxes = np.zeros(3, np.float32)
    want = te_trajectory([[float(f32(a)) for a in step] for step in AMAX_SCRIPT], fp8s, length, algo, margin)
    for step, (windows, ref_scales) in zip(AMAX_SCRIPT, want):
        amaxes[...] = step
        S.delayed_update(history, scales, amaxes, fp8s, margin=margin, amax_compute_algo=algo, scale_inv=scale_inv)
        assert history.tolist() == [[float(f32(v)) for v in w] for w in windows]
        assert u8(scales).tobytes() == u8(np.array(ref_scales, np.float32)).tobytes()
        assert u8(scale_inv).tobytes() == u8(np.float32(1) / scales).tobytes()
        assert np.isfinite(history).all() and np.isfinite(scales).all() and not amaxes.any()


def test_max_keeps_a_spike_until_it_leaves_the_window():
    history, scales, amaxes = np.zeros((1, 3), np.float32), np.ones(1, np.float32), np.zeros(1, np.float32)
    seen = []
    for a in [1.0, 8.0, 1.0, 1.0, 1.0]:
        amaxes[0] = a
        S.delayed_update(history, scales, amaxes, E4M3)
        seen.append(float(scales[0]))
    assert seen == [448.0, 56.0, 56.0, 56.0, 448.0]


def test_hostile_amaxes_leave_history_and_scale_untouched():
    history = np.arange(12, dtype=np.float32).reshape(4, 3) + 1
    scales = np.array([2.0, 3.0, 4.0, 5.0], np.float32)
    before = history.copy(), scales.copy()
    amaxes = np.array([np.inf, np.nan, 0.0, -1.0], np.float32)
    S.delayed_update(history, scales, amaxes, E5M2, clear_amaxes=False)
    assert history.tobytes() == before[0].tobytes() and scales.tobytes() == before[1].tobytes()
    assert np.isnan(amaxes[1])  # left as it was when not cleared


def test_delayed_update_with_no_tensors_is_a_no_op():
    S.delayed_update(np.zeros((0, 4), np.float32), np.zeros(0, np.float32), np.zeros(0, np.float32), [])


# ---- hostile inputs to the casts ----
@pytest.mark.parametrize("shape", [(0,), (0, 32), (4, 0), (3, 0, 64)])
def test_empty_arrays_give_empty_data_and_finite_scales(shape):
    x = np.zeros(shape, np.float32)
    for q in (S.quantize_tensorwise(x, E4M3), S.quantize_rowwise(x, E5M2)):
        assert q.data.shape == shape and q.data.dtype in FP8.values()
        assert np.all(q.scale == 1.0) and np.all(q.amax == 0.0)
    if shape[-1] % 32 == 0:
        assert S.quantize_mxfp8(x).data.shape == shape
    data_, amax = S.cast_to_fp8(x, np.ones(1, np.float32), E4M3)
    assert data_.shape == shape and amax[0] == 0.0


def test_all_zero_tensor():
    q = S.quantize_tensorwise(np.zeros((4, 4), np.float16), E4M3)
    assert q.scale[0] == 1.0 and q.amax[0] == 0.0 and not u8(q.data).any()
    assert (S.quantize_mxfp8(np.zeros((2, 32), np.float32)).scale == 0).all()  # 2**-127, not NaN


@pytest.mark.parametrize("call, error, words", [
    (lambda: S.quantize_tensorwise([1.0, 2.0], E4M3), TypeError, "expected a NumPy or CuPy array"),
    (lambda: S.quantize_tensorwise(np.ones(3), E4M3), TypeError, "dtype float64"),
    (lambda: S.quantize_rowwise(np.ones(3, np.float32), "float16"), TypeError, "float8_e4m3fn or float8_e5m2"),
    (lambda: S.quantize_rowwise(np.ones(3, np.float32), E4M3, margin=0.5), ValueError, "margin must be an int"),
    (lambda: S.quantize_rowwise(np.float32(1.0)[()], E4M3), TypeError, "NumPy or CuPy"),
    (lambda: S.cast_to_fp8(np.ones(3, np.float32), np.ones(2, np.float32), E4M3), ValueError, "one element"),
    (lambda: S.cast_to_fp8(np.ones(3, np.float32), 1.0, E4M3), TypeError, "scale must be a NumPy array"),
    (lambda: S.cast_to_fp8(np.ones(3, np.float32), np.ones(1), E4M3), TypeError, "scale must be float32"),
    (lambda: S.delayed_update(np.zeros(4, np.float32), np.ones(1, np.float32), np.zeros(1, np.float32), E4M3),
     ValueError, "shape \\(n_tensors, history_len\\)"),
    (lambda: S.delayed_update(np.zeros((2, 4), np.float32), np.ones(1, np.float32), np.zeros(2, np.float32), E4M3),
     ValueError, "scales must have shape \\(2,\\)"),
    (lambda: S.delayed_update(np.zeros((2, 4), np.float32), np.ones(2, np.float32), np.zeros(2, np.float32),
                              [E4M3], amax_compute_algo="max"), ValueError, "1 entries for 2 tensors"),
    (lambda: S.delayed_update(np.zeros((2, 4), np.float32), np.ones(2, np.float32), np.zeros(2, np.float32),
                              E4M3, amax_compute_algo="mean"), ValueError, "\"max\" or \"most_recent\""),
])
def test_bad_arguments_get_clear_errors(call, error, words):
    with pytest.raises(error, match=words):
        call()


def test_a_refused_call_changes_nothing():
    history, scales = np.ones((2, 4), np.float32), np.ones(2, np.float32)
    amaxes = np.array([5.0, 6.0], np.float32)
    with pytest.raises(ValueError):
        S.delayed_update(history, scales, amaxes, [E4M3, E5M2, E4M3])
    assert (history == 1).all() and (scales == 1).all() and amaxes.tolist() == [5.0, 6.0]


# ---- the kernels against their twins ----
tool = SimpleNamespace(**runpy.run_path(str(ROOT / "tools" / "host_kernels.py"), run_name="host_kernels"))


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    try:
        return tool.HostRunner(tool.build(tmp_path_factory.mktemp("fp8_host_kernels")))
    except tool.HostBuildUnavailable as exc:
        pytest.skip(f"cannot build the kernels for the host: {exc}")


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and u8(a).tobytes() == u8(b).tobytes()


def calls(x, fmt):
    return {"cast_to_fp8": lambda: S.cast_to_fp8(x, np.array([0.75], np.float32), fmt),
            "quantize_tensorwise": lambda: S.quantize_tensorwise(x, fmt, margin=1),
            "quantize_rowwise": lambda: S.quantize_rowwise(x, fmt, use_power_2_scales=True),
            "quantize_mxfp8": lambda: S.quantize_mxfp8(x, fmt)}


@pytest.mark.parametrize("dtype", INPUTS)
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("shape, poison", [((3, 64), 0.0), ((67, 96), 0.01), ((2, 3, 32), 0.3), ((1, 4096), 0.0)])
def test_host_built_kernels_match_the_twins(runner, dtype, fmt, shape, poison):
    x = data(shape, np.random.default_rng(6), poison, INPUTS[dtype])
    for name, call in calls(x, fmt).items():
        twin = call()
        with _host_build.run_on_host(runner):
            kernel = call()
        assert all(same_bits(a, b) for a, b in zip(twin, kernel)), name


def test_host_built_kernels_cover_a_grid_stride_loop(runner):
    x = data((1, 256 * 4096 + 96), np.random.default_rng(7), 1e-5)  # more elements than threads in the grid
    for name, call in calls(x, E4M3).items():
        twin = call()
        with _host_build.run_on_host(runner):
            assert all(same_bits(a, b) for a, b in zip(twin, call())), name


def test_host_built_kernels_on_a_one_block_grid(runner, monkeypatch):
    """One block of threads: each thread strides over many rows and blocks, flushing its amax per segment."""
    monkeypatch.setattr(fp8_kernels, "MAX_BLOCKS", 1)
    x = data((67, 416), np.random.default_rng(10), 0.002)
    for name, call in calls(x, E5M2).items():
        twin = call()
        with _host_build.run_on_host(runner):
            assert all(same_bits(a, b) for a, b in zip(twin, call())), name


@pytest.mark.parametrize("algo", ["max", "most_recent"])
def test_host_built_delayed_update_matches_the_twin(runner, algo):
    rng = np.random.default_rng(8)
    n, length = 300, 7  # more tensors than a block's threads
    state = [np.abs(data((n, length), rng)), np.abs(data(n, rng)) + 1, np.ones(n, np.float32),
             np.zeros(n, np.float32)]
    twin = [a.copy() for a in state]
    fp8s = [FORMATS[i % 2] for i in range(n)]
    for step in range(12):
        new = np.abs(data(n, rng, poison=0.05))
        new[rng.random(n) < 0.1] = 0.0
        for history, scales, scale_inv, amaxes in (state, twin):
            amaxes[...] = new
        S.delayed_update(*twin[:2], twin[3], fp8s, margin=step % 3, amax_compute_algo=algo, scale_inv=twin[2])
        with _host_build.run_on_host(runner):
            S.delayed_update(*state[:2], state[3], fp8s, margin=step % 3, amax_compute_algo=algo,
                             scale_inv=state[2])
        assert all(same_bits(a, b) for a, b in zip(state, twin)), step


def test_a_steady_delayed_update_is_one_launch_for_all_tensors(runner):
    n = 50
    history, scales, amaxes = np.zeros((n, 8), np.float32), np.ones(n, np.float32), np.zeros(n, np.float32)
    fp8s = [E4M3, E5M2] * (n // 2)
    with _host_build.run_on_host(runner):
        for step in range(3):
            amaxes[...] = step + 1.0
            launches, uploads = _kernels.launch_count(), runner.tables.uploads
            S.delayed_update(history, scales, amaxes, fp8s, scale_inv=np.ones(n, np.float32))
            assert _kernels.launch_count() - launches == 1
            assert runner.tables.uploads - uploads == (step == 0)  # its argument table is built once
    assert history[:, -3:].tolist() == [[1.0, 2.0, 3.0]] * n


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", FORMATS)
def test_cupy_arrays_run_the_kernels_without_host_syncs(fmt):
    cp = backend.cupy_module()
    rng = np.random.default_rng(9)
    x = data((33, 64), rng, 0.01)
    xd = cp.asarray(x)
    n = 4
    state = [np.abs(data((n, 5), rng)), np.ones(n, np.float32), np.ones(n, np.float32),
             np.array([2.0, 0.0, np.inf, 1e-3], np.float32)]
    dev = [cp.asarray(a) for a in state]
    counting = backend.strict_standin().counting() if backend.strict_standin() else None
    with (counting or _nothing()) as seen:
        got = [S.cast_to_fp8(xd, cp.asarray(np.array([0.5], np.float32)), fmt), S.quantize_tensorwise(xd, fmt),
               S.quantize_rowwise(xd, fmt), S.quantize_mxfp8(xd, fmt)]
        S.delayed_update(dev[0], dev[1], dev[3], fmt, scale_inv=dev[2])
    if seen is not None:
        assert seen.host_reads == 0 and seen.syncs == 0
    want = [S.cast_to_fp8(x, np.array([0.5], np.float32), fmt), S.quantize_tensorwise(x, fmt),
            S.quantize_rowwise(x, fmt), S.quantize_mxfp8(x, fmt)]
    for g, w in zip(got, want):
        for a, b in zip(g, w):
            host = cp.asnumpy(a)
            assert host.tobytes() == np.ascontiguousarray(b).tobytes() and host.dtype in (b.dtype, np.uint8)
    S.delayed_update(state[0], state[1], state[3], fmt, scale_inv=state[2])
    assert all(cp.asnumpy(d).tobytes() == s.tobytes() for d, s in zip(dev, state))


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def test_mp_amp_names_the_recipes_the_scaling_functions_serve():
    recipe = mp.amp.DelayedScaling(margin=1)
    history, scales, amaxes = np.zeros((2, 4), np.float32), np.ones(2, np.float32), np.array([2.0, 2.0], np.float32)
    S.delayed_update(history, scales, amaxes, list(recipe.fp8_format.value), margin=recipe.margin,
                     amax_compute_algo=recipe.amax_compute_algo)
    assert scales.tolist() == [recipe.scaled_max[0] / 2.0, recipe.scaled_max[1] / 2.0]


def test_the_ocp_rule_saturates_a_blocks_top_values():
    x = np.zeros((1, 32), np.float32)
    x[0, 0] = 480.0  # floor(log2(480)) = 8 = emax_elem: scale 2**0, and 480 saturates to 448
    q = S.quantize_mxfp8(x)
    assert q.scale[0, 0] == 127 and float(q.data[0, 0]) == 448.0
