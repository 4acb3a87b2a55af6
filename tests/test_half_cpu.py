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
