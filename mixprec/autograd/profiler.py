"""mp.autograd.profiler: torch.autograd.profiler's names — the older profiler API that scripts still use.

``profile`` here is torch.autograd.profiler.profile's shape (``enabled``, ``use_device``,
``function_events``, ``self_cpu_time_total``, ``total_average()``) over mp.profiler.profile,
which does the recording; ``record_function`` is mp.profiler's. ``emit_nvtx`` opens an NVTX
range around every op call (and each backward node), for Nsight Systems; it needs a GPU.

(This module builds on mp.profiler, so it sits in the library layer, above the rest of autograd;
mixprec's __init__ imports it once mp.profiler is there.)
"""
from __future__ import annotations

import warnings

from .. import observers
from ..backend.availability import is_cuda_available, require_cuda
from ..cuda import nvtx
from ..ops.dispatch import tensors_in
from ..profiler import ProfilerActivity, record_function  # noqa: F401  (torch.autograd.profiler.record_function)
from ..profiler import profile as _profile

__all__ = ["profile", "record_function", "emit_nvtx"]


class profile:
    """``with mp.autograd.profiler.profile() as prof:`` then ``prof.key_averages().table()``,
    ``prof.self_cpu_time_total``, ``prof.total_average()``, ``prof.function_events``.

    enabled=False records nothing. use_device="cuda" (or the deprecated use_cuda=True) also
    times CUDA; without a usable GPU it warns and profiles the CPU, as torch does. record_shapes,
    profile_memory, with_stack, with_flops and with_modules are mp.profiler.profile's.
    """

    def __init__(self, enabled=True, *, use_cuda=False, use_device=None, record_shapes=False, with_flops=False,
                 profile_memory=False, with_stack=False, with_modules=False, use_kineto=False, use_cpu=True):
        if use_cuda:
            warnings.warn("The attribute `use_cuda` will be deprecated soon, please use ``use_device = 'cuda'`` "
                          "instead.", FutureWarning, stacklevel=2)
            use_device = "cuda"
        if use_device not in (None, "cpu", "cuda"):
            raise ValueError(f"profile: use_device must be 'cuda', 'cpu' or None, got {use_device!r}")
        if use_device == "cuda" and not is_cuda_available():
            warnings.warn("CUDA is not available, disabling CUDA profiling", UserWarning, stacklevel=2)
            use_device = None
        activities = {ProfilerActivity.CPU} | ({ProfilerActivity.CUDA} if use_device == "cuda" else set())
        self.enabled = bool(enabled)
        self.function_events = None
        self._profile = _profile(activities=activities, record_shapes=record_shapes, profile_memory=profile_memory,
                                 with_stack=with_stack, with_flops=with_flops, with_modules=with_modules) \
            if self.enabled else None

    def __enter__(self):
        if self._profile is not None:
            self._profile.__enter__()
        return self

    def __exit__(self, *exc):
        if self._profile is not None:
            self._profile.__exit__(*exc)
            self.function_events = self._profile.events()
        return False

    def _events(self):
        if self.function_events is None:
            raise RuntimeError("profile: no results (the profiler was made with enabled=False, or has not exited "
                               "yet)")
        return self.function_events

    def key_averages(self, group_by_input_shape=False):
        self._events()  # (the check that there are results)
        return self._profile.key_averages(group_by_input_shape)

    def total_average(self):
        """Every event summed into one row, keyed "Total"."""
        return self._events().total_average()

    @property
    def self_cpu_time_total(self) -> float:
        """The self CPU time of every recorded event, summed (microseconds)."""
        return self._events().self_cpu_time_total

    def table(self, sort_by=None, row_limit=100):
        return self._events().table(sort_by=sort_by, row_limit=row_limit)

    def export_chrome_trace(self, path):
        self._events().export_chrome_trace(path)


class emit_nvtx:
    """``with mp.autograd.profiler.emit_nvtx():`` an NVTX range named after each op call (with its input
    shapes when record_shapes=True) and each backward node, for Nsight Systems. Needs a usable GPU
    (mp.DeviceUnavailableError otherwise, on entry; torch refuses without CUDA too)."""

    sees_backward = True  # (as an observer: the engine's backward nodes get ranges too)

    def __init__(self, enabled=True, record_shapes=False):
        self.enabled, self.record_shapes = bool(enabled), bool(record_shapes)
        self._observing = None

    def __enter__(self):
        if self.enabled:
            require_cuda("mp.autograd.profiler.emit_nvtx")
            self._observing = observers.observe(self)
            self._observing.__enter__()
        return self

    def __exit__(self, *exc):
        if self._observing is not None:
            self._observing, observing = None, self._observing
            observing.__exit__(*exc)
        return False

    def enter(self, call):
        name = call.name
        if self.record_shapes and call.kind == "op":
            name += f", sizes = {[list(t.shape) for t in tensors_in(call.args)]}"
        nvtx.range_push(name)

    def exit(self, call):
        nvtx.range_pop()
