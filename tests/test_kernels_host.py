"""The CUDA kernels' own source, built for the host, against the NumPy reference, bit for bit (no GPU).

tools/host_kernels.py compiles kernels/*.cu exactly as CuPy gets them, with g++ and
host equivalents of the few PTX primitives (kernels/host_emulation.cuh), and runs
them through mixprec.amp._kernels' own launcher (chunk tables, runs of
non-overlapping arrays, UpdateArgs blocks, the table cache). Skipped when there is
no C++ compiler. docs/grad-scaler.md says what this proves and what only a GPU can.
"""
import gc
import runpy
import weakref
from pathlib import Path
from types import SimpleNamespace

import ml_dtypes
import numpy as np
import pytest

import mixprec as mp
from mixprec.amp import _host_build, _kernels, _reference
from mixprec.amp._layout import (CHUNK_HEADER_SIZE, AdamRule, ScaleRule, SGDRule, Stat, UpdateScaleArgs,
                                 chunk_table)

ROOT = Path(__file__).resolve().parent.parent
BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = {"float16": np.dtype(np.float16), "bfloat16": BF16, "float32": np.dtype(np.float32),
          "float64": np.dtype(np.float64)}
UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


# tools/ holds scripts, not a package: run the script's definitions (its main() only runs as __main__)
tool = SimpleNamespace(**runpy.run_path(str(ROOT / "tools" / "host_kernels.py"), run_name="host_kernels"))


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    try:
        return tool.build(tmp_path_factory.mktemp("host_kernels"))
    except tool.HostBuildUnavailable as exc:
        pytest.skip(f"cannot build the kernels for the host: {exc}")


@pytest.fixture
def runner(library):
    return tool.HostRunner(library)


def bits(a):
    return np.ascontiguousarray(a).view(UINT[a.dtype.itemsize])


def aligned(a, offset=0):
    """A copy of `a` at a 256-byte boundary plus `offset` elements, as CuPy's allocator places arrays."""
    nbytes = (a.size + offset) * a.itemsize
    raw = np.zeros(nbytes + 512, np.uint8)
    start = -raw.__array_interface__["data"][0] % 256
    out = raw[start:start + nbytes].view(a.dtype)[offset:].reshape(a.shape)
    out[...] = a
    return out


def random_array(dtype, n, rng, poison=0.0):
    """Values over many binades, subnormals of every format included, with inf/NaN sprinkled in."""
    x = (rng.uniform(-2, 2, n) * np.exp2(rng.integers(-30, 14, n))).astype(np.float32)
    if poison:
        idx = rng.choice(n, max(1, int(poison * n)), replace=False)
        x[idx] = rng.choice([np.inf, -np.inf, np.nan], idx.size)
    with np.errstate(over="ignore"):
        return x.astype(dtype)


def inv_of(scale):
    return np.array([np.float32(1.0 / np.float64(np.float32(scale)))], np.float32)


def run_both(runner, arrays, scale, out_dtype=None, offset=0):
    """The same inputs through the host-built kernel (one dtype pair) and the reference; returns
    (kernel outputs, reference outputs, kernel found_inf, reference found_inf)."""
    k_src = [aligned(a, offset) for a in arrays]
    r_src = [a.copy() for a in arrays]
    if out_dtype is None:
        k_dst, r_dst = k_src, r_src
    else:
        k_dst = [aligned(np.zeros(a.shape, out_dtype), offset) for a in arrays]
        r_dst = [np.zeros(a.shape, out_dtype) for a in arrays]
    flags = np.zeros(1, np.float32), np.zeros(1, np.float32)
    _kernels.unscale(list(zip(k_src, k_dst)), flags[0], inv_of(scale), runner)
    _reference.unscale([(s, d) for s, d in zip(r_src, r_dst) if s.size], flags[1], inv_of(scale))
    return k_dst, r_dst, flags[0], flags[1]


def assert_same(k_out, r_out, k_flag, r_flag):
    assert len(k_out) == len(r_out)
    for k, r in zip(k_out, r_out):
        assert np.array_equal(bits(k), bits(r))
    assert k_flag.tobytes() == r_flag.tobytes()


# ---- unscale ----
@pytest.mark.parametrize("pair", _kernels.UNSCALE_PAIRS, ids=lambda p: f"{p[0]}->{p[1]}")
@pytest.mark.parametrize("poison", [0.0, 0.01])
def test_random_inputs_over_many_chunks_and_tails(runner, pair, poison):
    rng = np.random.default_rng(0)
    src, dst = DTYPES[pair[0]], DTYPES[pair[1]]
    arrays = [random_array(src, n, rng, poison) for n in (1, 7, 4096, 65536 + 3, 300_001)]
    out = None if src == dst else dst
    k_out, r_out, k_flag, r_flag = run_both(runner, arrays, 3.0 * 2 ** 11, out)
    assert_same(k_out, r_out, k_flag, r_flag)
    assert k_flag[0] == (1.0 if poison else 0.0)
    assert runner.launches[-1][1] == 1 + 1 + 1 + 2 + 5  # one block per chunk of 65,536, tails included


@pytest.mark.parametrize("pair", _kernels.UNSCALE_PAIRS, ids=lambda p: f"{p[0]}->{p[1]}")
@pytest.mark.parametrize("offset", [1, 3, 5])
def test_misaligned_tensors_take_the_element_path_and_match(runner, pair, offset):
    rng = np.random.default_rng(offset)
    src, dst = DTYPES[pair[0]], DTYPES[pair[1]]
    arrays = [random_array(src, n, rng, 0.002) for n in (1000, 65536 * 2 + 9)]
    assert_same(*run_both(runner, arrays, 6.0, None if src == dst else dst, offset=offset))


def test_empty_lists_and_zero_size_tensors_launch_nothing(runner):
    before = _kernels.launch_count()
    flag = np.zeros(1, np.float32)
    _kernels.unscale([], flag, inv_of(2.0), runner)
    empty = np.zeros((0, 5), np.float32)
    _kernels.unscale([(empty, empty)], flag, inv_of(2.0), runner)
    assert _kernels.launch_count() == before and runner.launches == [] and flag[0] == 0.0
    rng = np.random.default_rng(1)
    arrays = [np.zeros((0,), np.float16), random_array(np.float16, 13, rng), np.zeros((3, 0), np.float16)]
    assert_same(*run_both(runner, arrays, 1024.0))
    assert len(runner.launches) == 1


def test_ten_thousand_tiny_tensors_are_one_launch_and_see_a_nan_in_the_very_last_element(runner):
    rng = np.random.default_rng(5)
    arrays = [random_array(np.float32, int(n), rng) for n in rng.integers(1, 40, 10_000)]
    arrays[-1][-1] = np.nan
    k_out, r_out, k_flag, r_flag = run_both(runner, arrays, 3.0)
    assert_same(k_out, r_out, k_flag, r_flag)
    assert k_flag[0] == 1.0 and len(runner.launches) == 1 and runner.launches[0][1] == 10_000


@pytest.mark.parametrize("name", DTYPES)
@pytest.mark.parametrize("n", [8, 9, 65536, 65537])
def test_inf_or_nan_only_in_the_last_element_is_found(runner, name, n):
    """The last element sits in the vector path (n a multiple of 8), in a tail, or alone in a last chunk."""
    for bad in (np.inf, np.nan):
        a = np.ones(n, DTYPES[name])
        a[-1] = bad
        k_out, r_out, k_flag, r_flag = run_both(runner, [a], 4.0)
        assert_same(k_out, r_out, k_flag, r_flag)
        assert k_flag[0] == 1.0


@pytest.mark.parametrize("name", DTYPES)
def test_subnormals_in_and_out_are_kept_not_flushed(runner, name):
    dtype = DTYPES[name]
    info = ml_dtypes.finfo(dtype) if dtype == BF16 else np.finfo(dtype)
    tiny, smallest = float(info.tiny), float(info.smallest_subnormal)
    values = np.array([smallest, 3 * smallest, tiny / 3, tiny, 2 * tiny, -5 * smallest, 0.0, -0.0])
    a = values.astype(dtype)
    for scale in (4.0, 0.25, 3.0):  # results below, above, and rounded within the subnormal range
        k_out, r_out, k_flag, r_flag = run_both(runner, [a], scale)
        assert_same(k_out, r_out, k_flag, r_flag)
        if scale == 0.25:  # four times larger: every non-zero subnormal input is still non-zero
            assert np.count_nonzero(k_out[0].astype(np.float64)) == 6
    b = np.array([1.5 * 2.0 ** -126, 2.0 ** -140], np.float32)  # float32 results deep in the subnormals
    k_out, r_out, *_ = run_both(runner, [b], 8.0)
    assert_same(k_out, r_out, *_)
    assert k_out[0][0] == np.float32(1.5 * 2.0 ** -129) and k_out[0][1] == np.float32(2.0 ** -143)


@pytest.mark.parametrize("src", ["float16", "bfloat16"])
@pytest.mark.parametrize("offset", [0, 1])
def test_half_gradients_unscaled_into_float32_master_gradients(runner, src, offset):
    rng = np.random.default_rng(4)
    arrays = [random_array(DTYPES[src], n, rng, 0.001) for n in (1, 8, 1001, 70_000)]
    k_out, r_out, k_flag, r_flag = run_both(runner, arrays, 2.0 ** 14, np.float32, offset=offset)
    assert_same(k_out, r_out, k_flag, r_flag)
    assert all(k.dtype == np.float32 for k in k_out)


def test_a_chunk_table_spanning_many_tensors_is_laid_out_as_documented():
    table = chunk_table(([100, 200, 300], [400, 500, 600]), [3, 70_000, 65_536], 65_536)
    assert table[:CHUNK_HEADER_SIZE].tolist() == [3, 4, 65_536, 2]
    rest = table[CHUNK_HEADER_SIZE:].tolist()
    assert rest[:6] == [100, 200, 300, 400, 500, 600] and rest[6:9] == [3, 70_000, 65_536]
    assert rest[9:13] == [0, 1, 1, 2] and rest[13:17] == [0, 0, 1, 0]  # block -> tensor, block -> chunk


def test_strided_views_go_through_a_copy_and_write_back(runner):
    rng = np.random.default_rng(2)
    base = random_array(np.float32, 64 * 33, rng).reshape(64, 33)
    views = [base[:, 1::2], base[::-1, ::4]]
    k_base, r_base = aligned(base), base.copy()
    flags = np.zeros(1, np.float32), np.zeros(1, np.float32)
    inv = inv_of(4.0)
    _kernels.unscale([(v, v) for v in (k_base[:, 1::2], k_base[::-1, ::4])], flags[0], inv, runner)
    _reference.unscale([(v, v) for v in (r_base[:, 1::2], r_base[::-1, ::4])], flags[1], inv)
    assert np.array_equal(bits(k_base), bits(r_base)) and len(views) == 2
    assert len(runner.launches) == 2  # the two views overlap in memory extent: two runs, in order


def test_views_that_share_elements_are_unscaled_in_list_order_like_torch(runner):
    """torch's _amp_foreach_non_finite_check_and_unscale_ unscales each listed tensor in turn, so an element
    that two views share is divided twice; the kernel path splits such a list into runs to do the same."""
    base = np.arange(1.0, 41.0, dtype=np.float32)
    k_base = aligned(base)
    pairs = [(k_base[0:25], k_base[0:25]), (k_base[20:40], k_base[20:40]), (k_base[30:35], k_base[30:35])]
    _kernels.unscale(pairs, np.zeros(1, np.float32), inv_of(2.0), runner)
    want = base.copy()
    for lo, hi in ((0, 25), (20, 40), (30, 35)):
        want[lo:hi] *= np.float32(0.5)
    assert np.array_equal(k_base, want) and len(runner.launches) == 3
    torch = pytest.importorskip("torch")
    t = torch.from_numpy(base.copy())
    torch._amp_foreach_non_finite_check_and_unscale_([t[0:25], t[20:40], t[30:35]], torch.zeros(1),
                                                     torch.tensor([0.5]))
    assert np.array_equal(t.numpy(), want)


def test_disjoint_arrays_stay_one_launch(runner):
    base = aligned(np.ones(1000, np.float32))
    pairs = [(base[i:i + 100], base[i:i + 100]) for i in range(0, 1000, 100)]  # adjacent, not overlapping
    _kernels.unscale(pairs, np.zeros(1, np.float32), inv_of(2.0), runner)
    assert len(runner.launches) == 1 and (base == 0.5).all()


# ---- update ----
def update_state(init):
    return dict(scale=np.array([init], np.float32), growth_tracker=np.zeros(1, np.int32),
                found_inf=np.zeros(3, np.float32), overflow_tracker=np.zeros(1, np.int32),
                floor_hit=np.zeros(1, np.float32), inv_scale=np.zeros(1, np.float32),
                stats=np.zeros(Stat.RING + 2 * 8))


@pytest.mark.parametrize("rule, init", [
    (ScaleRule(1.5, 0.375, 3), 65536.0),
    (ScaleRule(1.7, 0.3, 2, hysteresis=3), 1234.567),
    (ScaleRule(2.0, 0.5, 1, min_scale=2.0 ** 10, max_scale=2.0 ** 18), 2.0 ** 14),
    (ScaleRule(3.0, 0.25, 2, hysteresis=2, min_scale=1e-40, max_scale=3e38), 2.0 ** 120),  # subnormal floor, near inf
    (ScaleRule(1.0, 1.0, 5), 128.0),                                                      # a static scale
])
def test_update_kernel_matches_the_reference_over_long_random_schedules(runner, rule, init):
    rng = np.random.default_rng(6)
    kernel, reference = update_state(init), update_state(init)
    for step in range(3000):
        p = 0.5 if step % 500 < 50 else 0.1  # bursts of overflows reach the floor
        found = np.where(rng.random(3) < p, rng.choice([1.0, np.nan, 1e-45, -0.0], 3), 0.0).astype(np.float32)
        clear = bool(step % 3)
        for state in (kernel, reference):
            state["found_inf"][...] = np.where(state["found_inf"] != 0, state["found_inf"], found)
        _kernels.update_scale(UpdateScaleArgs(rule=rule, clear_found_inf=clear, **kernel), runner)
        _reference.update_scale(UpdateScaleArgs(rule=rule, clear_found_inf=clear, **reference))
        for name in kernel:
            assert np.array_equal(bits(kernel[name]), bits(reference[name])), (step, name)
    assert reference["stats"][Stat.STEPS] == 3000 and reference["stats"][Stat.SKIPPED_STEPS] > 300


def test_update_without_optional_arrays_is_torchs_rule(runner):
    rule = ScaleRule(2.0, 0.5, 2)
    state = dict(scale=np.array([8.0], np.float32), growth_tracker=np.zeros(1, np.int32),
                 found_inf=np.zeros(1, np.float32))
    scales = []
    for found in (0, 0, 1, 0, 0, 0):
        state["found_inf"][0] = found
        _kernels.update_scale(UpdateScaleArgs(rule=rule, **state), runner)
        scales.append(float(state["scale"][0]))
    assert scales == [8.0, 16.0, 8.0, 8.0, 16.0, 16.0] and state["growth_tracker"][0] == 1


# ---- CUDA graphs: tables a capture used outlive cache eviction, including one built inside it ----
def test_a_table_used_in_a_capture_is_never_evicted_and_replays(library):
    runner = tool.HostRunner(library, capacity=2)
    grads = [aligned(np.full(n, 6.0, np.float32)) for n in (3, 5000)]
    found, inv = np.zeros(1, np.float32), inv_of(4.0)
    _kernels.unscale([(g, g) for g in grads], found, inv, runner)  # warm-up: builds the table
    runner.capturing_now = True
    _kernels.unscale([(g, g) for g in grads], found, inv, runner)  # "captured": pins it
    runner.capturing_now = False
    captured = runner.launches[-1]
    pinned = weakref.ref(runner.tables.pinned[0])
    others = []
    for n in range(2, 12):  # ten other gradient lists overflow a cache of two
        others.append(aligned(np.ones(n, np.float32)))
        _kernels.unscale([(others[-1], others[-1])], found, inv, runner)
    evicted = weakref.ref(runner.tables._tables[next(iter(runner.tables._tables))])
    _kernels.unscale([(a, a) for a in others[:3]], found, inv, runner)
    _kernels.unscale([(a, a) for a in others[3:6]], found, inv, runner)
    gc.collect()
    assert evicted() is None  # eviction really frees tables ...
    assert pinned() is not None and captured[3][0] == runner.pointer(pinned())  # ... but not a captured one
    for g in grads:
        g[...] = 6.0
    inv[0] = np.float32(1 / 3)  # the scale lives on the device: a replay uses its current value
    runner.replay(captured)
    assert all((g == np.float32(6.0) * np.float32(1 / 3)).all() for g in grads)


def test_a_table_first_needed_inside_a_capture_is_pinned_and_replays(runner):
    runner.capturing_now = True
    g, found, inv = np.full(10, 6.0, np.float32), np.zeros(1, np.float32), inv_of(2.0)  # (the graph keeps using them)
    _kernels.unscale([(g, g)], found, inv, runner)
    runner.capturing_now = False
    assert len(runner.tables.pinned) == 1 and runner.launches[-1][3][0] == runner.pointer(runner.tables.pinned[0])
    g[...] = 6.0
    runner.replay(runner.launches[-1])
    assert (g == 3.0).all()


def test_a_captured_update_replays_from_device_state(runner):
    state = dict(scale=np.array([4.0], np.float32), growth_tracker=np.zeros(1, np.int32),
                 found_inf=np.zeros(1, np.float32), inv_scale=np.zeros(1, np.float32))
    args = UpdateScaleArgs(rule=ScaleRule(2.0, 0.5, 2), clear_found_inf=True, **state)
    _kernels.update_scale(args, runner)
    runner.capturing_now = True
    _kernels.update_scale(args, runner)
    runner.capturing_now = False
    captured = runner.launches[-1]
    assert state["scale"][0] == 8.0 and len(runner.tables.pinned) == 1
    state["found_inf"][0] = 1.0
    runner.replay(captured)
    assert state["scale"][0] == 4.0 and state["inv_scale"][0] == 0.25 and state["found_inf"][0] == 0.0


# ---- CuPy without CUDA headers: the error says what to install ----
def test_a_kernel_compile_failure_for_missing_headers_names_the_package_to_install(monkeypatch):
    class CompileException(Exception):
        pass

    class FakeCupy:
        class cuda:
            class Device:
                def __init__(self, index):
                    pass

                def __enter__(self):
                    return self

                def __exit__(self, *exc):
                    return False

        @staticmethod
        def RawModule(**kwargs):
            raise CompileException('kern.cu(1): catastrophic error: cannot open source file "vector_types.h"')

    monkeypatch.setattr(_kernels, "cupy_module", lambda: FakeCupy)
    with pytest.raises(_kernels.KernelCompileError, match=r"cupy-cuda12x\[ctk\]") as info:
        _kernels.CudaRunner()._kernel("update_scale.cu", "update_scale", 0)
    assert "vector_types.h" in str(info.value) and "update_scale.cu" in str(info.value)


# ---- fused optimizers: kernels/multi_tensor_optimizers.cu against their twin (mixprec.amp._reference) ----
ADAM_RULES = [AdamRule(1e-3, 0.9, 0.999, 1e-8, 0.0, False, False, False),
              AdamRule(2e-2, 0.6, 0.99, 1e-6, 0.1, True, True, False),     # L2 decay, amsgrad, maximize
              AdamRule(5e-3, 0.2, 0.9, 1e-30, 0.3, True, False, True)]     # AdamW; lerp from the gradient's end
SGD_RULES = [SGDRule(0.1, 0.9, 0.0, 0.0, False, False, True),             # first step: buffer = gradient
             SGDRule(0.1, 0.9, 0.3, 0.01, False, True, False),
             SGDRule(0.05, 0.8, 0.0, 0.02, True, False, False),            # nesterov
             SGDRule(0.3, 0.0, 0.0, 0.0, False, False, False)]             # no momentum: no buffer list
OPTIMIZER_SIZES = (1, 0, 7, 65536 + 3, 300, 0)


def optimizer_lists(kind, rule, dtype, copy, rng, poison=0.0):
    """One group's lists: values over many binades (moments down in the subnormals), steps differing by tensor."""
    sizes = OPTIMIZER_SIZES
    lists = {"PARAM": [random_array(dtype, n, rng) for n in sizes],
             "GRAD": [random_array(dtype, n, rng, poison if n else 0.0) for n in sizes],
             "WEIGHT_COPY": [np.zeros(n, copy) if copy else None for n in sizes]}
    if kind == "ADAM":
        lists["EXP_AVG"] = [random_array(dtype, n, rng) for n in sizes]
        lists["EXP_AVG_SQ"] = [np.abs(random_array(dtype, n, rng)) for n in sizes]
        lists["MAX_EXP_AVG_SQ"] = [np.abs(random_array(dtype, n, rng)) if rule.amsgrad else None for n in sizes]
        lists["STEP"] = [np.array([k % 3 * 40], np.int64) for k in range(len(sizes))]
    else:
        lists["MOMENTUM_BUFFER"] = [random_array(dtype, n, rng) if rule.momentum else None for n in sizes]
    return lists


def aligned_lists(lists):
    return {name: [None if a is None else aligned(a) for a in arrays] for name, arrays in lists.items()}


def assert_lists_equal(kernel, twin):
    for name, arrays in kernel.items():
        for k, r in zip(arrays, twin[name]):
            if k is not None:
                assert np.array_equal(bits(k), bits(r)), name


@pytest.mark.parametrize("types", _kernels.OPTIMIZER_TYPES, ids=lambda t: f"{t[0]}+{t[1]}")
@pytest.mark.parametrize("kind, rule", [("ADAM", r) for r in ADAM_RULES] + [("SGD", r) for r in SGD_RULES])
def test_fused_optimizer_kernels_match_their_twin_bit_for_bit(runner, kind, rule, types):
    """Every option, every (parameter, weight copy) dtype pair; tails, empty tensors, subnormals; with and
    without a loss scale; inf/NaN gradients stepped without a scaler (the canonical NaN everywhere)."""
    rng = np.random.default_rng(7)
    dtype, copy = DTYPES[types[0]], None if types[1] is None else DTYPES[types[1]]
    for grad_scale, poison in ((None, 0.0), (np.array([3.0 * 2 ** 12], np.float32), 0.0), (None, 0.002)):
        twin = optimizer_lists(kind, rule, dtype, copy, rng, poison)
        kernel = aligned_lists(twin)
        found = np.zeros(1, np.float32)
        _kernels.optimizer_step(kind, kernel, rule, grad_scale, found, runner)
        _reference.optimizer_step(kind, twin, rule, grad_scale, found)
        assert_lists_equal(kernel, twin)
    assert runner.launches[-1][1] == 1 + 1 + 2 + 1  # one block per chunk of the non-empty tensors


@pytest.mark.parametrize("kind, rule", [("ADAM", ADAM_RULES[1]), ("SGD", SGD_RULES[1])])
def test_a_set_found_inf_skips_on_the_device_and_minus_zero_does_not(runner, kind, rule):
    rng = np.random.default_rng(8)
    for flag, skipped in ((1.0, True), (np.nan, True), (1e-45, True), (-0.0, False)):
        twin = optimizer_lists(kind, rule, np.dtype(np.float32), None, rng)
        kernel, before = aligned_lists(twin), aligned_lists(twin)
        found = np.array([flag], np.float32)
        _kernels.optimizer_step(kind, kernel, rule, np.array([2.0], np.float32), found, runner)
        _reference.optimizer_step(kind, twin, rule, np.array([2.0], np.float32), found)
        assert_lists_equal(kernel, twin)
        changed = any(a is not None and not np.array_equal(bits(a), bits(b))
                      for name in kernel for a, b in zip(kernel[name], before[name]))
        assert changed != skipped


def test_adam_counts_every_tensors_step_on_the_device_even_an_empty_ones(runner):
    lists = {"PARAM": [np.zeros(0, np.float32)] * 2, "GRAD": [np.zeros(0, np.float32)] * 2,
             "EXP_AVG": [np.zeros(0, np.float32)] * 2, "EXP_AVG_SQ": [np.zeros(0, np.float32)] * 2,
             "MAX_EXP_AVG_SQ": [None] * 2, "STEP": [np.array([5], np.int64), np.array([0], np.int64)],
             "WEIGHT_COPY": [None] * 2}
    _kernels.optimizer_step("ADAM", lists, ADAM_RULES[0], None, np.zeros(1, np.float32), runner)
    assert [int(s[0]) for s in lists["STEP"]] == [6, 1] and [r[0] for r in runner.launches] == ["count_steps"]


# ---- whole AMP steps on the host-built kernels, and a captured one replayed ----
def amp_setup(level, fused_cls):
    mp.manual_seed(0)
    model = mp.nn.Sequential(mp.nn.Linear(6, 16), mp.nn.LayerNorm(16), mp.nn.ReLU(), mp.nn.Linear(16, 3))
    opt = getattr(mp.optim, fused_cls)(model.parameters(), lr=0.05, fused=True)
    model, opt = mp.amp.initialize(model, opt, level, loss_scale="dynamic" if level == "O0" else None)
    scaler = mp.amp.loss_scaler()
    return model, opt, scaler


def amp_data(steps):
    rng = np.random.default_rng(11)
    xs = rng.standard_normal((steps, 5, 6)).astype(np.float32)
    xs[3, 1, 2] = np.inf  # two overflowing steps: skipped on the device, the scale backs off
    xs[6, 0, 0] = np.nan
    return xs, rng.integers(0, 3, (steps, 5))


def amp_backward(model, opt, scaler, x, y):
    opt.zero_grad(set_to_none=False)  # gradients keep their memory: the captured launches' tables stay valid
    scaler.scale(mp.nn.functional.cross_entropy(model(mp.tensor(x)), mp.tensor(y))).backward()


def amp_state(model, opt, scaler):
    arrays = [p.numpy().copy() for p in model.parameters()] + [p.numpy().copy() for p in mp.amp.master_params(opt)]
    arrays += [np.asarray(v).copy() for s in opt.state.values() for v in s.values()]
    return arrays, scaler.get_scale(), scaler.statistics()


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the injected float16 overflow
@pytest.mark.parametrize("level, cls", [("O0", "Adam"), ("O2", "SGD"), ("O2", "AdamW")])
def test_amp_steps_on_the_host_built_kernels_equal_the_twins(runner, level, cls):
    """GradScaler("cpu") + a fused optimizer: unscale check, count, update and scale update all on the kernels'
    own code (run_on_host) give the very bits of the NumPy twins."""
    xs, ys = amp_data(8)
    runs = []
    for host in (False, True):
        model, opt, scaler = amp_setup(level, cls)
        with _host_build.run_on_host(runner if host else None):
            for x, y in zip(xs, ys):
                amp_backward(model, opt, scaler, x, y)
                scaler.step(opt)
                scaler.update()
        runs.append(amp_state(model, opt, scaler))
    (a, scale_a, stats_a), (b, scale_b, stats_b) = runs
    assert all(np.array_equal(bits(u), bits(v)) for u, v in zip(a, b)) and len(a) == len(b)
    assert scale_a == scale_b and stats_a == stats_b and stats_a["skipped_steps"] == 2
    assert {r[0].split("<")[0] for r in runner.launches} >= {"update_scale", "multi_tensor_unscale"}


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("level, cls", [("O0", "Adam"), ("O2", "SGD")])
def test_a_captured_fused_amp_step_replays_the_eager_trajectory_bit_for_bit(library, monkeypatch, level, cls):
    """The CPU version of tests/test_cuda_graphs.py's captured AMP step: after two eager warm-up steps the
    scaler's check, the fused optimizer and the scale update are recorded once ("captured": no host read, no
    table built), then replayed on new gradients, inf/NaN included. Every replay equals the eager run."""
    runner = tool.HostRunner(library)
    xs, ys = amp_data(10)
    with _host_build.run_on_host(runner):
        eager, graphed = amp_setup(level, cls), amp_setup(level, cls)
        for model, opt, scaler in (eager, graphed):
            for x, y in zip(xs[:2], ys[:2]):
                amp_backward(model, opt, scaler, x, y)
                scaler.step(opt)
                scaler.update()
        model, opt, scaler = graphed
        amp_backward(model, opt, scaler, xs[2], ys[2])
        monkeypatch.setattr(mp.amp.GradScaler, "_read_found_inf", lambda *a: pytest.fail("a host read"))
        start, runner.capturing_now = len(runner.launches), True
        mp.backend.capture.set_capturing(True)
        try:
            scaler.step(opt)
            scaler.update()
        finally:
            mp.backend.capture.set_capturing(False)
            runner.capturing_now = False
        captured = runner.launches[start:]
        assert [r[0].split("<")[0] for r in captured][-1] == "update_scale" and len(runner.tables.pinned) >= 3
        model_e, opt_e, scaler_e = eager
        for i in range(2, len(xs)):
            amp_backward(model_e, opt_e, scaler_e, xs[i], ys[i])
            scaler_e.step(opt_e)
            scaler_e.update()
            if i > 2:
                amp_backward(model, opt, scaler, xs[i], ys[i])
                for record in captured:
                    runner.replay(record)
            a, b = amp_state(*eager), amp_state(*graphed)
            assert all(np.array_equal(bits(u), bits(v)) for u, v in zip(a[0], b[0])), f"step {i}"
            assert a[1] == b[1] and a[2] == b[2], f"step {i}"
    assert scaler_e.statistics()["skipped_steps"] == 2 and scaler_e.get_scale() < 2.0 ** 16
