"""What mp.profiler records: one ProfilerEvent per call or range, the per-name averages, the table, the trace.

Times are microseconds (floats), as torch's FunctionEvent keeps them. A parent's
"total" time contains its children; its "self" time is what is left after them.
An op's autocast casts are children of the op (autocast dispatches them while it
prepares the op's inputs), so ``cast_time`` is part of the op's total time and
not of its self time: the price AMP paid to run that op in another dtype.
"""
from __future__ import annotations

import json
import os
import threading
from collections import Counter

from .._text import DTYPE_LEGEND, dtypes_text, plural, text_table, time_text

# kinds of event: an op call, an autocast cast made for an op, a graph node's backward, a whole
# backward pass, a record_function range, and the profiler's own "ProfilerStep#N" ranges
KINDS = ("op", "cast", "backward", "backward pass", "user", "step")


class ProfilerEvent:
    """One recorded call or range.

    name; kind (one of KINDS); start_us, cpu_time_total (CPU microseconds from the
    profile's start); parent (the enclosing event or None) and children; device_type;
    input_dtypes / run_dtypes (every tensor argument as passed / as the op ran on it,
    after autocast and promotion); output_dtype; policy (the autocast policy text, "-"
    when autocast left the op alone); casts / cast_time (the autocast casts made for
    this op and their total time); cache_hits; input_shapes (with record_shapes=True);
    cuda_time_total (GPU microseconds between events recorded around the call, None
    without CUDA timing) and cuda_start_us.
    """
    __slots__ = ("name", "kind", "start_us", "end_us", "parent", "children", "thread", "device_type",
                 "input_dtypes", "run_dtypes", "output_dtype", "policy", "casts", "cast_time", "cache_hits",
                 "input_shapes", "cuda_time_total", "cuda_start_us", "cuda_events")

    def __init__(self, name, kind, start_us, parent):
        self.name, self.kind, self.start_us, self.end_us, self.parent = name, kind, start_us, None, parent
        self.children = []
        self.thread = threading.get_ident()
        self.device_type = None
        self.input_dtypes = self.run_dtypes = ()
        self.output_dtype = None
        self.policy = "-"
        self.casts = self.cache_hits = 0
        self.cast_time = 0.0
        self.input_shapes = None
        self.cuda_time_total = self.cuda_start_us = self.cuda_events = None
        if parent is not None:
            parent.children.append(self)

    @property
    def cpu_time_total(self) -> float:
        return self.end_us - self.start_us

    @property
    def self_cpu_time_total(self) -> float:
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.children)

    @property
    def self_cuda_time_total(self) -> float | None:
        if self.cuda_time_total is None:
            return None
        return self.cuda_time_total - sum(c.cuda_time_total or 0.0 for c in self.children)

    def trace_args(self) -> dict:
        """The event's details as chrome://tracing shows them when the event is clicked."""
        args = {"kind": self.kind}
        if self.device_type is not None:
            args["device"] = self.device_type
        if self.input_dtypes:
            args["input dtypes"] = dtypes_text(self.input_dtypes)
            args["ran in"] = dtypes_text(self.run_dtypes)
        if self.output_dtype is not None:
            args["output dtype"] = self.output_dtype.name
        if self.policy != "-":
            args["autocast"] = self.policy
            args["autocast casts"] = self.casts
            args["cast time us"] = round(self.cast_time, 3)
            args["cast cache hits"] = self.cache_hits
        if self.input_shapes is not None:
            args["input shapes"] = [list(s) for s in self.input_shapes]
        if self.cuda_time_total is not None:
            args["cuda time us"] = round(self.cuda_time_total, 3)
        return args

    def __repr__(self):
        return f"<ProfilerEvent {self.name!r} {self.kind} {time_text(self.cpu_time_total)}>"


# ---------------------------------------------------------------- averages
class EventAverage:
    """All events that share a key (their name; with group_by_input_shape also their input shapes).

    count; cpu_time_total / self_cpu_time_total and cpu_time (the average); the same for
    CUDA (None without CUDA timing); input_shapes (when grouped by them); and the autocast
    columns: the policies applied, the input and run dtype combinations seen (most common
    first), casts and cast_time_total (autocast casts made for these calls and their time),
    cache_hits.
    """

    def __init__(self, key, input_shapes=None):
        self.key, self.input_shapes = key, input_shapes
        self.count = 0
        self.cpu_time_total = self.self_cpu_time_total = self.cast_time_total = 0.0
        self.cuda_time_total = self.self_cuda_time_total = None
        self.casts = self.cache_hits = 0
        self._policies, self._inputs, self._runs = Counter(), Counter(), Counter()

    def add(self, ev: ProfilerEvent):
        self.count += 1
        self.cpu_time_total += ev.cpu_time_total
        self.self_cpu_time_total += ev.self_cpu_time_total
        if ev.cuda_time_total is not None:
            self.cuda_time_total = (self.cuda_time_total or 0.0) + ev.cuda_time_total
            self.self_cuda_time_total = (self.self_cuda_time_total or 0.0) + ev.self_cuda_time_total
        self.casts += ev.casts
        self.cast_time_total += ev.cast_time
        self.cache_hits += ev.cache_hits
        self._policies[ev.policy] += 1
        if ev.input_dtypes:
            self._inputs[dtypes_text(ev.input_dtypes)] += 1
            self._runs[dtypes_text(ev.run_dtypes)] += 1

    def merge(self, row: "EventAverage"):
        """Add another row's calls to this one (total_average sums the rows this way)."""
        self.count += row.count
        self.cpu_time_total += row.cpu_time_total
        self.self_cpu_time_total += row.self_cpu_time_total
        if row.cuda_time_total is not None:
            self.cuda_time_total = (self.cuda_time_total or 0.0) + row.cuda_time_total
            self.self_cuda_time_total = (self.self_cuda_time_total or 0.0) + row.self_cuda_time_total
        self.casts += row.casts
        self.cast_time_total += row.cast_time_total
        self.cache_hits += row.cache_hits
        for mine, theirs in ((self._policies, row._policies), (self._inputs, row._inputs), (self._runs, row._runs)):
            mine.update(theirs)

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total / self.count

    @property
    def cuda_time(self) -> float | None:
        return None if self.cuda_time_total is None else self.cuda_time_total / self.count

    @property
    def policies(self) -> list:
        return [p for p, _ in self._policies.most_common()]

    @property
    def input_dtypes(self) -> list:
        return [d for d, _ in self._inputs.most_common()]

    @property
    def run_dtypes(self) -> list:
        return [d for d, _ in self._runs.most_common()]

    def __repr__(self):
        return (f"<EventAverage {self.key!r} count={self.count} cpu_time_total={time_text(self.cpu_time_total)} "
                f"self={time_text(self.self_cpu_time_total)}>")


SORT_KEYS = ("cpu_time", "cuda_time", "cpu_time_total", "cuda_time_total", "self_cpu_time_total",
             "self_cuda_time_total", "count", "cast_time_total")


def _several(values, limit=2):
    """The most common values joined; "(+N more)" when there are more than ``limit``."""
    shown = " | ".join(values[:limit])
    return shown + (f" (+{len(values) - limit} more)" if len(values) > limit else "")


class KeyAverages(list):
    """EventAverage rows in first-seen order; ``table()`` renders them."""

    def total_average(self) -> EventAverage:
        """All rows summed into one, keyed "Total" (torch's total_average)."""
        total = EventAverage("Total")
        for row in self:
            total.merge(row)
        return total

    def table(self, sort_by: str | None = None, row_limit: int = 100, max_name_column_width: int = 55) -> str:
        """A table of the rows, sorted by ``sort_by`` (largest first; one of SORT_KEYS, None keeps the
        order the ops first ran in) and cut to ``row_limit`` rows (-1: all).

        Besides torch's columns (calls, self and total CPU time, CUDA when timed) it has the
        autocast columns: the policy autocast applied, the dtypes the op was given and the
        dtypes it ran in, how many casts autocast made for it and how long they took.
        """
        if sort_by is not None and sort_by not in SORT_KEYS:
            raise ValueError(f"table: sort_by must be one of {', '.join(SORT_KEYS)} or None, got {sort_by!r}")
        if isinstance(row_limit, bool) or not isinstance(row_limit, int) or row_limit < -1:
            raise ValueError(f"table: row_limit must be an int >= 0 (or -1 for every row), got {row_limit!r}")
        rows = list(self)
        if sort_by is not None:
            rows.sort(key=lambda r: getattr(r, sort_by) or 0.0, reverse=True)
        if row_limit != -1:
            rows = rows[:row_limit]
        cuda = any(r.cuda_time_total is not None for r in self)
        self_total = sum(r.self_cpu_time_total for r in self) or 1.0

        def cuda_cell(value):
            return "-" if value is None else time_text(value)
        columns = [  # (header, right-aligned, cell)
            ("Name", False, lambda r: r.key if len(r.key) <= max_name_column_width
             else r.key[:max_name_column_width - 3] + "..."),
            ("Self CPU %", True, lambda r: f"{100 * r.self_cpu_time_total / self_total:.2f}%"),
            ("Self CPU", True, lambda r: time_text(r.self_cpu_time_total)),
            ("CPU total", True, lambda r: time_text(r.cpu_time_total)),
            ("CPU time avg", True, lambda r: time_text(r.cpu_time))]
        if cuda:
            columns += [("Self CUDA", True, lambda r: cuda_cell(r.self_cuda_time_total)),
                        ("CUDA total", True, lambda r: cuda_cell(r.cuda_time_total)),
                        ("CUDA time avg", True, lambda r: cuda_cell(r.cuda_time))]
        columns.append(("# of Calls", True, lambda r: str(r.count)))
        if any(r.input_shapes is not None for r in self):
            columns.append(("Input Shapes", False, lambda r: "" if r.input_shapes is None else str(r.input_shapes)))
        columns += [("Autocast", False, lambda r: _several(r.policies)),
                    ("Input dtypes", False, lambda r: _several(r.input_dtypes)),
                    ("Ran in", False, lambda r: _several(r.run_dtypes)),
                    ("Casts", True, lambda r: str(r.casts) if r.casts else ""),
                    ("Cast time", True, lambda r: time_text(r.cast_time_total) if r.casts else "")]
        head = [c[0] for c in columns]
        body = [[cell(r) for _, _, cell in columns] for r in rows]
        right = {k for k, c in enumerate(columns) if c[1]}
        cast_time = sum(r.cast_time_total for r in self)
        casts = sum(r.casts for r in self)
        foot = [f"Self CPU time total: {time_text(sum(r.self_cpu_time_total for r in self))}"]
        if cuda:
            foot.append(f"Self CUDA time total: {time_text(sum(r.self_cuda_time_total or 0.0 for r in self))}")
        foot.append(f"Autocast: {plural(casts, 'cast')} took {time_text(cast_time)} "
                    f"({100 * cast_time / self_total:.1f}% of the self CPU time); dtypes: {DTYPE_LEGEND}")
        return text_table(head, body, right=right) + "\n" + "\n".join(foot)

    def __str__(self):
        return self.table()


class EventList(list):
    """The events of one profile, in the order they started."""

    def key_averages(self, group_by_input_shape: bool = False) -> KeyAverages:
        """One EventAverage per event name (and input shapes, with group_by_input_shape=True and
        record_shapes=True), in the order the names first appeared."""
        groups: dict = {}
        out = KeyAverages()
        for ev in self:
            key = (ev.name, ev.input_shapes if group_by_input_shape else None)
            row = groups.get(key)
            if row is None:
                row = groups[key] = EventAverage(ev.name, key[1])
                out.append(row)
            row.add(ev)
        return out

    def table(self, sort_by: str | None = None, row_limit: int = 100) -> str:
        return self.key_averages().table(sort_by=sort_by, row_limit=row_limit)

    @property
    def self_cpu_time_total(self) -> float:
        """The self CPU time of every event, summed (microseconds), as torch's EventList."""
        return sum(ev.self_cpu_time_total for ev in self)

    def total_average(self) -> EventAverage:
        """Every event summed into one row, keyed "Total"."""
        return self.key_averages().total_average()

    def export_chrome_trace(self, path) -> None:
        """Write the events as a Chrome trace (JSON: chrome://tracing, https://ui.perfetto.dev).

        One complete ("X") event per call and range, nested by time, with its dtypes,
        autocast policy, casts and shapes as args; GPU timings, when recorded, on a track
        of their own per device.
        """
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"export_chrome_trace: path must be a str or os.PathLike, got {type(path).__name__}")
        pid = os.getpid()
        threads = {}
        trace = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": "mixprec (CPU)"}}]
        gpu_tracks = {}
        for ev in self:
            tid = threads.setdefault(ev.thread, len(threads) + 1)
            trace.append({"name": ev.name, "cat": ev.kind, "ph": "X", "ts": round(ev.start_us, 3),
                          "dur": round(ev.cpu_time_total, 3), "pid": pid, "tid": tid, "args": ev.trace_args()})
            if ev.cuda_time_total is not None and ev.cuda_start_us is not None:
                device = ev.cuda_events[2]
                gpid = gpu_tracks.setdefault(device, pid + 1 + len(gpu_tracks))
                trace.append({"name": ev.name, "cat": "cuda " + ev.kind, "ph": "X",
                              "ts": round(ev.cuda_start_us, 3), "dur": round(ev.cuda_time_total, 3),
                              "pid": gpid, "tid": 1, "args": {"kind": ev.kind}})
        for thread, tid in threads.items():
            trace.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                          "args": {"name": f"thread {thread}"}})
        for device, gpid in gpu_tracks.items():
            trace.append({"name": "process_name", "ph": "M", "pid": gpid, "tid": 0,
                          "args": {"name": f"cuda:{device} (event timings)"}})
        with open(path, "w") as f:
            json.dump({"traceEvents": trace, "displayTimeUnit": "ms"}, f)
