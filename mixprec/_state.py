"""This thread's state: one object per thread, its fields grouped by the module that owns them.

Each group is written only by its owner (``tests/test_state.py`` reads every module to check it);
anyone may read. ``OWNERS`` below names the owner, the only writer, of every field; each group's class
says what its fields hold.

``modes`` holds what dispatch reads on every op call. An attribute of a ``threading.local``
costs a lookup of this thread's storage (~70 ns in CPython), an attribute of a plain object a
few: so a hot path reads ``m = PER_THREAD.modes`` once and then ``m.grad``, ``m.autocast_regions``...
Each group's class attributes are a new thread's defaults.
"""
from __future__ import annotations

import threading

__all__ = ["Modes", "PER_THREAD", "OWNERS", "modes"]


class Modes:
    """The switches an op call reads."""
    __slots__ = ("grad", "inference", "anomaly", "check_nan", "dual_level", "autocast_regions", "observers",
                 "calls")

    def __init__(self):
        self.grad = True               # grad mode (no_grad, enable_grad, set_grad_enabled)
        self.inference = False         # inference_mode
        self.anomaly = False           # anomaly mode (set_detect_anomaly) ...
        self.check_nan = True          # ... and whether it fails a backward that yields NaN
        self.dual_level = None         # the active forward-AD level
        self.autocast_regions = None   # {device_type: lower dtype} of the enabled autocast regions
        self.observers = ()            # who watches op calls (observers.observe)
        self.calls = None              # the observed calls now running (a list once somebody observes)


class Saving:
    hooks = ()             # (pack, unpack) pairs of the saved_tensors_hooks entered, innermost last
    disabled = None        # disable_saved_tensors_hooks' message, while it is active
    inplace = None         # [source, clone] while an in-place op computes its new value (ops/inplace.py)


class Engine:
    runs = ()              # the backward passes running in this thread, innermost last


class Autocast:
    cache_enabled = True
    enabled_depth = 0      # enabled regions entered and not yet left: the cache is dropped at 0
    cache = None           # {(id(weight), dtype): (weight, version, cast)}
    overrides = ()         # {(op, device_type): rule} dicts of scoped overrides, innermost last
    entered = None         # what each entered region replaced, innermost last
    dtypes = {}            # {device_type: lower dtype} set by mp.set_autocast_dtype (outside regions)


class Profiler:
    recorders = ()         # the recorders attached in this thread (record_function opens ranges in each)


class Memory:
    hook = None            # the allocation watcher of mp.cuda.memory, or None


class Devices:
    default = None         # the device creation functions allocate on (None: the CPU)
    entered = ()           # (previous default, CuPy device context) per entered mp.device, innermost last


class Capture:
    active = False         # between CUDAGraph.capture_begin and capture_end


OWNERS = {
    "modes": {"grad": "autograd/grad_mode.py", "inference": "autograd/grad_mode.py",
              "anomaly": "autograd/grad_mode.py", "check_nan": "autograd/grad_mode.py",
              "dual_level": "autograd/forward_ad.py", "autocast_regions": "ops/autocast.py",
              "observers": "observers.py", "calls": "observers.py"},
    "saving": dict.fromkeys(("hooks", "disabled", "inplace"), "autograd/graph.py"),
    "engine": {"runs": "autograd/engine.py"},
    "autocast": dict.fromkeys(("cache_enabled", "enabled_depth", "cache", "overrides", "entered", "dtypes"),
                              "ops/autocast.py"),
    "profiler": {"recorders": "profiler/profiler.py"},
    "memory": {"hook": "cuda/memory.py"},
    "devices": dict.fromkeys(("default", "entered"), "backend/devices.py"),
    "capture": {"active": "backend/capture.py"},
}


class _PerThread(threading.local):
    def __init__(self):  # (runs once in each thread that looks)
        self.modes = Modes()
        self.saving = Saving()
        self.engine = Engine()
        self.autocast = Autocast()
        self.profiler = Profiler()
        self.memory = Memory()
        self.devices = Devices()
        self.capture = Capture()


PER_THREAD = _PerThread()


def modes() -> Modes:
    """This thread's Modes (in a hot path, read ``PER_THREAD.modes`` once into a local instead)."""
    return PER_THREAD.modes
