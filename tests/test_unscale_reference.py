"""mp.amp.functional on NumPy arrays: the reference the CUDA kernels must match bit for bit.

The kernels themselves are checked against this reference in test_unscale_gpu.py.
Here: the arithmetic is right (against float64 and against torch's CPU kernels),
the rounding rules the parity rests on hold, and bad input is refused clearly.
"""
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import mixprec as mp
from mixprec.amp import functional as F
from mixprec.amp import _reference

BF16 = np.dtype(ml_dtypes.bfloat16)
FLOATS = [np.dtype(np.float16), BF16, np.dtype(np.float32), np.dtype(np.float64)]
UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def bits(a):
    return np.ascontiguousarray(a).view(UINT[a.dtype.itemsize])


def flag():
    return np.zeros((1,), np.float32)


def inv_of(scale):
    return np.array([np.float32(1.0 / np.float64(np.float32(scale)))], np.float32)


def sample(dtype, n, rng, specials=True):
    """Values spread over many binades (normals, subnormals of float16), plus signed zeros."""
    mant = rng.uniform(-2, 2, n)
    expo = rng.integers(-26, 14, n) if dtype == np.float16 else rng.integers(-30, 20, n)
    x = (mant * np.exp2(expo)).astype(np.float32)
    if specials:
        x[: min(n, 3)] = [0.0, -0.0, 6e-8][: min(n, 3)]
    with np.errstate(over="ignore"):
        return x.astype(dtype)


# ---- rounding rules the kernels use (amp_common.cuh), checked against exact arithmetic ----
def bf16_round_like_kernel(x32):
    """The integer round-to-nearest-even of amp_common.cuh's narrow(float, bfloat16_bits&)."""
    u = x32.view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def test_kernel_bfloat16_rounding_equals_ml_dtypes_cast():
    high = np.arange(1 << 16, dtype=np.uint32) << 16
    lows = np.array([0, 1, 0x7FFF, 0x8000, 0x8001, 0xC000, 0xFFFF], np.uint32)
    u = (high[:, None] | lows[None, :]).ravel()
    x = u.view(np.float32)
    x = x[~np.isnan(x)]  # NaN is stored as the default NaN, tested separately
    with np.errstate(over="ignore"):
        ours = bf16_round_like_kernel(x)
        theirs = x.astype(BF16).view(np.uint16)
    assert np.array_equal(ours, theirs)


def _nearest_even(value: Fraction, candidates):
    best = min(candidates, key=lambda c: (abs(Fraction(float(c)) - value),
                                          int(np.array(c).view(np.uint16)) & 1))
    return best


def test_numpy_float16_cast_is_round_to_nearest_even():
    """The reference casts with NumPy; the kernel with cvt.rn.f16.f32 (IEEE RNE). Check NumPy is RNE."""
    rng = np.random.default_rng(1)
    h = rng.integers(0, 0x7C00, 400).astype(np.uint16).view(np.float16)  # finite positive halves
    lo, hi = h.astype(np.float32), np.nextafter(h, np.float16(np.inf)).astype(np.float32)
    mids = ((lo.astype(np.float64) + hi.astype(np.float64)) / 2).astype(np.float32)  # exact ties mostly
    near = np.nextafter(mids, np.float32(0))
    for x in np.concatenate([mids, near]):
        if not np.isfinite(x) or x > 65504:
            continue
        got = np.float32(x).astype(np.float16)
        cand = [got, np.nextafter(got, np.float16(0)), np.nextafter(got, np.float16(np.inf))]
        cand = [c for c in cand if np.isfinite(c)]
        want = _nearest_even(Fraction(float(x)), cand)
        assert got.view(np.uint16) == np.float16(want).view(np.uint16), x


# ---- unscale ----
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
def test_unscale_multiplies_in_float32_and_rounds_once(dtype):
    rng = np.random.default_rng(0)
    a = sample(dtype, 257, rng)
    inv = inv_of(3.0 * 2.0 ** 10)  # not a power of two: the product really rounds
    # a float64 product of two float32 values is exact, so rounding it to float32 is
    # the correctly rounded float32 product; then one more rounding to the storage type
    exact = a.astype(np.float64) * np.float64(inv[0])
    want = exact if dtype == np.float64 else exact.astype(np.float32).astype(dtype)
    f = flag()
    F.non_finite_check_and_unscale_([a], f, inv)
    assert np.array_equal(bits(a), bits(want))
    assert f[0] == 0.0


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_non_finite_sets_found_inf_and_nan_becomes_default_nan(dtype, bad):
    a = np.array([1.0, 2.0, bad, -4.0], dtype=dtype)
    f = flag()
    F.non_finite_check_and_unscale_([np.ones(3, np.float32), a], f, inv_of(4.0))
    assert f[0] == 1.0
    assert a[0] == 0.25 and a[3] == -1.0
    if np.isnan(bad):
        uint, pattern = _reference.DEFAULT_NAN_BITS[dtype]
        assert bits(a)[2] == pattern
    else:
        assert a[2] == bad


def test_found_inf_is_only_ever_set_never_cleared():
    f = np.array([1.0], np.float32)
    F.non_finite_check_and_unscale_([np.ones(4, np.float32)], f, inv_of(2.0))
    assert f[0] == 1.0


def test_nan_payloads_and_negative_nan_all_become_the_default_nan():
    a = np.array([0x7F800001, 0xFFC12345, 0x7FFFFFFF], np.uint32).view(np.float32)
    f = flag()
    F.non_finite_check_and_unscale_([a], f, inv_of(2.0))
    assert (bits(a) == 0x7FC00000).all() and f[0] == 1.0


def test_scale_of_inf_gives_zero_inv_and_inf_times_zero_is_nan():
    a = np.array([np.inf, 1.0], np.float32)
    f = flag()
    F.non_finite_check_and_unscale_([a], f, np.zeros(1, np.float32))
    assert bits(a)[0] == 0x7FC00000 and a[1] == 0.0 and f[0] == 1.0


def test_subnormal_results_are_kept_and_rounded_to_nearest_even():
    q = 2.0 ** -24  # float16's smallest subnormal
    a = np.array([2.0 ** -14, 3 * q, q, 2 * q, 6 * q], np.float16)
    F.non_finite_check_and_unscale_([a], flag(), inv_of(4.0))
    # 2**-16 exact; 0.75q -> q; 0.25q -> 0; 0.5q ties to 0 (even); 1.5q ties to 2q (even)
    assert a.astype(np.float64).tolist() == [2.0 ** -16, q, 0.0, 0.0, 2 * q]
    b = np.array([1.5 * 2.0 ** -126], np.float32)  # float32 result subnormal: not flushed to zero
    F.non_finite_check_and_unscale_([b], flag(), inv_of(8.0))
    assert b[0] == np.float32(1.5 * 2.0 ** -129) and b[0] != 0


def test_results_beyond_the_range_round_to_inf_without_setting_found_inf():
    big = np.array([60000.0], np.float16)
    f = flag()
    F.non_finite_check_and_unscale_([big], f, np.array([4.0], np.float32))  # a scale below 1 enlarges
    assert np.isposinf(big[0]) and f[0] == 0.0  # only non-finite *inputs* count, as in torch


def test_empty_list_and_zero_size_arrays_do_nothing():
    f = flag()
    F.non_finite_check_and_unscale_([], f, inv_of(2.0))
    F.non_finite_check_and_unscale_([np.zeros((0, 3), np.float32)], f, inv_of(2.0))
    assert f[0] == 0.0


def test_strided_views_are_unscaled_in_place_and_the_rest_untouched():
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    view = base[:, 1::2]
    F.non_finite_check_and_unscale_([view], flag(), inv_of(2.0))
    want = np.arange(24, dtype=np.float32).reshape(4, 6)
    want[:, 1::2] /= 2
    assert np.array_equal(base, want)


def test_views_sharing_elements_are_unscaled_in_list_order_like_torch():
    """An element two listed views share is unscaled once per view, in order (torch's semantics)."""
    base = np.arange(1.0, 41.0, dtype=np.float32).reshape(5, 8)
    expected = base.copy()
    for view in (expected[:, 1::2], expected.T[::3], expected[1:3]):
        view *= np.float32(0.5)
    got = base.copy()
    F.non_finite_check_and_unscale_([got[:, 1::2], got.T[::3], got[1:3]], flag(), inv_of(2.0))
    assert np.array_equal(got, expected)
    torch = pytest.importorskip("torch")
    t = torch.from_numpy(base.copy())
    torch._amp_foreach_non_finite_check_and_unscale_([t[:, 1::2], t.T[::3], t[1:3]], torch.zeros(1),
                                                     torch.tensor([0.5]))
    assert np.array_equal(t.numpy(), expected)


@pytest.mark.parametrize("src_dtype", [np.dtype(np.float16), BF16, np.dtype(np.float32)], ids=str)
def test_out_writes_master_gradients_and_keeps_the_source(src_dtype):
    rng = np.random.default_rng(3)
    src = sample(src_dtype, 100, rng)
    keep = src.copy()
    out = np.empty(100, np.float32)
    f = flag()
    F.non_finite_check_and_unscale_([src], f, inv_of(1024.0), out=[out])
    assert np.array_equal(bits(src), bits(keep))
    assert np.array_equal(out, keep.astype(np.float32) * np.float32(2.0 ** -10))
    assert f[0] == 0


def test_mixed_dtypes_in_one_call_each_get_their_own_arithmetic():
    arrays = [np.array([3.0], d) for d in FLOATS]
    F.non_finite_check_and_unscale_(arrays, flag(), inv_of(3.0))
    inv = inv_of(3.0)[0]
    for a in arrays:
        acc = np.float64 if a.dtype == np.float64 else np.float32
        assert a[0] == (acc(3.0) * acc(inv)).astype(a.dtype)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=32), min_size=1, max_size=40),
       st.integers(-20, 40))
def test_power_of_two_scales_round_trip_exactly_in_float32(values, log2_scale):
    """scale then unscale by a power of two is exact unless it leaves float32's range."""
    x = np.array(values, np.float32)
    scale = np.float32(2.0 ** log2_scale)
    with np.errstate(over="ignore", under="ignore"):
        scaled = x * scale
    if not np.isfinite(scaled).all() or np.any((scaled == 0) != (x == 0)):
        return
    tiny = np.finfo(np.float32).tiny
    if np.any(np.abs(scaled[x != 0]) < tiny) or np.any(np.abs(x[x != 0]) < tiny):
        return  # subnormals lose bits on the way
    F.non_finite_check_and_unscale_([scaled], flag(), inv_of(scale))
    assert np.array_equal(bits(scaled), bits(x))


# ---- against torch's CPU kernels (same rule) ----
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_unscale_matches_torch_cpu_kernel(dtype):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    a = sample(np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype), 1000, rng)
    a[7] = np.inf
    t = torch.from_numpy(a.astype(np.float32)).to(getattr(torch, dtype))
    found_t = torch.zeros(1)
    scale = torch.tensor(24576.0)
    inv_t = scale.double().reciprocal().float()
    torch._amp_foreach_non_finite_check_and_unscale_([t], found_t, inv_t)
    f = flag()
    F.non_finite_check_and_unscale_([a], f, inv_t.numpy().reshape(1))
    assert f[0] == found_t.item() == 1.0
    assert np.array_equal(a.astype(np.float32), t.float().numpy())


def _torch_update(torch, scale, tracker, found, gf, bf, gi):
    s, g = torch.tensor([scale], dtype=torch.float32), torch.tensor([tracker], dtype=torch.int32)
    torch._amp_update_scale_(s, g, torch.tensor([found], dtype=torch.float32), gf, bf, gi)
    return s.item(), g.item()


def test_update_matches_torch_cpu_kernel_over_a_random_trajectory():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(11)
    gf, bf, gi = 1.7, 0.3, 3   # non-power-of-two factors: the float64-then-round rule matters
    s_t, g_t = 1234.567, 0
    scale, tracker = np.array([s_t], np.float32), np.zeros(1, np.int32)
    for _ in range(300):
        found = float(rng.random() < 0.3)
        s_t, g_t = _torch_update(torch, s_t, g_t, found, gf, bf, gi)
        F.update_scale_(scale, tracker, np.array([found], np.float32), gf, bf, gi)
        assert (float(scale[0]), int(tracker[0])) == (s_t, g_t)


# ---- update_scale_ rules ----
def run_updates(founds, *, init=65536.0, gf=2.0, bf=0.5, gi=2, **kw):
    scale, tracker = np.array([init], np.float32), np.zeros(1, np.int32)
    out = []
    for f in founds:
        F.update_scale_(scale, tracker, np.array([f], np.float32), gf, bf, gi, **kw)
        out.append(float(scale[0]))
    return out, int(tracker[0])


def test_update_backs_off_grows_after_interval_and_resets_tracker():
    scales, tracker = run_updates([0, 0, 0, 1, 0, 0, 0])
    assert scales == [65536, 131072, 131072, 65536, 65536, 131072, 131072]
    assert tracker == 1


def test_growth_never_reaches_inf():
    top = float(np.float32(2.0 ** 127))  # doubling it would overflow float32
    scales, tracker = run_updates([0, 0, 0], init=top, gi=1)
    assert scales == [top] * 3 and tracker == 0


def test_found_inf_of_several_optimizers_is_summed_and_can_be_cleared():
    scale, tracker = np.array([8.0], np.float32), np.zeros(1, np.int32)
    found = np.array([0.0, 1.0, 0.0], np.float32)
    F.update_scale_(scale, tracker, found, 2.0, 0.5, 10, clear_found_inf=True)
    assert scale[0] == 4.0 and (found == 0).all()


def test_hysteresis_backs_off_only_on_consecutive_overflows():
    over = np.zeros(1, np.int32)
    scales, _ = run_updates([1, 1, 0, 1, 1, 1, 1, 1, 1], gi=100, hysteresis=3, overflow_tracker=over)
    assert scales == [65536, 65536, 65536, 65536, 65536, 32768, 32768, 32768, 16384]
    with pytest.raises(ValueError, match="overflow_tracker"):
        run_updates([1], hysteresis=2)


def test_bounds_cap_growth_and_floor_backoff_and_flag_the_floor():
    hit = np.zeros(1, np.float32)
    scales, _ = run_updates([0, 0, 0, 0], init=4.0, gi=1, max_scale=20.0)
    assert scales == [8, 16, 20, 20]
    scales, _ = run_updates([1, 1, 1], init=4.0, min_scale=1.5, floor_hit=hit)
    assert scales == [2.0, 1.5, 1.5] and hit[0] == 1.0


def test_inv_scale_and_stats_are_kept_on_the_side():
    scale, tracker = np.array([3.0], np.float32), np.zeros(1, np.int32)
    inv, stats = np.zeros(1, np.float32), np.zeros(5 + 2 * 2)
    for f in [0, 1, 0, 1, 1]:
        F.update_scale_(scale, tracker, np.array([f], np.float32), 2.0, 0.5, 1, inv_scale=inv, stats=stats)
        assert inv[0] == np.float32(1 / np.float64(scale[0]))
    # updates 0..4: scale 6, 3, 6, 3, 1.5 -> 5 changes, ring of 2 keeps the last two
    assert stats[:5].tolist() == [5, 3, 5, 0, 5]
    assert sorted(zip(stats[5::2], stats[6::2])) == [(3.0, 3.0), (4.0, 1.5)]


# ---- bad input ----
@pytest.mark.parametrize("call, error, match", [
    (lambda: F.non_finite_check_and_unscale_(np.ones(3, np.float32), flag(), inv_of(2)), TypeError, "list"),
    (lambda: F.non_finite_check_and_unscale_([np.arange(3)], flag(), inv_of(2)), TypeError, "int64"),
    (lambda: F.non_finite_check_and_unscale_([[1.0]], flag(), inv_of(2)), TypeError, r"arrays\[0\]"),
    (lambda: F.non_finite_check_and_unscale_([mp.ones(2)], flag(), inv_of(2)), TypeError, "t.numpy"),
    (lambda: F.non_finite_check_and_unscale_([], np.zeros(()), inv_of(2)), TypeError, "float32"),
    (lambda: F.non_finite_check_and_unscale_([], np.zeros((2,), np.float32), inv_of(2)), ValueError, r"\(1,\)"),
    (lambda: F.non_finite_check_and_unscale_([], np.zeros((), np.float32), inv_of(2)), ValueError, r"\(1,\)"),
    (lambda: F.non_finite_check_and_unscale_([], flag(), np.ones(1)), TypeError, "inv_scale"),
    (lambda: F.non_finite_check_and_unscale_([], flag(), 0.5), TypeError, "inv_scale"),
    (lambda: F.non_finite_check_and_unscale_([np.ones(2, np.float32)], flag(), inv_of(2),
                                             out=[np.ones(3, np.float32)]), ValueError, "shape"),
    (lambda: F.non_finite_check_and_unscale_([np.ones(2, np.float32)], flag(), inv_of(2),
                                             out=[np.ones(2, np.float16)]), TypeError, "float32"),
    (lambda: F.non_finite_check_and_unscale_([np.ones(2, np.float32)], flag(), inv_of(2), out=[]),
     ValueError, "one destination"),
    (lambda: F.update_scale_(np.ones(1), np.zeros(1, np.int32), flag(), 2.0, 0.5, 1), TypeError, "scale"),
    (lambda: F.update_scale_(np.ones(1, np.float32), np.zeros(1, np.int64), flag(), 2.0, 0.5, 1),
     TypeError, "growth_tracker must have dtype int32"),
    (lambda: F.update_scale_(np.ones(1, np.float32), np.zeros(1, np.int32), np.zeros((1, 1), np.float32), 2.0,
                             0.5, 1), ValueError, "found_inf"),
    (lambda: F.update_scale_(np.ones(1, np.float32), np.zeros(1, np.int32), flag(), 2.0, 0.5, 0),
     ValueError, "growth_interval"),
    (lambda: F.update_scale_(np.ones(1, np.float32), np.zeros(1, np.int32), flag(), float("nan"), 0.5, 1),
     ValueError, "growth_factor"),
    (lambda: F.update_scale_(np.ones(1, np.float32), np.zeros(1, np.int32), flag(), 2.0, 0.5, 1,
                             min_scale=4.0, max_scale=2.0), ValueError, "min_scale"),
    (lambda: F.update_scale_(np.ones(1, np.float32), np.zeros(1, np.int32), flag(), 2.0, 0.5, 1,
                             stats=np.zeros(6)), ValueError, "stats"),
])
def test_bad_input_is_refused_with_a_clear_error(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_read_only_and_overlapping_destinations_are_refused():
    a = np.ones(4, np.float32)
    a.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        F.non_finite_check_and_unscale_([a], flag(), inv_of(2))
    b = np.ones(4, np.float32)
    with pytest.raises(ValueError, match="overlaps"):
        F.non_finite_check_and_unscale_([b[:2]], flag(), inv_of(2), out=[b[1:3]])


def test_an_error_leaves_every_array_untouched():
    good = np.ones(3, np.float32)
    with pytest.raises(TypeError):
        F.non_finite_check_and_unscale_([good, np.arange(2)], flag(), inv_of(2))
    assert (good == 1).all()


@pytest.mark.parametrize("flags", [[0.0, 1e-45], [np.nan], [0.0, 0.0, 2.0]])
def test_any_non_zero_found_inf_entry_is_an_overflow(flags):
    """Even a subnormal or NaN flag (e.g. from a reducer) backs off: the kernel tests bits, not sums."""
    scale, tracker = np.array([8.0], np.float32), np.array([5], np.int32)
    F.update_scale_(scale, tracker, np.array(flags, np.float32), 2.0, 0.5, 10)
    assert scale[0] == 4.0 and tracker[0] == 0
