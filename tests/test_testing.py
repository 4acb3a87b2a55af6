"""mp.testing: make_tensor, assert_close, the autocast checker (it must catch broken ops) and the strategies."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

import mixprec as mp
from mixprec.amp import CastPolicy
from mixprec.testing import (AutocastCase, assert_close, autocast_cases, autocast_dtypes, check_autocast,
                             default_tolerance, device_types, input_dtypes, make_tensor)


# ----------------------------------------------------------------- make_tensor / assert_close
def test_make_tensor_shape_dtype_range_and_seed():
    t = make_tensor((3, 4), mp.bfloat16, low=-1, high=1, seed=5)
    assert t.shape == (3, 4) and t.dtype == mp.bfloat16 and t.requires_grad
    assert np.all(np.abs(t.numpy().astype(np.float32)) <= 1)
    assert np.array_equal(t.numpy(), make_tensor((3, 4), "bfloat16", low=-1, high=1, seed=5).numpy())
    i = make_tensor((50,), mp.int64, low=0, high=3)
    assert i.dtype == mp.int64 and not i.requires_grad and set(i.tolist()) <= {0, 1, 2}
    assert make_tensor((2,), mp.float32, requires_grad=False).requires_grad is False


def test_default_tolerances_follow_the_dtype():
    assert default_tolerance(mp.float16) == (1e-3, 1e-5)
    assert default_tolerance(mp.float32, mp.bfloat16) == (1.6e-2, 1e-5)
    assert default_tolerance(mp.int64) == (0.0, 0.0)


def test_assert_close_passes_within_and_fails_beyond_tolerance():
    a = mp.tensor([1.0, 2.0, float("nan")])
    assert_close(a, mp.tensor([1.0 + 1e-7, 2.0, float("nan")]))
    with pytest.raises(AssertionError, match="1 of 3 elements differ"):
        assert_close(a, mp.tensor([1.0, 2.01, float("nan")]))
    with pytest.raises(AssertionError, match="dtypes differ"):
        assert_close(a.half(), a)
    assert_close(a.half(), a, check_dtype=False)
    with pytest.raises(AssertionError, match="shapes differ"):
        assert_close(mp.ones(2), mp.ones(3))
    assert_close(mp.tensor([1.0, 1.01], dtype=mp.bfloat16), np.array([1.0, 1.01]), rtol=1e-2, atol=0)
    with pytest.raises(AssertionError):
        assert_close(mp.tensor([1, 2]), mp.tensor([1, 3]))


# ----------------------------------------------------------------- the checker
def test_checker_passes_a_well_behaved_user_op(user_ops):
    def scaled_add(ctx, a, b, alpha=1.0):
        return a + b * a.dtype.type(alpha)
    op = user_ops("test_scaled_add", scaled_add, promote=(0, 1))
    mp.amp.register_autocast("test_scaled_add", "cpu", "fp32")
    op.grad(lambda ctx, g: (g, g))
    args = [make_tensor((2, 3), mp.bfloat16), make_tensor((3,), mp.float16)]
    assert check_autocast("test_scaled_add", args, {"alpha": 0.5}, expect_policy="fp32") == (mp.float32,) * 2
    a64 = [make_tensor((2,), mp.float64), make_tensor((2,), mp.float16)]
    assert check_autocast("test_scaled_add", a64, expect_policy=CastPolicy.FP32) == (mp.float64, mp.float32)


def test_checker_catches_a_policy_other_than_intended(user_ops):
    user_ops("test_plain", lambda ctx, a: a * a.dtype.type(2), differentiable=False)
    mp.amp.register_autocast("test_plain", "cpu", "fp32")
    with pytest.raises(AssertionError, match="expected CastPolicy.LOWER_PRECISION_FP"):
        check_autocast("test_plain", [make_tensor((2,), mp.float32)], expect_policy="lower_precision_fp")


def test_checker_catches_an_op_that_depends_on_the_autocast_state(user_ops):
    def sneaky(ctx, a):
        return a * a.dtype.type(3 if mp.amp.is_autocast_enabled("cpu") else 2)
    user_ops("test_sneaky", sneaky, differentiable=False)
    mp.amp.register_autocast("test_sneaky", "cpu", "fp32")
    with pytest.raises(AssertionError, match="values under autocast differ"):
        check_autocast("test_sneaky", [make_tensor((4,), mp.float16)])


def test_checker_catches_a_result_in_the_wrong_dtype(user_ops):
    def widening_matmul(ctx, a, b):
        return (a @ b).float()  # a lower-precision op that quietly returns float32
    user_ops("test_widening_matmul", widening_matmul, promote=(0, 1), composite=True)
    mp.amp.register_autocast("test_widening_matmul", "cpu", "lower_precision_fp")
    args = [make_tensor((2, 3), mp.float32), make_tensor((3, 2), mp.float32)]
    check_autocast("test_widening_matmul", args)  # consistent, so only the output rule can catch it
    with pytest.raises(AssertionError, match="should be bfloat16, got float32"):
        check_autocast("test_widening_matmul", args, expect_policy="lower_precision_fp")


def test_checker_catches_a_banned_op_that_runs(user_ops):
    user_ops("test_banned", lambda ctx, a: a, differentiable=False)
    mp.amp.register_autocast("test_banned", "cpu", "banned")
    from mixprec.ops import autocast
    original = autocast.target_dtypes
    autocast.target_dtypes = lambda name, dev, rule, lower, dtypes: tuple(dtypes)  # a rule that forgot the ban
    try:
        with pytest.raises(AssertionError, match="did not raise"):
            check_autocast("test_banned", [make_tensor((2,), mp.float32)])
    finally:
        autocast.target_dtypes = original
    check_autocast("test_banned", [make_tensor((2,), mp.float32)], expect_policy="banned")


def test_checker_on_builtin_ops_and_explicit_dtype():
    x = make_tensor((3, 4), mp.bfloat16)
    assert check_autocast("prod", [x], expect_policy="fp32") == (mp.float32,)
    assert check_autocast("prod", [x], {"dtype": mp.bfloat16}) == (mp.bfloat16,)  # dtype= is respected
    lin = [make_tensor((2, 3), mp.float32), make_tensor((4, 3), mp.float32)]
    assert check_autocast("linear", lin, dtype=mp.float16, expect_policy="lower_precision_fp") == (mp.float16,) * 2


# ----------------------------------------------------------------- strategies, and the documented example
@settings(max_examples=30, deadline=None)
@given(case=autocast_cases(n_inputs=3, integers=True))
def test_autocast_cases_draw_valid_situations(case):
    assert isinstance(case, AutocastCase) and case.device_type in ("cpu", "cuda")
    assert case.autocast_dtype in (mp.float16, mp.bfloat16) and len(case.input_dtypes) == 3
    assert set(case.input_dtypes) <= {mp.float16, mp.bfloat16, mp.float32, mp.float64, mp.int64}
    if not mp.is_cuda_available():
        assert case.device_type == "cpu"


@settings(max_examples=20, deadline=None)
@given(lower=autocast_dtypes(), device_type=device_types(cuda=True), dtype=input_dtypes())
def test_strategy_building_blocks(lower, device_type, dtype):
    assert lower in (mp.float16, mp.bfloat16)
    assert device_type in ("cpu", "cuda")
    assert dtype in (mp.float16, mp.bfloat16, mp.float32, mp.float64)


def test_documented_example(user_ops):
    """The example of docs/autocast.md and mp.testing's docstring, run for real."""
    def my_op(ctx, a, b):
        return a * b + a
    user_ops("my_op", my_op, promote=(0, 1), differentiable=False)
    mp.amp.register_autocast("my_op", "cpu", mp.float32)

    @settings(max_examples=25, deadline=None)
    @given(autocast_cases(n_inputs=2))
    def test_my_op_follows_its_policy(case):
        args = [make_tensor((3, 4), d, device=case.device_type) for d in case.input_dtypes]
        check_autocast("my_op", args, device_type=case.device_type, dtype=case.autocast_dtype, expect_policy="fp32")
    test_my_op_follows_its_policy()
