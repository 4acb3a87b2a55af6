"""Property tests (hypothesis) over ops x devices x autocast dtypes x input-dtype mixes.

Each example runs one op through mp.testing.check_autocast, which asserts
autocast's properties for that call: lower-precision ops run in the autocast
dtype, fp32 ops in float32, promote ops in the widest floating input (all via
resolve_dtypes, checked exhaustively against the rules in
test_policy_tables.py); float64 and integer inputs are never cast; the result
is exactly the op on inputs cast beforehand; nothing is cast outside autocast
or in an enabled=False region; gradients arrive in the leaves' dtypes. Further
properties: nesting restores state, and the weight cache never serves a stale
cast.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mixprec as mp
from mixprec._state import PER_THREAD
import mixprec.nn.functional as F
from mixprec.amp import autocast_mode as am
from mixprec.ops import autocast as autocast_state
from mixprec.ops import registry
from mixprec.testing import autocast_dtypes, check_autocast, input_dtypes, make_tensor

FLOAT = "float"   # inputs drawn from the four floating dtypes
ANY = "any"       # ... and int64


class Entry:
    """An op call whose data inputs get drawn dtypes: build(dtypes, device, seed) -> (args, kwargs)."""

    def __init__(self, name, kinds, build):
        self.name, self.kinds, self.build = name, kinds, build

    def __repr__(self):
        return self.name


def _t(shape, lo=-2.0, hi=2.0):
    """A maker of one data tensor of a drawn dtype."""
    return lambda d, dev, seed: make_tensor(shape, d, dev, low=lo, high=hi, seed=seed)


def entry(name, makers, kinds=None, extra=(), kwargs=None, call=None):
    kinds = kinds or [FLOAT] * len(makers)

    def build(dtypes, device, seed):
        data = [m(d, device, seed + i) for i, (m, d) in enumerate(zip(makers, dtypes))]
        tail = [e(device) if callable(e) else e for e in extra]
        return (call(data, tail) if call else data + tail), dict(kwargs or {})
    return Entry(name, kinds, build)


def _labels(n, c):
    return lambda dev: mp.tensor(np.arange(n) % c, device=dev)


CATALOGUE = [
    # lower precision
    entry("matmul", [_t((3, 4)), _t((4, 2))], [ANY, ANY]),
    entry("mm", [_t((2, 3)), _t((3, 2))]),
    entry("bmm", [_t((2, 2, 3)), _t((2, 3, 2))]),
    entry("mv", [_t((2, 3)), _t((3,))]),
    entry("addmm", [_t((2,)), _t((2, 3)), _t((3, 2))]),
    entry("baddbmm", [_t((2, 2, 2)), _t((2, 2, 3)), _t((2, 3, 2))]),
    entry("linear", [_t((2, 3)), _t((4, 3)), _t((4,))]),
    entry("conv2d", [_t((1, 2, 4, 4)), _t((3, 2, 2, 2)), _t((3,))], kwargs={"padding": 1}),
    entry("conv1d", [_t((1, 2, 5)), _t((2, 2, 3))]),
    # float32 (on CUDA, some also on CPU)
    entry("exp", [_t((2, 3))]),
    entry("log", [_t((2, 3), 0.2, 2.0)]),
    entry("log1p", [_t((4,), -0.5, 2.0)]),
    entry("expm1", [_t((4,))]),
    entry("rsqrt", [_t((4,), 0.2, 2.0)]),
    entry("reciprocal", [_t((4,), 0.5, 2.0)]),
    entry("log2", [_t((3,), 0.2, 2.0)]),
    entry("log10", [_t((3,), 0.2, 2.0)]),
    entry("sinh", [_t((3,))]),
    entry("cosh", [_t((3,))]),
    entry("tan", [_t((3,), -1.0, 1.0)]),
    entry("asin", [_t((3,), -0.9, 0.9)]),
    entry("acos", [_t((3,), -0.9, 0.9)]),
    entry("erfinv", [_t((3,), -0.9, 0.9)]),
    entry("softplus", [_t((2, 3))]),
    entry("softmax", [_t((2, 3))], extra=[1]),
    entry("log_softmax", [_t((2, 3))], extra=[1]),
    entry("softmin", [_t((2, 3))], extra=[1]),
    entry("sum", [_t((2, 3))], [ANY]),
    entry("prod", [_t((2, 3), 0.5, 1.5)], [ANY]),
    entry("cumsum", [_t((2, 3))], [ANY], extra=[1]),
    entry("pow", [_t((3,), 0.5, 2.0), _t((3,))]),
    entry("norm", [_t((2, 3))]),
    entry("normalize", [_t((2, 3))]),
    entry("dist", [_t((2, 3)), _t((3,))]),
    entry("layer_norm", [_t((2, 3)), _t((3,)), _t((3,))], call=lambda d, t: [d[0], (3,), d[1], d[2]]),
    entry("group_norm", [_t((2, 4, 2)), _t((4,)), _t((4,))], call=lambda d, t: [d[0], 2, d[1], d[2]]),
    entry("cosine_similarity", [_t((2, 3)), _t((2, 3))]),
    entry("mse_loss", [_t((2, 3)), _t((2, 3))]),
    entry("l1_loss", [_t((2, 3)), _t((2, 3))]),
    entry("smooth_l1_loss", [_t((2, 3)), _t((2, 3))]),
    entry("huber_loss", [_t((2, 3)), _t((2, 3))]),
    entry("kl_div", [_t((2, 3), -2.0, -0.1), _t((2, 3), 0.1, 1.0)], kwargs={"reduction": "batchmean"}),
    entry("binary_cross_entropy", [_t((4,), 0.05, 0.95), _t((4,), 0.0, 1.0)]),
    entry("binary_cross_entropy_with_logits", [_t((4,)), _t((4,), 0.0, 1.0)]),
    entry("cross_entropy", [_t((3, 4))], extra=[_labels(3, 4)]),
    entry("nll_loss", [_t((3, 4), -3.0, -0.1)], extra=[_labels(3, 4)]),
    # promote
    entry("addcmul", [_t((3,)), _t((3,)), _t((3,))]),
    entry("addcdiv", [_t((3,)), _t((3,)), _t((3,), 0.5, 2.0)]),
    entry("atan2", [_t((3,)), _t((3,))]),
    entry("dot", [_t((3,)), _t((3,))]),
    entry("tensordot", [_t((2, 3)), _t((3, 2))], extra=[1]),
    entry("cat", [_t((2, 2)), _t((1, 2))], [ANY, ANY], call=lambda d, t: [d]),
    entry("stack", [_t((2,)), _t((2,))], [ANY, ANY], call=lambda d, t: [d]),
    # no policy
    entry("add", [_t((2, 3)), _t((3,))], [ANY, ANY]),
    entry("mul", [_t((2, 3)), _t((2, 3))], [ANY, ANY]),
    entry("relu", [_t((4,))]),
    entry("tanh", [_t((4,))]),
]


def _draw_case(data, device_type):
    e = data.draw(st.sampled_from(CATALOGUE), label="op")
    lower = data.draw(autocast_dtypes(), label="autocast dtype")
    dts = tuple(data.draw(input_dtypes(integers=k == ANY), label=f"input {i} dtype") for i, k in enumerate(e.kinds))
    seed = data.draw(st.integers(0, 2 ** 16), label="seed")
    args, kwargs = e.build(dts, device_type, seed)
    return e, lower, args, kwargs


DEVICE_TYPES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


@pytest.mark.parametrize("device_type", DEVICE_TYPES)
@settings(max_examples=250, deadline=None)
@given(data=st.data())
def test_every_op_follows_its_policy(device_type, data):
    e, lower, args, kwargs = _draw_case(data, device_type)
    check_autocast(e.name, args, kwargs, device_type=device_type, dtype=lower,
                   expect_policy=mp.amp.op_policy(e.name, device_type))  # also checks the output-dtype rule


@pytest.mark.parametrize("device_type", DEVICE_TYPES)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_lower_precision_and_fp32_outputs(device_type, data):
    """Autocast's output dtype rules, stated directly on all-float32 inputs."""
    e = data.draw(st.sampled_from([c for c in CATALOGUE if FLOAT in c.kinds or ANY in c.kinds]))
    lower = data.draw(autocast_dtypes())
    args, kwargs = e.build((mp.float32,) * len(e.kinds), device_type, 0)
    policy = mp.amp.op_policy(e.name, device_type)
    if policy is mp.amp.CastPolicy.BANNED:
        return
    with mp.autocast(device_type, dtype=lower):
        out = registry.dispatch(registry.get(e.name), tuple(args), kwargs)
    if policy is mp.amp.CastPolicy.LOWER_PRECISION_FP:
        assert out.dtype == lower
    elif policy in (mp.amp.CastPolicy.FP32, mp.amp.CastPolicy.PROMOTE):
        assert out.dtype == mp.float32  # float32 inputs: promote's widest is float32 too
    elif not registry.get(e.name).composite:  # (a composite without a policy has its inner ops autocast)
        assert out.dtype == mp.float32


@pytest.mark.parametrize("device_type", DEVICE_TYPES)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_promote_ops_return_the_widest_floating_input(device_type, data):
    e = data.draw(st.sampled_from([c for c in CATALOGUE if mp.amp.op_policy(c.name, device_type)
                                   is mp.amp.CastPolicy.PROMOTE]))
    lower = data.draw(autocast_dtypes())
    dts = tuple(data.draw(st.sampled_from([lower, mp.float32, mp.float64])) for _ in e.kinds)
    args, kwargs = e.build(dts, device_type, 1)
    # autocast leaves float64 alone (torch's is_eligible) and casts the rest to their widest type; an op that
    # needs one dtype then refuses a float64 beside them, with autocast as without (torch.dot raises too)
    eligible = {d for d in dts if d != mp.float64}
    cast = tuple(d if d == mp.float64 else (lower if eligible == {lower} else mp.float32) for d in dts)
    try:
        plain_args, plain_kwargs = e.build(cast, device_type, 1)
        registry.dispatch(registry.get(e.name), tuple(plain_args), plain_kwargs)
    except TypeError as refusal:
        with pytest.raises(TypeError, match="same dtype"), mp.autocast(device_type, dtype=lower):
            registry.dispatch(registry.get(e.name), tuple(args), kwargs)
        assert "same dtype" in str(refusal)
        return
    with mp.autocast(device_type, dtype=lower):
        out = registry.dispatch(registry.get(e.name), tuple(args), kwargs)
    widest = mp.float64 if mp.float64 in dts else (lower if set(dts) == {lower} else mp.float32)
    assert out.dtype == widest


# ----------------------------------------------------------------- nesting
REGION = st.tuples(st.sampled_from(["cuda", "cpu"]), st.sampled_from([None, mp.float16, mp.bfloat16]),
                   st.booleans(), st.booleans())


@pytest.mark.filterwarnings("ignore:autocast. CUDA is not available:UserWarning")
@settings(max_examples=100, deadline=None)
@given(regions=st.lists(REGION, min_size=1, max_size=5), fail_at=st.integers(0, 6))
def test_nested_regions_restore_state_exactly(regions, fail_at):
    def state():
        s = PER_THREAD.autocast
        return dict(autocast_state.active_regions() or {}), s.cache_enabled, s.enabled_depth

    def enter(level):
        if level == len(regions):
            if fail_at == level:
                raise LookupError
            return
        dev, dtype, enabled, cache = regions[level]
        before = state()
        try:
            with mp.autocast(dev, dtype=dtype, enabled=enabled, cache_enabled=cache):
                expected_dtype = dtype or am.DEFAULT_DTYPES[dev]
                enabled = enabled and (dev == "cpu" or mp.is_cuda_available())  # (no GPU: "cuda" disables itself)
                assert mp.amp.is_autocast_enabled(dev) == enabled
                if enabled:
                    assert mp.amp.get_autocast_dtype(dev) == expected_dtype
                other = "cpu" if dev == "cuda" else "cuda"
                assert mp.amp.is_autocast_enabled(other) == (other in before[0])
                if fail_at == level:
                    raise LookupError
                enter(level + 1)
        finally:
            assert state() == before
    start = state()
    try:
        enter(0)
    except LookupError:
        pass
    assert state() == start
    assert PER_THREAD.autocast.cache is None or PER_THREAD.autocast.enabled_depth > 0


# ----------------------------------------------------------------- the cache is never stale
STEP = st.sampled_from(["use", "use", "update", "update_through_detach", "update_through_view", "region",
                        "no_grad_use", "backward"])


@settings(max_examples=80, deadline=None)
@given(steps=st.lists(STEP, min_size=1, max_size=12), lower=autocast_dtypes())
def test_cache_never_serves_a_stale_weight(steps, lower):
    x = mp.randn(2, 3)
    w = mp.randn(4, 3, requires_grad=True)
    region = mp.autocast("cpu", dtype=lower)
    region.__enter__()
    try:
        for step in steps:
            if step in ("use", "no_grad_use", "backward"):
                if step == "no_grad_use":
                    with mp.no_grad():
                        out = F.linear(x, w)
                else:
                    out = F.linear(x, w)
                expected = F.linear(x.to(lower), w.detach().to(lower))  # a fresh cast of the current weight
                assert np.array_equal(out.numpy(), expected.numpy())
                if step == "backward":
                    out.sum().backward()
            elif step == "update":
                with mp.no_grad():
                    w.add_(0.5)
            elif step == "update_through_detach":  # detach() shares memory and the version counter
                w.detach().mul_(-1.0)
            elif step == "update_through_view":      # so does an index view of it
                w.detach()[1:].mul_(-1.0)
            else:  # leave and re-enter the region
                region.__exit__(None, None, None)
                assert PER_THREAD.autocast.cache is None
                region.__enter__()
    finally:
        region.__exit__(None, None, None)


def test_cache_sees_an_in_place_change_through_an_index_view():
    """An index view shares its base's version counter, so writing through it bumps the weight's version."""
    x, w = mp.randn(2, 3), mp.randn(4, 3, requires_grad=True)
    with mp.autocast("cpu"):
        F.linear(x, w)
        w.detach()[0].mul_(-1.0)
        out = F.linear(x, w)
    assert np.array_equal(out.numpy(), F.linear(x.to(mp.bfloat16), w.detach().to(mp.bfloat16)).numpy())
