"""This thread's modes: the switches an op call consults, in one object per thread.

    field                               owner (the only module that changes it)
    grad, inference, anomaly, check_nan autograd/grad_mode.py   no_grad, inference_mode, detect_anomaly
    dual_level                          autograd/forward_ad.py  the active forward-AD level, or None
    autocast_regions                    ops/autocast.py         {device_type: lower dtype} of the enabled
                                                                autocast regions, or None
    observers, calls                    ops/dispatch.py         who observes op calls (trace, profiler,
                                                                inspector) and the calls now running

They share one object because dispatch reads most of them on every op call. An attribute of a
``threading.local`` costs a lookup of this thread's storage (~70 ns in CPython), an attribute of a plain
object a few: so a hot path reads ``m = PER_THREAD.modes`` once and then ``m.grad``, ``m.autocast_regions``...
"""
from __future__ import annotations

import threading

__all__ = ["Modes", "PER_THREAD", "modes"]


class Modes:
    """One thread's modes; ``__init__`` sets each new thread's defaults."""
    __slots__ = ("grad", "inference", "anomaly", "check_nan", "dual_level", "autocast_regions", "observers",
                 "calls")

    def __init__(self):
        self.grad = True
        self.inference = False
        self.anomaly = False
        self.check_nan = True
        self.dual_level = None
        self.autocast_regions = None
        self.observers = ()
        self.calls = None  # a list once somebody observes


class _PerThread(threading.local):
    def __init__(self):  # (runs once in each thread that looks)
        self.modes = Modes()


PER_THREAD = _PerThread()


def modes() -> Modes:
    """This thread's Modes (in a hot path, read ``PER_THREAD.modes`` once into a local instead)."""
    return PER_THREAD.modes
