"""CPU half precision: the faster routes give the bits of float32 math rounded once."""
import numpy as np
import pytest

import mixprec as mp


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_col2im_half_is_its_float32_sum_rounded_once(dtype):
    # The overlapping columns add up in float32 and round once (the gradient of a
    # half convolution's input): bit for bit the float32 col2im of the widened
    # columns, rounded, whatever route the widening takes.
    from mixprec.ops.conv import Geometry, _col2im
    geometry = Geometry((3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), (4, 4))
    cols = np.random.default_rng(0).standard_normal((8, 16 * 9, 16)).astype(getattr(mp, dtype))
    half = _col2im(mp.tensor(cols), (8, 16, 4, 4), geometry).numpy()
    wide = _col2im(mp.tensor(cols.astype(np.float32)), (8, 16, 4, 4), geometry).numpy()
    assert half.dtype == cols.dtype
    assert half.tobytes() == wide.astype(cols.dtype).tobytes()



def test_bool_to_float16_cast_gives_numpys_values():
    # (a mask promoted for a product, e.g. relu's gradient, is picked from a table, not converted)
    mask = np.random.default_rng(0).standard_normal((3, 5, 7)) > 0
    t = mp.tensor(mask)
    for got, want in ((t, mask), (t[:, ::2], mask[:, ::2]), (t[1, 2, 3], mask[1, 2, 3]), (t[:0], mask[:0])):
        cast = got.to(mp.float16)
        assert cast.dtype == mp.float16 and cast.shape == want.shape
        assert cast.numpy().tobytes() == want.astype(np.float16).tobytes()
    assert (t * mp.ones(3, 5, 7, dtype=mp.float16)).numpy().tobytes() == mask.astype(np.float16).tobytes()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_max_pool_gradient_of_disjoint_windows_is_the_scatter_add_bit_for_bit(dtype):
    # Windows that cannot overlap: each element receives one gradient at most, added to zero in the gradient's
    # own dtype; the general route sums in float32 and rounds once. The same bits, -0, inf and NaN included.
    from mixprec.ops.pooling import _max_pool_backward
    rng = np.random.default_rng(0)
    grad = rng.standard_normal((4, 3, 16)).astype(np.float32)
    grad[0, 0, :4] = [-0.0, np.inf, -np.inf, np.nan]
    grad[1, 1, :2] = [1e-30, -70000.0]  # below and beyond float16's range
    with np.errstate(over="ignore"):
        grad = mp.tensor(grad.astype(getattr(mp, dtype)))
    index = mp.tensor(np.stack([rng.permutation(64)[:16] for _ in range(12)]).reshape(4, 3, 16))
    fast, general = (_max_pool_backward(grad, index, 64, disjoint).numpy() for disjoint in (True, False))
    assert fast.dtype == general.dtype == grad.dtype
    assert fast.tobytes() == general.tobytes()


def test_relu_gradient_in_float16_is_torchs_selection_bit_for_bit():
    # relu's float16 gradient tests the 16-bit patterns of the output: the bits of torch's threshold_backward,
    # where(output <= 0, 0, grad) (a nan output passes grad, a flat one gives +0 even for an inf or nan grad),
    # computed here by NumPy's float16 comparison, for every float16 gradient against outputs of every sign and
    # nan payload (each pattern once, shuffled)
    patterns = np.arange(2 ** 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    rng = np.random.default_rng(0)
    for _ in range(2):
        grad, output = patterns.copy(), rng.permutation(patterns)
        with np.errstate(invalid="ignore"):
            want = np.where(output <= 0, np.float16(0), grad)
        got = mp.ops.get("_relu_backward")(mp.tensor(grad), mp.tensor(output)).numpy()
        assert got.dtype == np.float16
        assert got.tobytes() == want.tobytes()


FLOAT16_PATTERNS = np.arange(2 ** 16, dtype=np.uint32).astype(np.uint16).view(np.float16)


def test_relu_in_float16_is_the_float32_maximum_rounded_bit_for_bit():
    # relu selects on the float16 patterns (halfbits.relu): every pattern gives what float32's maximum(x, 0)
    # rounded back gives: +0 for -0 and every negative number, NaNs with their payloads (signaling ones too)
    want = np.maximum(FLOAT16_PATTERNS.astype(np.float32), np.float32(0)).astype(np.float16)
    got = mp.tensor(FLOAT16_PATTERNS).relu()
    assert got.dtype == mp.float16 and got.numpy().tobytes() == want.tobytes()
    in_place = mp.tensor(FLOAT16_PATTERNS.copy())
    in_place.relu_()
    assert in_place.numpy().tobytes() == want.tobytes()


def test_max_pool_gradient_of_float16_windows_is_the_float32_scatter_add_for_every_pattern():
    # the disjoint route adds each gradient to zero on the patterns (halfbits.plus_zero): -0 becomes +0 and a
    # signaling NaN quiet, as the widened scatter-add's float32 0 + g does, for all 65,536 patterns
    from mixprec.ops.pooling import _max_pool_backward
    grad = mp.tensor(np.random.default_rng(0).permutation(FLOAT16_PATTERNS).reshape(2, 4, 8192))
    index = mp.tensor(np.stack([np.random.default_rng(i).permutation(3 * 8192)[:8192] for i in range(8)])
                      .reshape(2, 4, 8192))
    with np.errstate(invalid="ignore"):
        fast, general = (_max_pool_backward(grad, index, 3 * 8192, disjoint).numpy() for disjoint in (True, False))
    assert fast.dtype == general.dtype == np.float16
    assert fast.tobytes() == general.tobytes()


def _pools():
    from mixprec.nn import functional as F
    samples = mp.tensor(np.random.default_rng(3).random((2, 3, 2)).astype(np.float16))
    return {
        "2x2": lambda x: F.max_pool2d(x, 2, return_indices=True),
        "3x3 stride 2 padded": lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True),
        "dilated, ceil_mode": lambda x: F.max_pool2d(x, (3, 2), (2, 3), 1, 2, True, return_indices=True),
        "adaptive, overlapping": lambda x: F.adaptive_max_pool2d(x, (5, 3), return_indices=True),
        "adaptive, whole plane": lambda x: F.adaptive_max_pool2d(x, 1, return_indices=True),
        "fractional": lambda x: F.fractional_max_pool2d(x[:2, :3], 3, output_size=(5, 4), return_indices=True,
                                                        _random_samples=samples),
    }


def _pool_inputs():
    rng = np.random.default_rng(0)
    finite = FLOAT16_PATTERNS[~np.isnan(FLOAT16_PATTERNS) & (FLOAT16_PATTERNS.view(np.uint16) != 0x8000)]
    specials = np.array([0.0, 1.0, -1.0, 2.0 ** -24, -2.0 ** -24, 65504.0, -65504.0, np.inf, -np.inf],
                        dtype=np.float16)
    for _ in range(3):  # every pattern but NaN and -0 (those take float32's route), in random windows
        yield rng.permutation(finite)[:4 * 6 * 11 * 13].reshape(4, 6, 11, 13)
        yield rng.choice(specials, (4, 6, 11, 13))   # many ties: +0s, infinities, the extremes
    for extra in (-0.0, np.nan):  # and inputs that hold them
        x = rng.choice(specials, (4, 6, 11, 13))
        x[rng.random(x.shape) < 0.2] = extra
        yield x


@pytest.mark.parametrize("pool", list(_pools()))
def test_max_pool_in_float16_is_the_float32_pool_rounded_bit_for_bit(pool, monkeypatch):
    # float16 windows are compared as int16 keys (halfbits.ordered / first_max); the values and indices must be
    # those of the float32 pool of the widened input, ties (first index), padding and infinities included; an
    # input with a NaN or a -0 takes the float32 route (NumPy's maximum decides the sign of a zero maximum)
    from mixprec.ops import halfbits
    keyed = []
    monkeypatch.setattr(halfbits, "first_max", lambda keys, run=halfbits.first_max: keyed.append(1) or run(keys))
    for x in _pool_inputs():
        got_values, got_index = _pools()[pool](mp.tensor(x))
        want_values, want_index = _pools()[pool](mp.tensor(x.astype(np.float32)))
        assert got_values.dtype == mp.float16
        assert got_values.numpy().tobytes() == want_values.numpy().astype(np.float16).tobytes()
        assert np.array_equal(got_index.numpy(), want_index.numpy())
    assert len(keyed) == 6  # the six inputs without NaN or -0 took the integer route


def test_first_max_is_argmax_and_max():
    from mixprec.ops import halfbits
    rng = np.random.default_rng(0)
    for taps in (1, 2, 4, 9, 17):
        keys = rng.integers(-3, 3, (taps, 5, 7)).astype(np.int16)  # many ties
        keys[0, 0, 0], keys[-1, 0, 1] = -32768, 32767
        best, top = halfbits.first_max(keys)
        assert np.array_equal(best, keys.argmax(axis=0)) and np.array_equal(top, keys.max(axis=0))
        assert top.dtype == np.int16
