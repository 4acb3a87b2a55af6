"""Thread-local switches of the autograd engine: grad mode and anomaly mode."""
from __future__ import annotations

import functools
import threading

class _Modes(threading.local):
    """Per-thread switches; the class attributes are each new thread's defaults."""
    grad = True
    anomaly = False


_local = _Modes()


def is_grad_enabled() -> bool:
    return _local.grad


def set_grad_enabled(mode: bool) -> None:
    _local.grad = bool(mode)


class _GradModeContext:
    """Context manager and decorator that sets grad mode and restores it on exit."""

    mode = True

    def __enter__(self):
        self._prev = is_grad_enabled()
        _local.grad = self.mode

    def __exit__(self, *exc):
        _local.grad = self._prev
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_GradModeContext):
    """Ops inside record no graph: for evaluation and for optimizer updates."""
    mode = False


class enable_grad(_GradModeContext):
    """Turn graph recording back on inside a no_grad region."""
    mode = True


def is_anomaly_enabled() -> bool:
    return _local.anomaly


class detect_anomaly:
    """Record where each op was created and fail on the first backward that yields NaN/inf.

    Costs a stack capture per op, so use it to debug, not to train.
    """

    def __init__(self, check_nan: bool = True):
        self.check_nan = check_nan

    def __enter__(self):
        self._prev = is_anomaly_enabled()
        _local.anomaly = self.check_nan

    def __exit__(self, *exc):
        _local.anomaly = self._prev
        return False
