"""mp.amp.trace(): record every op dispatched in this thread and what autocast did to it.

    with mp.amp.trace() as t, mp.autocast("cpu"):
        loss = model(x)
    print(t)          # a table: op, policy, input dtypes, dtypes it ran in, output dtype, cache hits

The trace is a dispatch observer (mixprec.observers.observe): it sees every
op call when it returns, with the autocast decision applied to it and the call
it ran inside (a composite, or the op whose inputs autocast was casting). A
backward() inside the trace shows as a "backward pass" row with one
"<op> backward" row per graph node, the ops each ran indented under it.
Records are kept in the order ops finished; the table shows them in call order,
with the casts autocast made for an op and the inner ops of a composite
indented under it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._text import DTYPE_LEGEND, dtypes_text, plural, policy_text, rule_text, short, text_table
from .. import observers as _observers
from ..ops import dispatch as _dispatch

@dataclass(frozen=True)
class TraceRecord:
    """One dispatched op.

    policy: the rule autocast applied (a CastPolicy, a fixed dtype) or None when
    autocast did not touch the op; autocast_dtype: the region's lower dtype when
    it did. input_dtypes: every tensor argument as passed; run_dtypes: the same
    tensors as the op ran on them (after autocast and ordinary promotion);
    cast_for: the op this record is an autocast cast for (None otherwise);
    depth: nesting below the traced code (casts and a composite's inner ops are
    one level below their op); kind: "op", "backward" (a graph node's backward,
    named "<op> backward") or "backward pass".
    """
    name: str
    device_type: str
    policy: object
    autocast_dtype: np.dtype | None
    input_dtypes: tuple
    run_dtypes: tuple
    output_dtype: np.dtype | None
    cache_hits: int
    cast_for: str | None
    depth: int
    kind: str = "op"

    @property
    def policy_name(self) -> str:
        return rule_text(self.policy)


def _tensor_dtypes(args):
    return tuple(t.dtype for t in _dispatch.tensors_in(args))


class trace:
    """Context manager recording every op this thread dispatches inside it (see the module docstring).

    ``records`` holds TraceRecord objects in the order ops finished; ``table()``
    (and ``str()``) renders them in call order. ``casts`` counts the casts
    autocast dispatched, ``cache_hits`` the casts it served from its cache.
    """

    sees_backward = True  # (backward passes and graph nodes are calls it records too)

    def __init__(self):
        self.records: list[TraceRecord] = []
        self._observing = None
        self._base_depth = 0

    def __enter__(self):
        self._observing = _observers.observe(self)
        self._observing.__enter__()
        current = _observers.current_call()
        self._base_depth = 0 if current is None else current.depth + 1
        return self

    def __exit__(self, *exc):
        self._observing.__exit__(*exc)
        return False

    def enter(self, call):
        pass

    def exit(self, call):
        if call.error is not None:
            return  # the trace holds calls that finished
        decision, parent, out = call.autocast, call.parent, call.out
        out_dtype = getattr(out, "dtype", None)
        if out_dtype is None and isinstance(out, (tuple, list)) and out:
            out_dtype = getattr(out[0], "dtype", None)
        self.records.append(TraceRecord(
            name=call.name, device_type=call.device.type,
            policy=decision.rule if decision else None,
            autocast_dtype=decision.lower if decision else None,
            input_dtypes=_tensor_dtypes(call.args), run_dtypes=_tensor_dtypes(call.run_args or call.args),
            output_dtype=out_dtype, cache_hits=decision.cache_hits if decision else 0,
            cast_for=parent.op.name if parent is not None and parent.casting else None,
            depth=call.depth - self._base_depth, kind=call.kind))

    # ---- summaries ----
    @property
    def casts(self) -> int:
        """Casts autocast dispatched (cache hits not included)."""
        return sum(r.cast_for is not None for r in self.records)

    @property
    def cache_hits(self) -> int:
        return sum(r.cache_hits for r in self.records)

    def __len__(self):
        return len(self.records)

    def __iter__(self):
        return iter(self.records)

    def in_call_order(self) -> list[TraceRecord]:
        """Records with each op before the casts and inner ops it ran (which finished before it)."""
        roots: list = []  # (record, children) trees, in finishing order
        for r in self.records:
            children = []
            while roots and roots[-1][0].depth > r.depth:
                children.insert(0, roots.pop())
            roots.append((r, children))
        ordered = []

        def walk(node):
            ordered.append(node[0])
            for child in node[1]:
                walk(child)
        for node in roots:
            walk(node)
        return ordered

    def table(self, inner_ops=True) -> str:
        """A readable table, one line per op in call order.

        inner_ops=False leaves out what ran inside composite ops (a loss's
        building blocks) and inside each node's backward, keeping each op, the
        casts autocast made for it and the nodes of a backward pass.
        """
        head = ("#", "op", "autocast policy", "inputs", "ran in", "output", "cache")
        rows = []
        shown = [r for r in self.in_call_order()
                 if inner_ops or r.depth <= 0 or (r.depth == 1 and (r.cast_for is not None or r.kind == "backward"))]
        for i, r in enumerate(shown, 1):
            name = "  " * max(r.depth, 0) + r.name + (f" (cast for {r.cast_for})" if r.cast_for else "")
            rows.append((str(i), name, policy_text(r.policy, r.autocast_dtype),
                         dtypes_text(r.input_dtypes), dtypes_text(r.run_dtypes),
                         short(r.output_dtype), f"{r.cache_hits} hit" + "s" * (r.cache_hits != 1)
                         if r.cache_hits else ""))
        return (text_table(head, rows) + f"\n{plural(len(self.records), 'op')}, "
                f"{plural(self.casts, 'autocast cast')}, {self.cache_hits} served from the cache ({DTYPE_LEGEND})")

    def __str__(self):
        return self.table()

    def __repr__(self):
        return f"<mp.amp.trace: {len(self.records)} ops>"
