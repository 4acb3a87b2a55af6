"""mp.profiler: where the time of a training step goes, op by op, and what autocast did to each op.

torch.profiler's names — profile, record_function, schedule, ProfilerActivity,
ProfilerAction, key_averages().table(...), export_chrome_trace — plus autocast
columns: the policy applied to each op, the dtypes it was given and ran in, and
the number and time of the casts autocast made for it. See docs/profiler.md.
"""
from .events import EventAverage, EventList, KeyAverages, ProfilerEvent  # noqa: F401
from .profiler import ProfilerAction, ProfilerActivity, profile, record_function, schedule  # noqa: F401

__all__ = ["profile", "record_function", "schedule", "ProfilerActivity", "ProfilerAction", "ProfilerEvent",
           "EventList", "EventAverage", "KeyAverages"]
