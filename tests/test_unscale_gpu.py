"""The fused CUDA kernels against the NumPy reference, bit for bit (needs a GPU: marked gpu).

Every case runs the same inputs through mp.amp.functional twice, once as CuPy
arrays (the kernels) and once as NumPy arrays (the reference), and compares the
raw bits of every result, found_inf, the scale and the trackers.
"""
import ml_dtypes
import numpy as np
import pytest

import mixprec as mp
from mixprec import backend
from mixprec.backend import devices
from mixprec.amp import _kernels
from mixprec.amp import functional as F

pytestmark = pytest.mark.gpu

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(np.float16), BF16, np.dtype(np.float32), np.dtype(np.float64)]
UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


@pytest.fixture
def cp():
    return backend.cupy_module()


def bits(a):
    a = devices.to_device(a, devices.CPU)
    return np.ascontiguousarray(a).view(UINT[a.dtype.itemsize])


def random_array(dtype, n, rng, poison=0.0):
    x = (rng.uniform(-2, 2, n) * np.exp2(rng.integers(-20, 14, n))).astype(np.float32)
    if poison:
        idx = rng.choice(n, max(1, int(poison * n)), replace=False)
        x[idx] = rng.choice([np.inf, -np.inf, np.nan], idx.size)
    return x.astype(dtype)


def both(arrays, inv_value, cp, out_dtypes=None):
    """Run kernels and reference on copies of `arrays`; return (gpu results, cpu results, flags)."""
    dev = devices.as_device("cuda")
    host = [a.copy() for a in arrays]
    device = [devices.to_device(a, dev) for a in arrays]
    inv_h = np.array([np.float32(1.0 / np.float64(np.float32(inv_value)))], np.float32)
    f_h, f_d = np.zeros(1, np.float32), cp.zeros(1, np.float32)
    if out_dtypes is None:
        F.non_finite_check_and_unscale_(device, f_d, cp.asarray(inv_h))
        F.non_finite_check_and_unscale_(host, f_h, inv_h)
        return device, host, (cp.asnumpy(f_d), f_h)
    out_h = [np.empty(a.shape, d) for a, d in zip(arrays, out_dtypes)]
    out_d = [cp.empty(a.shape, d) for a, d in zip(arrays, out_dtypes)]
    F.non_finite_check_and_unscale_(device, f_d, cp.asarray(inv_h), out=out_d)
    F.non_finite_check_and_unscale_(host, f_h, inv_h, out=out_h)
    return out_d, out_h, (cp.asnumpy(f_d), f_h)


def assert_same(results_d, results_h, flags):
    for d, h in zip(results_d, results_h):
        assert np.array_equal(bits(d), bits(h))
    assert flags[0].tobytes() == flags[1].tobytes()


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("poison", [0.0, 0.01])
def test_random_inputs_match_the_reference_bit_for_bit(cp, dtype, poison):
    rng = np.random.default_rng(0)
    arrays = [random_array(dtype, n, rng, poison) for n in (1, 7, 4096, 65536 + 3, 300_001)]
    assert_same(*both(arrays, 3.0 * 2 ** 11, cp))


def test_empty_list_launches_nothing_and_zero_size_arrays_are_skipped(cp):
    launches = _kernels.launch_count()
    f = cp.zeros(1, np.float32)
    F.non_finite_check_and_unscale_([], f, cp.ones(1, np.float32))
    F.non_finite_check_and_unscale_([cp.zeros((0, 5), np.float32)], f, cp.ones(1, np.float32))
    assert _kernels.launch_count() == launches and float(f[0]) == 0.0
    rng = np.random.default_rng(1)
    arrays = [np.zeros((0,), np.float16), random_array(np.float16, 13, rng), np.zeros((3, 0), np.float16)]
    assert_same(*both(arrays, 1024.0, cp))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("offset", [1, 3, 5])
def test_misaligned_views_take_the_scalar_path_and_match(cp, dtype, offset):
    rng = np.random.default_rng(offset)
    base_h = random_array(dtype, 1000, rng, 0.005)
    base_d = devices.to_device(base_h, devices.as_device("cuda"))
    inv = np.array([np.float32(1 / 6.0)], np.float32)
    f_h, f_d = np.zeros(1, np.float32), cp.zeros(1, np.float32)
    F.non_finite_check_and_unscale_([base_d[offset:]], f_d, cp.asarray(inv))
    F.non_finite_check_and_unscale_([base_h[offset:]], f_h, inv)
    assert np.array_equal(bits(base_d), bits(base_h)) and cp.asnumpy(f_d)[0] == f_h[0]


def test_strided_views_are_unscaled_in_place_and_neighbours_untouched(cp):
    """The two views share elements (row 0, odd columns divisible by 3...): like torch's
    _amp_foreach_non_finite_check_and_unscale_, each listed view is unscaled in turn, so a shared
    element is divided twice, on the GPU (one launch per run of non-overlapping views) as in the reference."""
    rng = np.random.default_rng(2)
    base_h = random_array(np.float32, 64 * 33, rng).reshape(64, 33)
    base_d = cp.asarray(base_h)
    expected = base_h.copy()
    expected[:, 1::2] *= np.float32(0.25)
    expected.T[::3] *= np.float32(0.25)
    inv = np.array([0.25], np.float32)
    F.non_finite_check_and_unscale_([base_d[:, 1::2], base_d.T[::3]], cp.zeros(1, np.float32), cp.asarray(inv))
    F.non_finite_check_and_unscale_([base_h[:, 1::2], base_h.T[::3]], np.zeros(1, np.float32), inv)
    assert np.array_equal(bits(base_d), bits(base_h))
    assert np.array_equal(bits(base_h), bits(expected))


def test_mixed_dtypes_in_one_call(cp):
    rng = np.random.default_rng(3)
    arrays = [random_array(d, n, rng, 0.01 if i == 2 else 0) for i, (d, n) in
              enumerate(zip(DTYPES * 2, [5, 700, 70_000, 3, 1, 9, 12345, 2]))]
    launches = _kernels.launch_count()
    assert_same(*both(arrays, 512.0, cp))
    assert _kernels.launch_count() - launches == len(DTYPES)  # one launch per dtype


@pytest.mark.parametrize("src", [np.dtype(np.float16), BF16], ids=lambda d: d.name)
def test_unscale_into_float32_master_gradients(cp, src):
    rng = np.random.default_rng(4)
    arrays = [random_array(src, n, rng, 0.001) for n in (1, 8, 1001, 70_000)]
    out_d, out_h, flags = both(arrays, 2.0 ** 14, cp, out_dtypes=[np.float32] * 4)
    assert_same(out_d, out_h, flags)


def test_ten_thousand_tiny_tensors_are_one_launch(cp):
    rng = np.random.default_rng(5)
    arrays = [random_array(np.float32, int(n), rng) for n in rng.integers(1, 40, 10_000)]
    arrays[9_999][0] = np.nan
    launches = _kernels.launch_count()
    assert_same(*both(arrays, 3.0, cp))
    assert _kernels.launch_count() - launches == 1


@pytest.mark.slow
def test_a_tensor_over_two_gibibytes_is_fully_processed(cp):
    """64-bit indexing: every element past the 2**31-byte mark is unscaled and checked."""
    n = 2 ** 29 + 7  # float32: 2**31 + 28 bytes
    try:
        big = cp.full((n,), 3.0, dtype=np.float32)
    except cp.cuda.memory.OutOfMemoryError:
        pytest.skip("not enough GPU memory for a 2 GiB tensor")
    big[n - 1] = np.inf
    f = cp.zeros(1, np.float32)
    F.non_finite_check_and_unscale_([big], f, cp.asarray(np.array([0.5], np.float32)))
    assert float(f[0]) == 1.0
    assert int(cp.count_nonzero(big[: n - 1] != np.float32(1.5))) == 0 and bool(cp.isinf(big[n - 1]))
    del big


# ---- the update kernel ----
@pytest.mark.parametrize("options", [
    {}, {"hysteresis": 3}, {"min_scale": 2.0 ** 10, "max_scale": 2.0 ** 18}])
def test_update_kernel_matches_the_reference_over_a_random_trajectory(cp, options):
    rng = np.random.default_rng(6)
    h = dict(scale=np.array([65536.0], np.float32), tracker=np.zeros(1, np.int32), over=np.zeros(1, np.int32),
             floor=np.zeros(1, np.float32), inv=np.zeros(1, np.float32), stats=np.zeros(5 + 2 * 8))
    d = {k: cp.asarray(v) for k, v in h.items()}
    for _ in range(400):
        found = np.array([float(rng.random() < 0.2), 0.0], np.float32)
        for arrays, fi in ((h, found.copy()), (d, cp.asarray(found))):
            F.update_scale_(arrays["scale"], arrays["tracker"], fi, 1.5, 0.375, 3, overflow_tracker=arrays["over"],
                            floor_hit=arrays["floor"], inv_scale=arrays["inv"], stats=arrays["stats"],
                            clear_found_inf=True, **options)
        for k in h:
            assert np.array_equal(bits(d[k]), bits(h[k])), k


# ---- steady state: tables stay on the device; the launch can be captured ----
def test_steady_state_copies_no_table_and_reuses_it(cp):
    grads = [cp.ones(n, np.float16) for n in (10, 1000, 100_000)]
    f, inv = cp.zeros(1, np.float32), cp.ones(1, np.float32)
    F.non_finite_check_and_unscale_(grads, f, inv)
    uploads = _kernels.TABLES.uploads
    for _ in range(5):
        F.non_finite_check_and_unscale_(grads, f, inv)
    assert _kernels.TABLES.uploads == uploads
    F.non_finite_check_and_unscale_(grads[:2], f, inv)  # a different list is a new table
    assert _kernels.TABLES.uploads == uploads + 1


def test_unscale_and_update_can_be_captured_in_a_cuda_graph(cp):
    grads = [cp.full(n, 6.0, np.float32) for n in (3, 5000)]
    scale, tracker = cp.full(1, 4.0, np.float32), cp.zeros(1, np.int32)
    inv, found = cp.full(1, 0.25, np.float32), cp.zeros(1, np.float32)

    def iteration():
        F.non_finite_check_and_unscale_(grads, found, inv)
        F.update_scale_(scale, tracker, found, 2.0, 0.5, 2, inv_scale=inv, clear_found_inf=True)
    iteration()  # compile and build the table outside the capture
    cp.cuda.Device().synchronize()
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        iteration()
        graph = stream.end_capture()
    expected_scale = 4.0
    for step in range(4):  # replay: every launch reads scale and inv_scale from device memory
        with stream:
            for g in grads:
                g.fill(6.0)
            graph.launch(stream)
        stream.synchronize()
        inv_used = 1.0 / expected_scale
        assert all(bool((g == np.float32(6.0 * inv_used)).all()) for g in grads)
        expected_scale *= 2.0 if step % 2 == 0 else 1.0  # tracker was 1 after the warm-up iteration
        assert float(scale[0]) == expected_scale


def test_a_captured_table_survives_cache_eviction_and_one_can_be_built_inside_a_capture(cp):
    grads = [cp.full(n, 6.0, np.float32) for n in (3, 5000)]
    found, inv = cp.zeros(1, np.float32), cp.full(1, 0.25, np.float32)
    F.non_finite_check_and_unscale_(grads, found, inv)  # warm-up: builds the chunk table
    cp.cuda.Device().synchronize()
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        F.non_finite_check_and_unscale_(grads, found, inv)
        graph = stream.end_capture()
    others = [cp.ones(n, np.float32) for n in range(1, 2 * _kernels.TABLES.capacity + 2)]
    for a in others:  # more new tables than the cache holds: every unpinned table is evicted
        F.non_finite_check_and_unscale_([a], found, inv)
    cp.get_default_memory_pool().free_all_blocks()
    for g in grads:
        g.fill(6.0)
    with stream:
        graph.launch(stream)
    stream.synchronize()
    assert all(bool((g == np.float32(1.5)).all()) for g in grads)
    fresh = cp.full(7, 6.0, np.float32)  # a table first needed inside a capture: written by recorded launches
    pinned = len(_kernels.TABLES.pinned)
    with stream:
        stream.begin_capture()
        F.non_finite_check_and_unscale_([fresh], found, inv)
        graph = stream.end_capture()
        graph.launch(stream)
    stream.synchronize()
    assert bool((fresh == np.float32(1.5)).all()) and len(_kernels.TABLES.pinned) == pinned + 1


# ---- the scaler on CUDA follows the same trajectory as on the CPU ----
def test_grad_scaler_on_cuda_matches_the_cpu_scaler(cp):
    def run(device):
        s = mp.amp.GradScaler(device, growth_interval=2)
        w = mp.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4), device=device, requires_grad=True)
        opt = mp.optim.SGD([w], lr=0.1)
        scales, skipped = [], []
        for step in range(8):
            s.scale((w * w).sum()).backward()
            if step in (3, 4):
                g = w.grad.numpy().copy()
                g[0, 0] = np.inf
                w.grad = mp.tensor(g, device=device)
            s.step(opt)
            skipped.append(s.last_step_skipped)
            s.update()
            opt.zero_grad()
            scales.append(s.get_scale())
        return scales, skipped, s.statistics(), w.numpy()
    gpu_run, cpu_run = run("cuda"), run("cpu")
    assert gpu_run[0] == cpu_run[0] and gpu_run[2] == cpu_run[2]  # scales and statistics (skipped steps: 2)
    assert cpu_run[1] == [False] * 3 + [True] * 2 + [False] * 3
    assert gpu_run[1] == [None] * 8  # on the GPU the step is taken back on the device: the host never reads it
    np.testing.assert_array_equal(gpu_run[3], cpu_run[3])
