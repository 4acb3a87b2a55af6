"""profile(), record_function(), schedule(): torch.profiler's shape over mixprec's dispatch observers.

The profiler is a dispatch observer (mixprec.observers.observe): while it
records, every op call, every autocast cast, each graph node's backward and each
backward pass of this thread becomes a ProfilerEvent, timed on the host with
perf_counter_ns and, for calls on a GPU, also with a pair of CUDA events around
the call (and an NVTX range, so Nsight Systems shows the same names). When it is
not recording it is not attached, so the ops cost what they cost without it.
"""
from __future__ import annotations

import contextlib
import enum
import threading
import time
import warnings

from ..backend import availability, capture
from .._state import PER_THREAD
from .._text import policy_text
from .. import cuda, observers as _observers
from ..ops import dispatch as _dispatch
from .events import EventList, ProfilerEvent
from ..cuda import nvtx


class ProfilerActivity(enum.Enum):
    """What to time: CPU (the host: always recorded, the events are the calls) and CUDA (GPU time
    between CUDA events recorded around each call on a GPU)."""
    CPU = "cpu"
    CUDA = "cuda"


class ProfilerAction(enum.Enum):
    """What a schedule asks of one step."""
    NONE = 0             # not attached: ops run at full speed
    WARMUP = 1           # attached, events dropped (the first steps of tracing are the slowest)
    RECORD = 2           # attached, events kept
    RECORD_AND_SAVE = 3  # the last step of a cycle: kept, then the cycle is handed to on_trace_ready


def _count(value, name, least):
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"schedule: {name} must be an int >= {least}, got {value!r}")
    return value


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0):
    """The steps to record, as torch.profiler.schedule: after ``skip_first`` steps, cycles of ``wait``
    steps not recorded, ``warmup`` steps traced and dropped, ``active`` steps recorded (the last one
    RECORD_AND_SAVE); ``repeat`` cycles (0: as long as the loop runs).

    Returns a function step number -> ProfilerAction, which profile(schedule=...) calls.
    """
    wait, warmup = _count(wait, "wait", 0), _count(warmup, "warmup", 0)
    active, repeat, skip_first = _count(active, "active", 1), _count(repeat, "repeat", 0), \
        _count(skip_first, "skip_first", 0)
    cycle = wait + warmup + active

    def action(step: int) -> ProfilerAction:
        step = _count(step, "the step number", 0) - skip_first
        if step < 0 or (repeat and step // cycle >= repeat):
            return ProfilerAction.NONE
        phase = step % cycle
        if phase < wait:
            return ProfilerAction.NONE
        if phase < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if phase < cycle - 1 else ProfilerAction.RECORD_AND_SAVE
    return action


def _always_record(step):
    return ProfilerAction.RECORD


def _active():
    return PER_THREAD.profiler  # the recorders attached in this thread (record_function opens ranges in each)


class _Recorder:
    """The dispatch observer behind one recording cycle: turns calls and ranges into ProfilerEvents."""

    sees_backward = True  # (backward passes and graph nodes are calls it records too)

    def __init__(self, origin_ns, cuda, record_shapes):
        self.origin_ns, self.cuda, self.record_shapes = origin_ns, cuda, record_shapes
        self.events = EventList()
        self.stack = []           # open events, innermost last
        self.open_calls = {}      # id(call) -> its event
        self.cuda_origins = {}    # device index -> (event, host microseconds when it was recorded)

    def now(self) -> float:
        return (time.perf_counter_ns() - self.origin_ns) / 1e3

    # ---- ranges (calls and record_function) ----
    def open(self, name, kind, device=None) -> ProfilerEvent:
        ev = ProfilerEvent(name, kind, 0.0, self.stack[-1] if self.stack else None)
        ev.device_type = None if device is None else device.type
        if self.cuda:
            _nvtx_push(name)
            if device is not None and device.type == "cuda" and not capture.is_capturing():
                ev.cuda_events = [self._cuda_event(device.index), None, device.index]
        self.stack.append(ev)
        self.events.append(ev)
        ev.start_us = self.now()  # last: the bookkeeping above is not the event's time
        return ev

    def close(self, ev):
        if ev.end_us is not None:
            return  # already closed with an enclosing range
        end = self.now()
        if ev.cuda_events is not None:
            ev.cuda_events[1] = self._cuda_event(ev.cuda_events[2])
        while self.stack:  # (ranges left open inside this one are closed with it)
            top = self.stack.pop()
            if self.cuda:
                _nvtx_pop()
            if top.end_us is None:
                top.end_us = end
            if top is ev:
                break

    def _cuda_event(self, index):
        """A timing event recorded now on device ``index``'s current stream (the first one per device
        also gets an origin event, which places the GPU track in time)."""
        with cuda.device(index):
            if index not in self.cuda_origins:
                origin = cuda.Event(enable_timing=True)
                origin.record()
                self.cuda_origins[index] = (origin, self.now())
            event = cuda.Event(enable_timing=True)
            event.record()
        return event

    # ---- the dispatch observer ----
    def enter(self, call):
        parent = call.parent
        if parent is not None and parent.casting:
            kind, name = "cast", f"{call.name} (autocast)"
        else:
            kind, name = ("op" if call.kind == "op" else call.kind), call.name
        self.open_calls[id(call)] = self.open(name, kind, call.device)

    def exit(self, call):
        ev = self.open_calls.pop(id(call), None)
        if ev is None:
            return  # the call began before this recorder was attached
        self.close(ev)
        ev.input_dtypes = _tensor_dtypes(call.args)
        ev.run_dtypes = _tensor_dtypes(call.run_args) if call.run_args is not None else ev.input_dtypes
        ev.output_dtype = _first_dtype(call.out)
        if self.record_shapes:
            ev.input_shapes = tuple(t.shape for t in _dispatch.tensors_in(call.args))
        decision = call.autocast
        if decision is not None:
            ev.policy, ev.cache_hits = policy_text(decision.rule, decision.lower), decision.cache_hits
        if ev.kind == "cast" and ev.parent is not None:
            ev.parent.casts += 1
            ev.parent.cast_time += ev.cpu_time_total

    # ---- the end of a cycle ----
    def finish(self) -> EventList:
        """Close what is still open, resolve the GPU timings, and hand over the events."""
        if self.stack:
            self.close(self.stack[0])
        if self.cuda_origins:
            for index in self.cuda_origins:
                cuda.synchronize(index)
            for ev in self.events:
                if ev.cuda_events is not None and ev.cuda_events[1] is not None:
                    start, end, index = ev.cuda_events
                    origin, origin_us = self.cuda_origins[index]
                    ev.cuda_time_total = start.elapsed_time(end) * 1e3
                    ev.cuda_start_us = origin_us + origin.elapsed_time(start) * 1e3
        return self.events


def _tensor_dtypes(args):
    if not isinstance(args, (tuple, list)):
        return ()
    return tuple(t.dtype for t in _dispatch.tensors_in(args))


def _first_dtype(out):
    if isinstance(out, (tuple, list)):
        out = next((o for o in out if o is not None), None)
    return getattr(out, "dtype", None)


def _nvtx_push(name):
    nvtx.range_push(name)


def _nvtx_pop():
    nvtx.range_pop()


def _check_activities(activities):
    if activities is None:
        return {ProfilerActivity.CPU} | ({ProfilerActivity.CUDA} if availability.is_cuda_available() else set())
    try:
        chosen = set(activities)
    except TypeError:
        chosen = None
    if not chosen or not all(isinstance(a, ProfilerActivity) for a in chosen):
        raise ValueError("profile: activities must be a non-empty collection of mp.profiler.ProfilerActivity "
                         f"(CPU, CUDA), got {activities!r}")
    if ProfilerActivity.CUDA in chosen and not availability.is_cuda_available():
        warnings.warn(f"mp.profiler: CUDA activity asked for, but no GPU can be used "
                      f"({availability.cuda_unavailable_reason()}); profiling the CPU only", stacklevel=3)
        chosen.discard(ProfilerActivity.CUDA)
    return chosen | {ProfilerActivity.CPU}


def _unrecorded(**options):
    """torch's profile options mixprec accepts but does not record: checked, and a warning for each one set."""
    for name, value in options.items():
        if not isinstance(value, bool):
            raise TypeError(f"profile: {name} must be True or False, got {value!r}")
        if value:
            warnings.warn(f"mp.profiler: {name}=True is accepted, but mixprec records no "
                          f"{_UNRECORDED[name]}; the profile has its other columns", UserWarning, stacklevel=3)


_UNRECORDED = {"profile_memory": "memory columns", "with_stack": "call stacks", "with_flops": "FLOP counts",
               "with_modules": "module hierarchy"}


class profile:
    """Record what this thread's ops cost, as torch.profiler.profile does, plus what autocast did.

        with mp.profiler.profile() as prof:
            with mp.profiler.record_function("forward"), mp.autocast("cpu"):
                loss = model(x).sum()
            loss.backward()
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10))
        prof.export_chrome_trace("trace.json")

    activities: ProfilerActivity values (default: CPU, plus CUDA when a GPU is usable);
    schedule: a function step -> ProfilerAction (see schedule()), advanced by step();
    on_trace_ready: called with the profiler each time a recording cycle ends (and at exit
    when a cycle was still recording); record_shapes: keep each call's input shapes.
    The results (events(), key_averages(), export_chrome_trace) are those of the last cycle
    that ended. Only the thread that entered the profiler is recorded.

    torch's other options are accepted so its scripts run: use_cuda=True (deprecated, as in
    torch: a FutureWarning) adds the CUDA activity; profile_memory, with_stack, with_flops and
    with_modules, when True, warn that mixprec records no memory, stack, FLOP or module columns.
    """

    def __init__(self, *, activities=None, schedule=None, on_trace_ready=None, record_shapes: bool = False,
                 profile_memory: bool = False, with_stack: bool = False, with_flops: bool = False,
                 with_modules: bool = False, use_cuda: bool | None = None):
        if use_cuda is not None:
            warnings.warn("`use_cuda` is deprecated, use `activities` argument instead", FutureWarning, stacklevel=2)
            if use_cuda:
                activities = set(activities or (ProfilerActivity.CPU,)) | {ProfilerActivity.CUDA}
        _unrecorded(profile_memory=profile_memory, with_stack=with_stack, with_flops=with_flops,
                    with_modules=with_modules)
        self.activities = _check_activities(activities)
        if schedule is not None and not callable(schedule):
            raise TypeError(f"profile: schedule must be a function step -> ProfilerAction (mp.profiler.schedule"
                            f"(...)), got {type(schedule).__name__}")
        if on_trace_ready is not None and not callable(on_trace_ready):
            raise TypeError(f"profile: on_trace_ready must be callable, got {type(on_trace_ready).__name__}")
        if not isinstance(record_shapes, bool):
            raise TypeError(f"profile: record_shapes must be True or False, got {record_shapes!r}")
        self.schedule = schedule or _always_record
        self.on_trace_ready, self.record_shapes = on_trace_ready, record_shapes
        self.step_num = 0
        self.current_action = ProfilerAction.NONE
        self._scheduled = schedule is not None
        # the recording cycle's observer, its observe() context, the open step range, the last cycle's events,
        # perf_counter_ns at start(), the thread that started the profiler
        self._recorder = self._observing = self._step_event = self._results = self._origin_ns = self._thread = None

    # ---- lifecycle ----
    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    def start(self):
        if self._thread is not None:
            raise RuntimeError("profile: this profiler is already running; use a new one to profile again")
        self._thread = threading.get_ident()
        self._origin_ns = time.perf_counter_ns()
        self.step_num = 0
        self._transition(self._action(0), opening=self._scheduled)
        return self

    def stop(self):
        self._check_thread("stop")
        try:  # (on_trace_ready may raise: the profiler is stopped all the same, and its error propagates)
            if self.current_action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
                self._save()
        finally:
            self._detach()
            self.current_action = ProfilerAction.NONE
            self._thread = None

    def step(self):
        """Mark the end of one training step: the schedule decides whether the next one is recorded."""
        self._check_thread("step")
        previous = self.current_action
        if previous in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE) and self._step_event is not None:
            self._recorder.close(self._step_event)
            self._step_event = None
        self.step_num += 1
        try:  # (on_trace_ready may raise: the next step is still profiled as scheduled, and its error propagates)
            if previous is ProfilerAction.RECORD_AND_SAVE:
                self._save()
        finally:
            self._transition(self._action(self.step_num), opening=True)

    def _action(self, step):
        action = self.schedule(step)
        if not isinstance(action, ProfilerAction):
            raise TypeError(f"profile: the schedule returned {action!r} for step {step}; expected a "
                            "mp.profiler.ProfilerAction")
        return action

    def _transition(self, action, opening):
        if action is ProfilerAction.NONE:
            self._detach()
        else:
            fresh_cycle = self._recorder is None or self.current_action is ProfilerAction.WARMUP \
                and action is not ProfilerAction.WARMUP
            if fresh_cycle:  # a new cycle (or warm-up is over: its events are dropped)
                self._detach()
                self._attach()
            if opening and action is not ProfilerAction.WARMUP:
                self._step_event = self._recorder.open(f"ProfilerStep#{self.step_num}", "step")
        self.current_action = action

    def _attach(self):
        self._recorder = _Recorder(self._origin_ns, ProfilerActivity.CUDA in self.activities, self.record_shapes)
        self._observing = _observers.observe(self._recorder)
        self._observing.__enter__()
        active = _active()
        active.recorders = active.recorders + (self._recorder,)

    def _detach(self):
        if self._recorder is not None:
            self._observing.__exit__(None, None, None)
            active = _active()
            active.recorders = tuple(r for r in active.recorders if r is not self._recorder)
            self._recorder = self._observing = self._step_event = None

    def _save(self):
        """The cycle is over: its events become the results, and on_trace_ready sees them."""
        if self._step_event is not None:
            self._recorder.close(self._step_event)
            self._step_event = None
        try:
            self._results = self._recorder.finish()
        finally:
            self._detach()
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    def _check_thread(self, what):
        if self._thread is None:
            raise RuntimeError(f"profile.{what}: the profiler is not running (use it as a context manager)")
        if self._thread != threading.get_ident():
            raise RuntimeError(f"profile.{what}: called from another thread than the one that started it")

    # ---- results ----
    def events(self) -> EventList:
        """Every recorded event of the last finished cycle, in the order they started."""
        if self._results is None:
            raise RuntimeError("profile: nothing recorded yet; results are ready when the profiler exits, or for "
                               "a schedule when a cycle ends (in on_trace_ready)")
        return self._results

    def key_averages(self, group_by_input_shape: bool = False):
        """One row per op name (and input shapes, with group_by_input_shape): see EventList.key_averages."""
        if group_by_input_shape and not self.record_shapes:
            raise ValueError("key_averages: group_by_input_shape needs profile(record_shapes=True)")
        return self.events().key_averages(group_by_input_shape)

    def export_chrome_trace(self, path) -> None:
        """Write the last cycle as a Chrome trace (chrome://tracing, Perfetto): see EventList.export_chrome_trace."""
        self.events().export_chrome_trace(path)


class record_function(contextlib.ContextDecorator):
    """Name a block of code in the profile: ``with mp.profiler.record_function("attention"):`` (or as a
    decorator). Its event holds the calls made inside; while the profiler times CUDA it is also an NVTX
    range. Outside a profiler it costs a lookup and records nothing."""

    def __init__(self, name: str):
        if not isinstance(name, str):
            raise TypeError(f"record_function: name must be a str, got {type(name).__name__}")
        self.name = name
        self._open = []  # per entry (one object may be entered again: a recursive decorated function)

    def __enter__(self):
        self._open.append(tuple((r, r.open(self.name, "user")) for r in _active().recorders))
        return self

    def __exit__(self, *exc):
        if not self._open:
            raise RuntimeError(f"record_function({self.name!r}).__exit__: it was not entered (use it in a with "
                               "statement or as a decorator)")
        for recorder, ev in self._open.pop():
            recorder.close(ev)
        return False
