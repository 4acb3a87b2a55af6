"""mp.autocast: the region (validation, nesting, threads, decorator, aliases), policies applied at
dispatch, gradients, the weight-cast cache, custom Functions, register_autocast, override and trace.

Everything runs on the CPU under autocast("cpu") with bfloat16 and float16; the
same checks run under autocast("cuda") on a GPU (tests using the ``device``
fixture, marked gpu). The CUDA table itself is tested through the pure
resolver in test_policy_tables.py.
"""
from __future__ import annotations

import threading
import warnings

import ml_dtypes
import numpy as np
import pytest

import mixprec as mp
from mixprec._state import PER_THREAD
import mixprec.nn.functional as F
from mixprec.amp import CastPolicy
from mixprec.amp import autocast_mode as am
from mixprec.ops import autocast as autocast_state
from mixprec import observers
from mixprec.ops import registry

F16, BF16, F32, F64 = mp.float16, mp.bfloat16, mp.float32, mp.float64
LOWER = [pytest.param(BF16, id="bfloat16"), pytest.param(F16, id="float16")]
# autocast("cuda") without a GPU warns that it disables itself (tested in test_cuda_region_without_a_gpu_...)
pytestmark = pytest.mark.filterwarnings("ignore:autocast. CUDA is not available:UserWarning")


def _state():
    return autocast_state.active_regions(), PER_THREAD.autocast.cache_enabled, PER_THREAD.autocast.enabled_depth


@pytest.fixture(autouse=True)
def _clean_state():
    before = _state()
    yield
    assert _state() == before, "a test left autocast state behind"
    am.clear_autocast_cache()


# ----------------------------------------------------------------- the region
def test_defaults_per_device_type():
    assert mp.autocast("cpu").fast_dtype == BF16
    assert mp.autocast("cuda").fast_dtype == F16
    assert mp.amp.autocast is mp.autocast


@pytest.mark.parametrize("spec", [F16, np.float16, "float16", np.dtype("float16")])
def test_dtype_accepts_mp_dtypes_and_numpy_dtype_likes(spec):
    assert mp.autocast("cpu", dtype=spec).fast_dtype == F16
    assert mp.autocast("cuda", dtype=ml_dtypes.bfloat16).fast_dtype == BF16


@pytest.mark.parametrize("bad", ["mps", "xpu", "CUDA", "cuda:0", None, 0])
def test_unknown_device_type_is_a_value_error_naming_the_choices(bad):
    with pytest.raises(ValueError, match="'cuda' or 'cpu'"):
        mp.autocast(bad)


def test_device_string_gets_a_hint():
    with pytest.raises(ValueError, match="not a device"):
        mp.autocast("cuda:1")


@pytest.mark.parametrize("bad", [F32, F64, mp.int64, "half-ish", np.int8])
def test_other_dtypes_are_a_value_error_naming_the_choices(bad):
    with pytest.raises(ValueError, match="float16 or bfloat16"):
        mp.autocast("cpu", dtype=bad)


def test_enabled_must_be_a_bool():
    with pytest.raises(TypeError, match="enabled"):
        mp.autocast("cpu", enabled="yes")
    with pytest.raises(TypeError, match="cache_enabled"):
        mp.autocast("cpu", cache_enabled=1)


def test_cache_enabled_none_takes_the_surrounding_setting_as_torchs(torch):
    """torch's default cache_enabled=None reads the current setting when the region is made."""
    for lib in (torch, mp):
        with lib.autocast("cpu", cache_enabled=False):
            inner = lib.autocast("cpu", cache_enabled=None)
            assert (inner._cache_enabled if lib is torch else inner.cache_enabled) is False
        outer = lib.autocast("cpu")
        assert (outer._cache_enabled if lib is torch else outer.cache_enabled) is True


def test_is_autocast_available():
    assert mp.amp.is_autocast_available("cuda") and mp.amp.is_autocast_available("cpu")
    assert not mp.amp.is_autocast_available("mps")
    assert not mp.amp.is_autocast_available(None)


def test_enter_sets_state_and_exit_restores_it():
    assert not mp.amp.is_autocast_enabled("cpu")
    with mp.autocast("cpu", dtype=F16) as ac:
        assert isinstance(ac, mp.autocast)
        assert mp.amp.is_autocast_enabled("cpu") and not mp.amp.is_autocast_enabled("cuda")
        assert mp.amp.get_autocast_dtype("cpu") == F16
    assert not mp.amp.is_autocast_enabled("cpu")
    assert mp.amp.get_autocast_dtype("cpu") == BF16  # the default when no region is active


@pytest.mark.skipif(mp.is_cuda_available(), reason="the behaviour without a usable GPU")
def test_cuda_region_without_a_gpu_warns_and_is_disabled_as_torchs(torch):
    """A ported CUDA script on a machine without a GPU: both libraries warn and run the region in float32."""
    x, w = mp.randn(2, 3), mp.randn(4, 3)
    for lib, region in ((torch, lambda: torch.autocast("cuda")), (mp, lambda: mp.autocast("cuda"))):
        with pytest.warns(UserWarning, match="CUDA is not available"):
            ctx = region()
        with ctx:
            assert not lib.is_autocast_enabled("cuda")
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # asking for no autocast is not warned about
            lib.autocast("cuda", enabled=False)
    with mp.autocast("cuda"):
        assert F.linear(x, w).dtype == F32
        with mp.autocast("cpu"):  # the CPU region is independent of it
            assert F.linear(x, w).dtype == BF16


@pytest.mark.gpu
def test_nesting_per_device_type_and_inner_dtype():
    with mp.autocast("cuda"):
        with mp.autocast("cpu", dtype=F16):
            assert autocast_state.active_regions() == {"cuda": F16, "cpu": F16}
            with mp.autocast("cpu"):
                assert autocast_state.active_regions() == {"cuda": F16, "cpu": BF16}
            assert autocast_state.active_regions() == {"cuda": F16, "cpu": F16}
        assert autocast_state.active_regions() == {"cuda": F16}
    assert autocast_state.active_regions() is None


@pytest.mark.parametrize("lower", LOWER)
def test_enabled_false_inside_runs_ops_in_input_types(lower):
    x, w = mp.randn(2, 3), mp.randn(4, 3)
    with mp.autocast("cpu", dtype=lower):
        assert F.linear(x, w).dtype == lower
        with mp.autocast("cpu", enabled=False):
            assert not mp.amp.is_autocast_enabled("cpu")
            assert F.linear(x, w).dtype == F32
            assert F.linear(x.to(lower), w.to(lower)).dtype == lower
        assert F.linear(x, w).dtype == lower


def test_exception_restores_the_outer_state_exactly():
    with mp.autocast("cpu", dtype=F16, cache_enabled=False):
        outer = _state()
        with pytest.raises(KeyError):
            with mp.autocast("cpu", dtype=BF16, cache_enabled=True), mp.autocast("cuda"):
                raise KeyError("boom")
        assert _state() == outer
    with pytest.raises(ZeroDivisionError):
        with mp.autocast("cpu"):
            1 / 0
    assert autocast_state.active_regions() is None


def test_decorator_and_reentrant_use_of_one_object():
    region = mp.autocast("cpu", dtype=F16)
    seen = []

    @region
    def f(depth):
        seen.append(mp.amp.get_autocast_dtype("cpu"))
        if depth:
            with mp.autocast("cpu", enabled=False):
                seen.append(mp.amp.is_autocast_enabled("cpu"))
                f(depth - 1)  # re-enters the same object
            seen.append(mp.amp.is_autocast_enabled("cpu"))
        return F.linear(mp.randn(1, 2), mp.randn(3, 2)).dtype

    assert f(2) == F16
    assert seen == [F16, False, F16, False, F16, True, True]
    assert autocast_state.active_regions() is None


def test_regions_are_thread_local():
    results = {}
    entered, release = threading.Event(), threading.Event()

    def worker():
        with mp.autocast("cpu"):
            results["inside"] = F.linear(mp.randn(2, 2), mp.randn(2, 2)).dtype
            entered.set()
            release.wait(5)

    t = threading.Thread(target=worker)
    t.start()
    entered.wait(5)
    results["main"] = F.linear(mp.randn(2, 2), mp.randn(2, 2)).dtype  # the worker is inside its region now
    results["main_enabled"] = mp.amp.is_autocast_enabled("cpu")
    release.set()
    t.join()
    assert results == {"inside": BF16, "main": F32, "main_enabled": False}


def test_one_decorated_function_in_several_threads_keeps_each_threads_state():
    """The state an autocast object saves on entry is per thread (torch keeps it on the shared instance, so
    threads that leave in another order than they entered restore each other's state). Two threads enter the
    same decorated function; the first leaves while the second is still inside. Each must get its own state back."""
    region = mp.autocast("cpu", dtype=F16)
    first_inside, second_inside, first_left = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    @region
    def work(name, entered, wait_for):
        seen[name + " inside"] = (mp.amp.is_autocast_enabled("cpu"), F.linear(mp.randn(1, 2), mp.randn(3, 2)).dtype)
        entered.set()
        wait_for.wait(5)

    def first():
        with mp.autocast("cpu", dtype=BF16):  # this thread's outer region must come back after work()
            work("first", first_inside, second_inside)
            seen["first after"] = (mp.amp.get_autocast_dtype("cpu"), mp.amp.is_autocast_enabled("cpu"))
        seen["first outside"] = mp.amp.is_autocast_enabled("cpu")
        first_left.set()

    def second():
        first_inside.wait(5)
        work("second", second_inside, first_left)  # still inside when the first thread leaves
        seen["second after"] = mp.amp.is_autocast_enabled("cpu")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen == {"first inside": (True, F16), "second inside": (True, F16), "first after": (BF16, True),
                    "first outside": False, "second after": False}


# ----------------------------------------------------------------- policies at dispatch
@pytest.mark.parametrize("lower", LOWER)
def test_lower_precision_ops_run_in_the_region_dtype(lower):
    x = mp.randn(2, 3, 5, 5)
    w, b = mp.randn(4, 3, 3, 3, requires_grad=True), mp.randn(4, requires_grad=True)
    with mp.autocast("cpu", dtype=lower):
        assert F.conv2d(x, w, b).dtype == lower
        assert F.conv1d(mp.randn(2, 3, 6), mp.randn(2, 3, 3)).dtype == lower
        assert (mp.randn(2, 3) @ mp.randn(3, 2)).dtype == lower  # the operator follows matmul
        assert mp.bmm(mp.randn(2, 2, 3), mp.randn(2, 3, 1).to(F16)).dtype == lower
        assert mp.addmm(mp.randn(2), mp.randn(2, 3), mp.randn(3, 2)).dtype == lower


@pytest.mark.parametrize("lower", LOWER)
def test_fp32_ops_run_in_float32_on_cpu(lower):
    a, b = mp.randn(3, 4, dtype=lower), mp.randn(3, 4, dtype=lower)
    with mp.autocast("cpu", dtype=lower):
        assert F.mse_loss(a, b).dtype == F32
        assert F.l1_loss(a, b).dtype == F32
        assert F.cross_entropy(a, mp.tensor([0, 1, 3])).dtype == F32
        assert F.binary_cross_entropy(a.sigmoid(), b.sigmoid()).dtype == F32  # fp32 on CPU, not banned
        assert a.prod().dtype == F32
        assert F.softmax(a, dim=1).dtype == lower  # softmax is on the CUDA fp32 list only


@pytest.mark.parametrize("lower", LOWER)
def test_promote_ops_go_to_the_widest_input(lower):
    other = F16 if lower == BF16 else BF16
    lo, hi = mp.randn(2, 2, dtype=lower), mp.randn(2, 2)
    with mp.autocast("cpu", dtype=lower):
        assert mp.cat([lo, lo]).dtype == lower
        assert mp.cat([lo, hi]).dtype == F32
        assert mp.stack([mp.randn(2, 2, dtype=other), mp.randn(2, 2, dtype=other)]).dtype == F32
        assert mp.cat([lo, hi.double()]).dtype == F64
        assert mp.cat([mp.tensor([1, 2]), mp.tensor([3])]).dtype == mp.int64


@pytest.mark.parametrize("lower", LOWER)
def test_float64_and_integers_are_never_cast(lower):
    x64, w64 = mp.randn(2, 3, dtype=F64), mp.randn(4, 3, dtype=F64)
    with mp.amp.trace() as t, mp.autocast("cpu", dtype=lower):
        assert F.linear(x64, w64).dtype == F64
        assert F.mse_loss(x64, w64[:2]).dtype == F64
        assert mp.cat([mp.tensor([1]), mp.tensor([2])]).dtype == mp.int64
    assert t.casts == 0


def test_unlisted_ops_follow_ordinary_promotion():
    with mp.autocast("cpu"):
        assert (mp.randn(2, dtype=F16) + mp.randn(2)).dtype == F32
        assert (mp.randn(2, dtype=BF16) * mp.randn(2, dtype=BF16)).dtype == BF16
        assert mp.randn(3).relu().dtype == F32


def test_explicit_dtype_is_respected():
    x = mp.randn(3, 4, dtype=BF16)
    with mp.amp.trace() as t, mp.autocast("cpu"):
        assert x.prod(dtype=BF16).dtype == BF16          # prod is fp32 on CPU, but dtype= wins
        assert x.prod(None, False, BF16).dtype == BF16   # also given positionally
        assert x.prod().dtype == F32
    assert t.casts == 1


def test_in_place_ops_and_out_calls_are_not_autocast(user_ops):
    def scale_(ctx, input, factor):
        input *= input.dtype.type(factor)
        return input
    inplace = user_ops("test_scale_", scale_, inplace=True, differentiable=False)
    mp.amp.register_autocast("test_scale_", "cpu", "fp32")

    def twice(ctx, input, out=None):
        if out is None:
            return input * input.dtype.type(2)
        out[...] = input * input.dtype.type(2)
        return out
    with_out = user_ops("test_twice", twice, differentiable=False)
    mp.amp.register_autocast("test_twice", "cpu", "fp32")
    x = mp.randn(3, dtype=BF16)
    with mp.autocast("cpu"):
        assert inplace(x, 2.0).dtype == BF16
        assert with_out(x, out=mp.empty(3, dtype=BF16)).dtype == BF16
        assert with_out(x).dtype == F32
        assert with_out(x, out=None).dtype == F32  # out=None is an ordinary call


def test_banned_op_raises_and_points_to_the_logits_version():
    p, t = mp.rand(4), mp.rand(4)
    with mp.amp.override({"binary_cross_entropy": "banned"}, device_type="cpu"), mp.autocast("cpu"):
        with pytest.raises(RuntimeError, match="binary_cross_entropy_with_logits"):
            F.binary_cross_entropy(p, t)
        assert F.binary_cross_entropy_with_logits(p, t).dtype == F32
    assert F.binary_cross_entropy(p, t).dtype == F32


@pytest.mark.gpu
def test_binary_cross_entropy_is_banned_under_cuda_autocast():
    p, t = mp.rand(4, device="cuda"), mp.rand(4, device="cuda")
    with mp.autocast("cuda"):
        with pytest.raises(RuntimeError, match="binary_cross_entropy_with_logits"):
            F.binary_cross_entropy(p, t)
        with mp.autocast("cuda", enabled=False):
            assert F.binary_cross_entropy(p, t).dtype == F32


def test_composite_op_with_a_policy_runs_inner_ops_without_autocast():
    """conv2d's policy casts once at the top; its inner op _conv_nd is not autocast again (here it would be
    float32 if it were, by override)."""
    from mixprec.ops.conv import Geometry
    x, w = mp.randn(1, 2, 4, 4), mp.randn(3, 2, 3, 3)
    conv_nd = mp.ops.get("_conv_nd")
    with mp.amp.override({"_conv_nd": "fp32"}), mp.autocast("cpu"):
        geometry = Geometry((3, 3), (1, 1), ((0, 0), (0, 0)), (1, 1), (2, 2))
        assert conv_nd(x.to(BF16), w.to(BF16), None, geometry, 1).dtype == F32
        with mp.amp.trace() as t:
            out = F.conv2d(x, w)
    assert out.dtype == BF16
    inner = [r for r in t.records if r.name == "_conv_nd"]
    assert inner and all(r.policy is None and r.run_dtypes == (BF16, BF16) for r in inner)


def test_composite_op_without_a_policy_has_its_inner_ops_autocast():
    """tensordot has no CPU policy: like torch (it decomposes), its inner matmul is autocast."""
    with mp.autocast("cpu"):
        assert mp.tensordot(mp.randn(2, 3), mp.randn(3, 4), 1).dtype == BF16


# ----------------------------------------------------------------- gradients
def _mlp(lower):
    mp.manual_seed(1)
    x = mp.randn(8, 5)
    params = [mp.randn(6, 5, requires_grad=True), mp.zeros(6, requires_grad=True),
              mp.randn(3, 6, requires_grad=True), mp.zeros(3, requires_grad=True)]
    return x, mp.tensor([0, 1, 2, 0, 1, 2, 0, 1]), params


def _mlp_loss(x, y, w1, b1, w2, b2):
    h = F.linear(x, w1, b1).relu()
    return F.cross_entropy(F.linear(h, w2, b2), y)


@pytest.mark.parametrize("lower", LOWER)
def test_leaf_gradients_arrive_in_the_leaf_dtype(lower):
    x, y, params = _mlp(lower)
    xin = x.to(lower).detach().requires_grad_()
    with mp.autocast("cpu", dtype=lower):
        loss = _mlp_loss(xin, y, *params)
    assert loss.dtype == F32
    loss.backward()
    assert [p.grad.dtype for p in params] == [F32] * 4
    assert xin.grad.dtype == lower
    x64 = mp.randn(2, 5, dtype=F64, requires_grad=True)
    with mp.autocast("cpu", dtype=lower):
        out = F.linear(x64, params[0].double())
    out.sum().backward()
    assert x64.grad.dtype == F64


@pytest.mark.parametrize("lower", LOWER)
def test_backward_runs_each_op_in_its_forward_dtype(lower):
    x, y, params = _mlp(lower)
    with mp.autocast("cpu", dtype=lower):
        loss = _mlp_loss(x, y, *params)
    with mp.amp.trace() as t:
        loss.backward()
    products = [r for r in t.records if r.name in ("matmul", "mm", "_linear_backward")]  # (linear's gradients: one op)
    assert products and all(set(r.run_dtypes) == {lower} for r in products)
    assert all(r.policy is None for r in t.records)  # backward is never autocast


@pytest.mark.parametrize("lower", LOWER)
def test_autocast_gradients_are_close_to_float64(lower):
    x, y, params = _mlp(lower)
    with mp.autocast("cpu", dtype=lower):
        loss = _mlp_loss(x, y, *params)
    loss.backward()
    p64 = [p.detach().double().requires_grad_() for p in params]
    _mlp_loss(x.double(), y, *p64).backward()
    eps = 2.0 ** -7 if lower == BF16 else 2.0 ** -10
    for p, q in zip(params, p64):
        scale = max(np.abs(q.grad.numpy()).max(), 1e-3)
        assert np.abs(p.grad.numpy() - q.grad.numpy()).max() <= 40 * eps * scale


# ----------------------------------------------------------------- the weight-cast cache
def _linear_three_times(x, w):
    return [F.linear(x, w) for _ in range(3)]


def test_cache_casts_a_float32_weight_once_per_region():
    x, w = mp.randn(2, 3), mp.randn(4, 3, requires_grad=True)
    with mp.amp.trace() as t, mp.autocast("cpu"):
        outs = _linear_three_times(x, w)
    assert [r.cache_hits for r in t.records if r.name == "linear"] == [0, 1, 1]
    assert t.casts == 1 + 3  # the weight once, the (non-leaf-weight) input every time
    assert all(np.array_equal(o.numpy(), outs[0].numpy()) for o in outs)


def test_only_float32_leaves_that_require_grad_are_cached():
    x = mp.randn(2, 3)
    frozen = mp.randn(4, 3)                                 # does not require grad
    nonleaf = mp.randn(4, 3, requires_grad=True) * 1.0      # not a leaf
    with mp.amp.trace() as t, mp.autocast("cpu"):
        _linear_three_times(x, frozen)
        _linear_three_times(x, nonleaf)
    assert t.cache_hits == 0 and t.casts == 12


def test_cache_is_dropped_when_the_outermost_enabled_region_exits():
    x, w = mp.randn(2, 3), mp.randn(4, 3, requires_grad=True)
    with mp.amp.trace() as t:
        with mp.autocast("cpu"):
            F.linear(x, w)
            with mp.autocast("cpu", dtype=BF16):
                F.linear(x, w)          # inner region: still cached
            with mp.autocast("cpu", enabled=False):
                F.linear(x, w)          # disabled region: no cast, cache kept
            F.linear(x, w)
        assert PER_THREAD.autocast.cache is None
        with mp.autocast("cpu"):
            F.linear(x, w)              # a new region casts again
    assert [r.cache_hits for r in t.records if r.name == "linear" and r.policy] == [0, 1, 1, 0]


def test_in_place_update_inside_the_region_is_never_served_stale():
    x, w = mp.randn(2, 3), mp.randn(4, 3, requires_grad=True)
    with mp.autocast("cpu"):
        before = F.linear(x, w)
        with mp.no_grad():
            w.mul_(2.0)                  # an optimizer step inside the region bumps the version
        after = F.linear(x, w)
        again = F.linear(x, w)
    expected = F.linear(x.to(BF16), w.detach().to(BF16))
    assert np.array_equal(after.numpy(), expected.numpy())
    assert not np.array_equal(after.numpy(), before.numpy())
    assert np.array_equal(again.numpy(), after.numpy())


def test_cache_disabled_casts_every_time():
    x, w = mp.randn(2, 3), mp.randn(4, 3, requires_grad=True)
    with mp.amp.trace() as t, mp.autocast("cpu", cache_enabled=False):
        _linear_three_times(x, w)
    assert t.cache_hits == 0 and t.casts == 6


def test_casts_made_under_no_grad_are_not_reused_with_grad():
    x, w = mp.randn(2, 3), mp.randn(4, 3, requires_grad=True)
    with mp.autocast("cpu"):
        with mp.no_grad():
            F.linear(x, w)               # evaluation pass: a cast with no graph
        F.linear(x, w).sum().backward()  # must still reach w
    assert w.grad is not None and w.grad.dtype == F32


def test_gradient_accumulation_inside_one_region():
    """Two forward/backward passes in one region: the cached cast's graph was freed by the first
    backward, so the second pass casts again instead of failing."""
    x, w = mp.randn(2, 3), mp.randn(4, 3, requires_grad=True)
    with mp.autocast("cpu"):
        F.linear(x, w).sum().backward()
        first = w.grad.numpy().copy()
        F.linear(x, w).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), 2 * first)


# ----------------------------------------------------------------- custom Functions
class _ScaledMatmul(mp.autograd.Function):
    """x @ w with a record of what forward/backward saw."""
    seen = []

    @staticmethod
    @mp.amp.custom_fwd(device_type="cpu", cast_inputs=F32)
    def forward(ctx, x, extras):
        _ScaledMatmul.seen.append(("fwd", x.dtype, extras["w"].dtype, extras["pair"][0].dtype,
                                   mp.amp.is_autocast_enabled("cpu")))
        ctx.save_for_backward(x, extras["w"])
        return (x @ extras["w"]) * extras["scale"]

    @staticmethod
    @mp.amp.custom_bwd(device_type="cpu")
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        _ScaledMatmul.seen.append(("bwd", mp.amp.is_autocast_enabled("cpu")))
        return g @ w.mT, None


def test_custom_fwd_cast_inputs_casts_nested_inputs_and_disables_autocast():
    _ScaledMatmul.seen.clear()
    x = mp.randn(2, 3, dtype=BF16, requires_grad=True)
    extras = {"w": mp.randn(3, 4, dtype=BF16), "pair": (mp.randn(1, dtype=F16), "tag"), "scale": 2.0}
    with mp.autocast("cpu"):
        out = _ScaledMatmul.apply(x, extras)
    assert out.dtype == F32  # matmul ran with autocast off, on float32 inputs
    out.sum().backward()
    assert x.grad.dtype == BF16
    assert _ScaledMatmul.seen == [("fwd", F32, F32, F32, False), ("bwd", False)]
    _ScaledMatmul.seen.clear()
    assert _ScaledMatmul.apply(x, extras).dtype == BF16  # outside a region: inputs as they are
    assert _ScaledMatmul.seen[0][1] == BF16


class _Square(mp.autograd.Function):
    seen = []

    @staticmethod
    @mp.amp.custom_fwd(device_type="cpu")
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x @ w

    @staticmethod
    @mp.amp.custom_bwd(device_type="cpu")
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        _Square.seen.append((mp.amp.is_autocast_enabled("cpu"), mp.amp.get_autocast_dtype("cpu")))
        return g @ w.mT, x.mT @ g


def test_custom_bwd_replays_the_autocast_state_forward_saw():
    x, w = mp.randn(2, 3, requires_grad=True), mp.randn(3, 2, requires_grad=True)
    _Square.seen.clear()
    with mp.autocast("cpu", dtype=F16):
        out = _Square.apply(x, w)
    assert out.dtype == F16
    out.sum().backward()
    assert _Square.seen == [(True, F16)]
    assert x.grad.dtype == F32 and w.grad.dtype == F32
    _Square.seen.clear()
    _Square.apply(x, w).sum().backward()
    assert _Square.seen == [(False, BF16)]


def test_custom_fwd_and_bwd_validation():
    with pytest.raises(TypeError):
        mp.amp.custom_fwd(lambda ctx, x: x)  # device_type is required (keyword-only)
    with pytest.raises(ValueError, match="'cuda' or 'cpu'"):
        mp.amp.custom_fwd(device_type="tpu")
    with pytest.raises(ValueError, match="cast_inputs"):
        mp.amp.custom_fwd(device_type="cpu", cast_inputs=mp.int64)

    class NoFwd(mp.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        @mp.amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            return g * 2
    with pytest.raises(RuntimeError, match="custom_fwd"):
        NoFwd.apply(mp.randn(2, requires_grad=True)).sum().backward()


# ----------------------------------------------------------------- register_autocast and override
def test_register_autocast_gives_a_user_op_a_policy(user_ops):
    def scaled_sum(ctx, a, b):
        return a + b
    op = user_ops("test_scaled_sum", scaled_sum, promote=(0, 1), differentiable=False)
    a, b = mp.randn(2, dtype=BF16), mp.randn(2, dtype=BF16)
    assert mp.amp.op_policy("test_scaled_sum", "cpu") is None
    mp.amp.register_autocast("test_scaled_sum", "cpu", mp.float32)
    assert mp.amp.op_policy("test_scaled_sum", "cpu") is CastPolicy.FP32
    assert mp.amp.op_policy("test_scaled_sum", "cuda") is None
    with mp.autocast("cpu"):
        assert op(a, b).dtype == F32
        assert op(a.double(), b).dtype == F64  # float64 is never cast
    mp.amp.register_autocast("test_scaled_sum", "cpu", np.float16)  # a fixed dtype, whatever the region's
    with mp.autocast("cpu", dtype=BF16):
        assert op(a, b).dtype == F16
    assert mp.amp.op_policy("test_scaled_sum", "cpu") is CastPolicy.LOWER_PRECISION_FP
    mp.amp.register_autocast("test_scaled_sum", "cpu", "promote")
    with mp.autocast("cpu"):
        assert op(a, b.float()).dtype == F32


def test_register_autocast_gives_a_builtin_a_rule_over_its_table_entry():
    from mixprec.ops import autocast
    x = mp.randn(2, 3)
    try:
        mp.amp.register_autocast("softmax", "cpu", "lower_precision_fp")
        assert mp.amp.op_policy("softmax", "cpu") is CastPolicy.LOWER_PRECISION_FP
        with mp.autocast("cpu"):
            assert F.softmax(x, dim=1).dtype == BF16
            with mp.amp.override({"softmax": None}):  # a scoped override still wins
                assert F.softmax(x, dim=1).dtype == F32
    finally:
        del autocast.REGISTERED[(mp.ops.get("softmax"), "cpu")]
    with mp.autocast("cpu"):
        assert F.softmax(x, dim=1).dtype == F32  # the table's entry again


def test_register_autocast_refuses_unknown_ops_and_bad_rules(user_ops):
    with pytest.raises(KeyError):
        mp.amp.register_autocast("no_such_op", "cpu", F32)
    user_ops("test_ident", lambda ctx, a: a, differentiable=False)
    with pytest.raises(ValueError, match="cast policy"):
        mp.amp.register_autocast("test_ident", "cpu", mp.int64)
    with pytest.raises(ValueError, match="'cuda' or 'cpu'"):
        mp.amp.register_autocast("test_ident", "gpu", F32)


def test_override_is_scoped_nested_and_restored_on_error():
    x = mp.randn(2, 3)
    with mp.autocast("cpu"):
        assert F.softmax(x, dim=1).dtype == F32
        with mp.amp.override({"softmax": "lower_precision_fp"}):
            assert mp.amp.op_policy("softmax", "cpu") is CastPolicy.LOWER_PRECISION_FP
            assert F.softmax(x, dim=1).dtype == BF16
            with mp.amp.override({"softmax": None}):
                assert F.softmax(x, dim=1).dtype == F32
            with pytest.raises(ValueError):
                with mp.amp.override({"softmax": "fp32"}, device_type="cuda"):
                    assert mp.amp.op_policy("softmax", "cpu") is CastPolicy.LOWER_PRECISION_FP
                    raise ValueError
            assert F.softmax(x, dim=1).dtype == BF16
        assert F.softmax(x, dim=1).dtype == F32
        assert mp.amp.op_policy("softmax", "cpu") is None


def test_override_as_decorator_and_validation():
    @mp.amp.override({"linear": "fp32"}, device_type="cpu")
    def run():
        with mp.autocast("cpu"):
            return F.linear(mp.randn(2, 2), mp.randn(2, 2)).dtype
    assert run() == F32
    with pytest.raises(ValueError, match="cast policy"):
        mp.amp.override({"linear": "fp8"})
    with pytest.raises(KeyError):
        mp.amp.override({"lineer": "fp32"})
    with pytest.raises(TypeError, match="mapping"):
        mp.amp.override(["linear"])


# ----------------------------------------------------------------- trace
def test_trace_records_policy_dtypes_and_cache_hits():
    x, w, b = mp.randn(2, 3), mp.randn(4, 3, requires_grad=True), mp.randn(4, requires_grad=True)
    with mp.amp.trace() as t, mp.autocast("cpu"):
        F.linear(x, w, b)
        F.linear(x, w, b)
    top = [r for r in t.in_call_order() if r.depth == 0]
    assert [r.name for r in top] == ["linear", "linear"]
    first, second = top
    assert first.policy is CastPolicy.LOWER_PRECISION_FP and first.autocast_dtype == BF16
    assert first.input_dtypes == (F32, F32, F32) and first.run_dtypes == (BF16, BF16, BF16)
    assert first.output_dtype == BF16 and (first.cache_hits, second.cache_hits) == (0, 2)
    order = [r.name for r in t.in_call_order()]
    assert order == ["linear", "_to_copy", "_to_copy", "_to_copy", "linear", "_to_copy"]
    assert all(r.cast_for == "linear" for r in t.records if r.name == "_to_copy")
    text = t.table()
    assert "lower_precision_fp [bf16]" in text and "2 hits" in text and "cast for linear" in text
    assert str(t) == text and len(t) == 6


def test_trace_outside_autocast_and_in_other_threads():
    with mp.amp.trace() as t:
        mp.randn(2) + 1
        th = threading.Thread(target=lambda: mp.randn(2) * 2)
        th.start()
        th.join()
    assert [r.name for r in t.records] == ["add"] and t.records[0].policy is None
    assert not observers.observing()


# ----------------------------------------------------------------- values against float64
def _eps(dtype):
    return {F16: 2.0 ** -11, BF16: 2.0 ** -8, F32: 2.0 ** -24, F64: 2.0 ** -53}[dtype]  # unit roundoff


VALUE_CASES = {
    # name: (inputs as float32 arrays, call, float64 reference, error bound in units of the run dtype's u)
    "linear": (lambda r: [r.standard_normal((4, 16)), r.standard_normal((5, 16))], F.linear,
               lambda a, b: a @ b.T, lambda a, b: np.abs(a) @ np.abs(b).T * 2.1),
    "conv2d": (lambda r: [r.standard_normal((1, 2, 5, 5)), r.standard_normal((3, 2, 3, 3))],
               lambda x, w: F.conv2d(x, w, padding=1), None, None),
    "mse_loss": (lambda r: [r.standard_normal((8,)), r.standard_normal((8,))], F.mse_loss,
                 lambda a, b: ((a - b) ** 2).mean(), lambda a, b: ((a - b) ** 2).mean() * 16),
    "cross_entropy": (lambda r: [r.standard_normal((4, 5))], lambda x: F.cross_entropy(x, mp.tensor([0, 4, 2, 1])),
                      lambda x: -np.mean(np.log(np.exp(x) / np.exp(x).sum(1, keepdims=True))[np.arange(4),
                                                                                               [0, 4, 2, 1]]),
                      lambda x: 64.0),
    "cat": (lambda r: [r.standard_normal((2, 3)), r.standard_normal((1, 3))], lambda a, b: mp.cat([a, b]),
            lambda a, b: np.concatenate([a, b]), lambda a, b: 0 * np.concatenate([a, b])),
}


@pytest.mark.parametrize("lower", LOWER)
@pytest.mark.parametrize("name", sorted(VALUE_CASES))
def test_values_agree_with_float64_within_the_run_dtype(name, lower):
    """Each op's result under autocast is within the rounding error of the dtype it ran in (from the trace)
    of an exact float64 computation on the same float32 inputs."""
    make, call, ref, bound = VALUE_CASES[name]
    arrays = [a.astype(np.float32).astype(np.float64) for a in make(np.random.default_rng(7))]
    with mp.amp.trace() as t, mp.autocast("cpu", dtype=lower):
        out = call(*[mp.tensor(a, dtype=F32) for a in arrays])
    top = [r for r in t.records if r.depth == 0 and r.name == registry.get(name).name][-1]
    run = top.run_dtypes[0]
    assert run == {CastPolicy.LOWER_PRECISION_FP: lower, CastPolicy.FP32: F32, CastPolicy.PROMOTE: F32}[
        mp.amp.op_policy(name, "cpu")]
    got = out.numpy().astype(np.float64)
    if name == "conv2d":  # the reference is the same products done with np.einsum over padded patches
        x, w = arrays
        xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        patches = np.stack([xp[:, :, i:i + 5, j:j + 5] for i in range(3) for j in range(3)], axis=2)
        wf = w.reshape(3, 2, 9)
        exact = np.einsum("ckhw,ock->ohw", patches[0], wf)[None]
        scale = np.einsum("ckhw,ock->ohw", np.abs(patches[0]), np.abs(wf))[None] * 2.1
    else:
        exact = ref(*arrays)
        scale = bound(*arrays)
    u = _eps(run)
    out_u = _eps(top.output_dtype)
    tol = u * scale + out_u * np.abs(exact) + 1e-6 * np.abs(scale)
    assert np.all(np.abs(got - exact) <= tol), (np.abs(got - exact).max(), tol.max() if np.ndim(tol) else tol)


# ----------------------------------------------------------------- the same checks on each device
def test_policies_gradients_cache_and_values_on_each_device(device):
    """CPU here; under autocast("cuda") on a GPU when there is one (float16 by default there)."""
    lower = mp.amp.get_autocast_dtype(device)
    mp.manual_seed(0)
    x, y = mp.randn(4, 5, device=device), mp.tensor([0, 1, 2, 0], device=device)
    w, b = mp.randn(3, 5, device=device, requires_grad=True), mp.zeros(3, device=device, requires_grad=True)
    with mp.amp.trace() as t, mp.autocast(device):
        logits = F.linear(x, w, b)
        again = F.linear(x, w, b)
        loss = F.cross_entropy(logits, y)
        probs = F.softmax(logits, dim=1)
        joined = mp.cat([logits, x[:, :3]])
        x64 = F.linear(x.double(), w.detach().double())
    assert (logits.dtype, loss.dtype, joined.dtype, x64.dtype) == (lower, F32, F32, F64)
    assert probs.dtype == (F32 if device == "cuda" else lower)  # softmax is on the CUDA fp32 list only
    assert [r.cache_hits for r in t.records if r.name == "linear"] == [0, 2, 0]  # float64: nothing to cast
    assert {r.device_type for r in t.records} == {device}
    assert np.array_equal(again.numpy(), logits.numpy())
    loss.backward()
    assert (w.grad.dtype, b.grad.dtype) == (F32, F32) and w.grad.device == w.device
    p64 = [w.detach().double().requires_grad_(), b.detach().double().requires_grad_()]
    ref = F.cross_entropy(F.linear(x.double(), *p64), y)
    ref.backward()
    u = 2.0 ** -8 if lower == BF16 else 2.0 ** -11
    assert abs(loss.item() - ref.item()) <= 64 * u * max(1.0, abs(ref.item()))
    assert np.abs(w.grad.numpy() - p64[0].grad.numpy()).max() <= 64 * u


def test_leaving_an_autocast_region_or_override_that_was_not_entered_is_a_clear_error():
    torch = pytest.importorskip("torch")
    with pytest.raises(AttributeError):  # torch: a raw error from inside its __exit__
        torch.autocast("cpu").__exit__(None, None, None)
    with pytest.raises(RuntimeError, match="autocast\\('cpu'.*\\.__exit__: this thread's innermost autocast region "
                                           "is not this one"):
        mp.autocast("cpu").__exit__(None, None, None)
    outer, inner = mp.autocast("cpu"), mp.autocast("cpu", enabled=False)
    with outer:
        inner.__enter__()
        with pytest.raises(RuntimeError, match="innermost autocast region is not this one"):
            outer.__exit__(None, None, None)  # out of order: refused, and nothing was left
        assert not mp.amp.is_autocast_enabled("cpu")  # still inside inner
        inner.__exit__(None, None, None)
        assert mp.amp.is_autocast_enabled("cpu")
    assert not mp.amp.is_autocast_enabled("cpu") and PER_THREAD.autocast.entered == []
    layer = mp.amp.override({"softmax": "fp32"})
    with pytest.raises(RuntimeError, match="override.__exit__: this thread's innermost mp.amp.override"):
        layer.__exit__(None, None, None)
    with mp.amp.override({"relu": "fp32"}):
        with pytest.raises(RuntimeError, match="override.__exit__"):
            layer.__exit__(None, None, None)  # would have dropped the other override
        assert len(PER_THREAD.autocast.overrides) == 1
    assert PER_THREAD.autocast.overrides == ()


# ----------------------------------------------------------------- torch's top-level switches
def test_top_level_autocast_state_functions_match_torchs(torch):
    """mp.is_autocast_enabled / get_autocast_dtype / set_autocast_* behave as torch.*'s, outside and in regions."""
    dt = {torch: {"bf16": torch.bfloat16, "f16": torch.float16}, mp: {"bf16": BF16, "f16": F16}}
    x = {torch: torch.ones(2, 2), mp: mp.ones(2, 2)}
    seen = {}
    for lib in (torch, mp):
        log = seen[lib] = []
        log.append((lib.is_autocast_enabled("cpu"), str(lib.get_autocast_dtype("cpu")).rsplit(".")[-1]))
        lib.set_autocast_dtype("cpu", dt[lib]["f16"])
        log.append((lib.is_autocast_enabled("cpu"), str(lib.get_autocast_dtype("cpu")).rsplit(".")[-1]))
        lib.set_autocast_enabled("cpu", True)
        try:
            log.append((lib.is_autocast_enabled("cpu"), str((x[lib] @ x[lib]).dtype).rsplit(".")[-1]))
            with lib.autocast("cpu", dtype=dt[lib]["bf16"]):
                log.append(str((x[lib] @ x[lib]).dtype).rsplit(".")[-1])
            log.append((lib.is_autocast_enabled("cpu"), str((x[lib] @ x[lib]).dtype).rsplit(".")[-1]))
            lib.set_autocast_cache_enabled(False)
            log.append(lib.is_autocast_cache_enabled())
        finally:
            lib.set_autocast_enabled("cpu", False)
            lib.set_autocast_dtype("cpu", dt[lib]["bf16"])
            lib.set_autocast_cache_enabled(True)
            lib.clear_autocast_cache()
        log.append((lib.is_autocast_enabled("cpu"), lib.is_autocast_cache_enabled()))
    assert seen[mp] == seen[torch]
    assert seen[mp][2] == (True, "float16")


def test_set_autocast_functions_check_their_arguments():
    with pytest.raises(ValueError, match="set_autocast_enabled: device_type"):
        mp.set_autocast_enabled("tpu", True)
    with pytest.raises(TypeError, match="set_autocast_enabled: enabled must be True or False"):
        mp.set_autocast_enabled("cpu", 1)
    with pytest.raises(ValueError, match="set_autocast_dtype: dtype must be float16 or bfloat16"):
        mp.set_autocast_dtype("cpu", mp.float64)
    with pytest.raises(TypeError, match="set_autocast_cache_enabled"):
        mp.set_autocast_cache_enabled(None)
