"""Grad mode, inference mode and anomaly mode: functions, context managers and decorators, as in torch."""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp


def test_set_grad_enabled_as_function_context_manager_and_decorator(torch):
    for lib in (mp, torch):
        lib.set_grad_enabled(False)
        try:
            assert not lib.is_grad_enabled()
        finally:
            lib.set_grad_enabled(True)
        with lib.set_grad_enabled(False):
            assert not lib.is_grad_enabled()
            with lib.set_grad_enabled(True):
                assert lib.is_grad_enabled()
            assert not lib.is_grad_enabled()
        assert lib.is_grad_enabled()

        @lib.set_grad_enabled(False)
        def inside():
            return lib.is_grad_enabled()
        assert lib.is_grad_enabled()  # decorating switched nothing
        assert inside() is False and lib.is_grad_enabled()


def test_no_grad_and_enable_grad_decorate_with_or_without_parentheses():
    x = mp.ones(2, requires_grad=True)

    @mp.no_grad
    def a(t):
        return t * 2

    @mp.no_grad()
    def b(t):
        return t * 2

    @mp.enable_grad()
    def c(t):
        return t * 2
    assert not a(x).requires_grad and not b(x).requires_grad
    with mp.no_grad():
        assert c(x).requires_grad
    with pytest.raises(TypeError, match="generator"):
        @mp.no_grad()
        def gen():
            yield 1
    with pytest.raises(TypeError, match="True or False"):
        mp.set_grad_enabled(1)


def test_inference_mode(torch):
    for lib in (mp, torch):
        x = lib.ones(2, dtype=lib.float64, requires_grad=True)
        with lib.inference_mode():
            assert lib.is_inference_mode_enabled() and not lib.is_grad_enabled()
            y = x * 2
            t = lib.zeros(2, dtype=lib.float64)
            t.add_(1)                       # in place inside: fine
            with lib.inference_mode(False):
                assert not lib.is_inference_mode_enabled()
        assert not lib.is_inference_mode_enabled() and lib.is_grad_enabled()
        assert y.is_inference() and t.is_inference() and not y.requires_grad and not x.is_inference()
        with pytest.raises(RuntimeError, match="(?i)inference tensor outside (InferenceMode|inference mode)"):
            t.requires_grad_()
        with pytest.raises(RuntimeError, match="(?i)inference tensor outside"):
            t.add_(1)
        with pytest.raises(RuntimeError, match="(?i)inference tensors cannot be saved for backward"):
            y * x
        clone = y.clone()
        assert not clone.is_inference()
        (clone * x).sum().backward()          # a clone is a normal tensor

    @mp.inference_mode()
    def predict(t):
        return t * 3
    assert predict(mp.ones(1, requires_grad=True)).is_inference()


def test_modes_are_per_thread():
    import threading
    seen = {}
    with mp.inference_mode():
        t = threading.Thread(target=lambda: seen.update(inf=mp.is_inference_mode_enabled(),
                                                        grad=mp.is_grad_enabled()))
        t.start()
        t.join(5)
    assert seen == {"inf": False, "grad": True}


# ------------------------------------------------------------------ anomaly mode
class Boom(mp.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError("some error in backward")


def run_fn(a):
    out = Boom.apply(a)   # the forward call anomaly mode points to
    return out.sum()


def test_anomaly_mode_shows_the_forward_traceback_of_the_failing_node():
    x = mp.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="some error in backward") as plain:
        run_fn(x).backward()
    assert not getattr(plain.value, "__notes__", None)
    with mp.autograd.set_detect_anomaly(True):
        out = run_fn(x)
        with pytest.raises(RuntimeError, match="some error in backward") as info:
            out.backward()
    note = "\n".join(info.value.__notes__)
    assert "BoomBackward" in note and "out = Boom.apply(a)" in note and "run_fn" in note
    assert not mp.autograd.is_anomaly_enabled()


def test_set_detect_anomaly_modes(torch):
    for lib in (mp, torch):
        lib.autograd.set_detect_anomaly(True, check_nan=False)
        try:
            assert lib.is_anomaly_enabled() and not lib.is_anomaly_check_nan_enabled()
        finally:
            lib.autograd.set_detect_anomaly(False)
        assert not lib.is_anomaly_enabled()
        with lib.autograd.detect_anomaly(check_nan=False):
            assert lib.is_anomaly_enabled()
    x = mp.tensor([0.0, 1.0], dtype=mp.float64, requires_grad=True)
    with mp.autograd.detect_anomaly(check_nan=False), np.errstate(divide="ignore"):
        x.sqrt().sum().backward()      # inf gradient, but NaN checks are off
    assert np.isinf(x.grad.numpy()[0])
