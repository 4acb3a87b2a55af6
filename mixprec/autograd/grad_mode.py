"""Thread-local switches of autograd: grad mode, inference mode and anomaly mode (kept in _state.Modes).

Each switch is a context manager and a decorator (a decorated function runs
with the switch set and restores it afterwards, also for generators' bodies
between yields they are not: use the context manager there).
"""
from __future__ import annotations

import functools
import inspect
from .._state import modes  # this thread's switches live there, beside the other modes an op call reads


def is_grad_enabled() -> bool:
    return modes().grad


def is_inference_mode_enabled() -> bool:
    return modes().inference


class _Switch:
    """Base of the grad-mode switches: a context manager that restores the previous state on exit,
    and a decorator (``@no_grad()`` and ``@no_grad`` both work)."""

    def __new__(cls, *args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]) and cls._bare_decorator:
            return cls()(args[0])  # @no_grad without parentheses
        return super().__new__(cls)

    _bare_decorator = True

    def _enter(self):
        raise NotImplementedError

    def __enter__(self):
        m = modes()
        self._saved = (m.grad, m.inference)
        self._enter()
        return self

    def __exit__(self, *exc):
        m = modes()
        m.grad, m.inference = self._saved
        return False

    def clone(self):
        return self.__class__()

    def __call__(self, fn):
        if not callable(fn):
            raise TypeError(f"{type(self).__name__} decorates a function, got {type(fn).__name__}")
        if inspect.isgeneratorfunction(fn):
            raise TypeError(f"{type(self).__name__} cannot decorate a generator function; use it as a context "
                            "manager inside the generator")

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.clone():
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_Switch):
    """Ops inside record no graph: for evaluation and for optimizer updates."""

    def _enter(self):
        modes().grad = False


class enable_grad(_Switch):
    """Turn graph recording back on inside a no_grad region."""

    def _enter(self):
        modes().grad = True


class set_grad_enabled(_Switch):
    """Set grad mode: ``set_grad_enabled(False)`` switches it at once (a plain call), and restores the
    previous mode when used as ``with set_grad_enabled(mode):`` or ``@set_grad_enabled(mode)``."""

    _bare_decorator = False

    def __init__(self, mode: bool):
        if not isinstance(mode, bool):
            raise TypeError(f"set_grad_enabled: mode must be True or False, got {mode!r}")
        self.mode = mode
        self._prev = modes().grad
        modes().grad = mode  # a plain call takes effect now, as torch's does

    def __enter__(self):
        self._saved = (self._prev, modes().inference)
        modes().grad = self.mode
        return self

    def clone(self):
        prev = modes().grad
        clone = set_grad_enabled(self.mode)
        modes().grad = prev
        return clone

    def __call__(self, fn):
        modes().grad = self._prev  # as a decorator it must not switch anything when the function is defined
        return super().__call__(fn)

    def __repr__(self):
        return f"set_grad_enabled(mode={self.mode})"


class inference_mode(_Switch):
    """no_grad and more: tensors made inside are *inference tensors* that can never enter autograd.

    Outside the block an inference tensor cannot be saved for backward by an op
    that records a graph, cannot be set to require grad, and cannot be changed
    in place (all clear errors); clone() it for a normal tensor.
    ``inference_mode(False)`` inside a block switches it off again.
    """

    def __init__(self, mode: bool = True):
        if not isinstance(mode, bool):
            raise TypeError(f"inference_mode: mode must be True or False, got {mode!r}")
        self.mode = mode

    def _enter(self):
        if self.mode:
            m = modes()
            m.grad, m.inference = False, True
        else:
            modes().inference = False

    def clone(self):
        return inference_mode(self.mode)


# ---------------------------------------------------------------- anomaly mode
def is_anomaly_enabled() -> bool:
    return modes().anomaly


def is_anomaly_check_nan_enabled() -> bool:
    return modes().check_nan


class set_detect_anomaly:
    """Switch anomaly mode on or off: a plain call sets it now; ``with``/``@`` restore it afterwards.

    In anomaly mode each recorded op keeps the stack of its forward call, and an
    error inside its backward carries that stack (as a note on the exception);
    with ``check_nan`` a backward that yields NaN (not inf, as torch) fails naming the op.
    Costs a stack capture per op: for debugging, not training.
    """

    def __init__(self, mode: bool, check_nan: bool = True):
        m = modes()
        self._prev = (m.anomaly, m.check_nan)
        m.anomaly, m.check_nan = bool(mode), bool(check_nan)
        self.mode, self.check_nan = bool(mode), bool(check_nan)

    def __enter__(self):
        m = modes()
        m.anomaly, m.check_nan = self.mode, self.check_nan
        return self

    def __exit__(self, *exc):
        m = modes()
        m.anomaly, m.check_nan = self._prev
        return False

    def __call__(self, fn):
        m = modes()
        m.anomaly, m.check_nan = self._prev

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with set_detect_anomaly(self.mode, self.check_nan):
                return fn(*args, **kwargs)
        return wrapper


class detect_anomaly(set_detect_anomaly):
    """Anomaly mode inside the block (``set_detect_anomaly(True, check_nan)`` as a context manager)."""

    def __init__(self, check_nan: bool = True):
        m = modes()
        self._prev = (m.anomaly, m.check_nan)
        self.mode, self.check_nan = True, bool(check_nan)

