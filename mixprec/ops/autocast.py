"""Autocast's step of dispatch: the dtype each input of an op is cast to inside an autocast region.

The rule is torch.amp's. For an op called on tensors of device type D while a
region for D with lower dtype L is active (mp.autocast(D, dtype=L)), the op's
policy on D decides — a scoped override or a register_autocast rule first, else
the op's own table entry:

    lower_precision_fp   floating inputs -> L
    fp32                 floating inputs -> float32
    promote              floating inputs -> L if every one is L, else float32
    banned               refuse to run
    None                 inputs untouched
    (a dtype)            floating inputs -> that dtype (register_autocast/override)

float64 and non-floating inputs are never cast. The casts are ordinary
differentiable ops (Tensor.to), so backward runs every op in the dtype its
forward ran in and each leaf's gradient arrives in the leaf's own dtype.

This module owns all of autocast's state, per thread: the enabled regions, the
weight-cast cache and the stack of scoped overrides. ``mp.autocast``
(mixprec/amp/autocast_mode.py) is the switch users flip; it calls
:func:`enter_region` and :func:`exit_region`, and ``mp.amp.override`` and
``clear_autocast_cache`` the writers below them.
"""
from __future__ import annotations

import enum
from typing import NamedTuple

import numpy as np

from .. import _text
from .. import dtypes as _dt
from .._state import PER_THREAD, modes
from ..autograd import grad_mode as _gm

DEVICE_TYPES = ("cuda", "cpu")
DEFAULT_DTYPES = {"cuda": _dt.float16, "cpu": _dt.bfloat16}
LOWER_DTYPES = (_dt.float16, _dt.bfloat16)
ELIGIBLE = frozenset((_dt.float16, _dt.bfloat16, _dt.float32))  # what autocast may cast; float64 never


class CastPolicy(enum.Enum):
    """What autocast does with an op's floating inputs on a device type."""
    LOWER_PRECISION_FP = "lower_precision_fp"  # cast to the region's float16/bfloat16
    FP32 = "fp32"                              # cast to float32
    PROMOTE = "promote"                        # cast all to the widest floating input
    BANNED = "banned"                          # refuse to run inside an enabled region


_POLICY_NAMES = {p.value: p for p in CastPolicy} | {"none": None, None: None}


def as_policy(p) -> CastPolicy | None:
    """A CastPolicy from itself or its name ("lower_precision_fp", "fp32", "promote", "banned"); None/"none" is None."""
    if isinstance(p, CastPolicy):
        return p
    try:
        return _POLICY_NAMES[p]
    except (KeyError, TypeError):
        raise ValueError(f"unknown cast policy {p!r}; expected one of "
                         "'lower_precision_fp', 'fp32', 'promote', 'banned' or None") from None


# ---------------------------------------------------------------- state (per thread)
# This thread's autocast bookkeeping is PER_THREAD.autocast (mixprec/_state.py: the cast cache, the scoped overrides,
# what each entered region replaced); which regions are enabled, the state every op call reads, is its
# modes().autocast_regions. This module is the only writer of both.
REGISTERED: dict = {}      # (op, device_type) -> rule, from mp.amp.register_autocast (shared by all threads)


def _state():
    return PER_THREAD.autocast


def enter_region(device_type, dtype, enabled, cache_enabled, owner):
    """Enter owner's region: ``device_type`` ops run with ``dtype`` as the lower type (or none, enabled=False)."""
    s, m = _state(), modes()
    if s.entered is None:
        s.entered = []
    s.entered.append((m.autocast_regions, s.cache_enabled, enabled, owner))
    regions = dict(m.autocast_regions or {})
    if enabled:
        regions[device_type] = dtype
        s.enabled_depth += 1
    else:
        regions.pop(device_type, None)
    m.autocast_regions = regions or None
    s.cache_enabled = cache_enabled


def active_regions():
    """{device_type: lower dtype} of this thread's enabled regions, or None when autocast is off everywhere."""
    return modes().autocast_regions


def exit_region(owner):
    """Leave the innermost region, ``owner``'s, restoring exactly what it replaced."""
    s = _state()
    if not s.entered or s.entered[-1][3] is not owner:
        raise RuntimeError(f"{owner!r}.__exit__: this thread's innermost autocast region is not this one (an "
                           "__exit__ without its __enter__, or regions left in another order than entered)")
    modes().autocast_regions, s.cache_enabled, enabled, _ = s.entered.pop()
    if enabled:
        s.enabled_depth -= 1
        if s.enabled_depth == 0:
            s.cache = None  # the outermost enabled region is over


def set_switches(device_type=None, enabled=None, dtype=None, cache=None):
    """torch's set_autocast_enabled/_dtype/_cache_enabled: this thread's state, changed outside any region."""
    s, m = _state(), modes()
    s.dtypes = s.dtypes if dtype is None else {**s.dtypes, device_type: dtype}
    s.cache_enabled = s.cache_enabled if cache is None else cache
    regions = dict(m.autocast_regions or {})
    if enabled is not None and not enabled:
        regions.pop(device_type, None)
    elif enabled or (dtype is not None and device_type in regions):
        current = regions.get(device_type, set_dtype(device_type))
        regions[device_type] = current if dtype is None else dtype
    m.autocast_regions = regions or None


def set_dtype(device_type):
    """The lower dtype set_switches gave ``device_type`` in this thread, else its default."""
    return _state().dtypes.get(device_type, DEFAULT_DTYPES[device_type])


def cache_enabled() -> bool:
    """Whether the innermost region (in this thread) caches weight casts."""
    return _state().cache_enabled


def clear_cache():
    """Drop this thread's cached weight casts."""
    _state().cache = None


def push_overrides(layer):
    """Make ``layer`` ({(op, device_type): rule}) this thread's innermost scoped override (mp.amp.override)."""
    s = _state()
    s.overrides = s.overrides + (layer,)


def pop_overrides(layer):
    """Leave the innermost scoped override, ``layer``."""
    s = _state()
    if not s.overrides or s.overrides[-1] is not layer:
        raise RuntimeError("override.__exit__: this thread's innermost mp.amp.override is not this one (an "
                           "__exit__ without its __enter__, or overrides left in another order than entered)")
    s.overrides = s.overrides[:-1]


class suspended:
    """No autocast inside (backward, and the inner ops of a composite whose own policy was applied)."""

    def __enter__(self):
        m = modes()
        self.regions, m.autocast_regions = m.autocast_regions, None

    def __exit__(self, *exc):
        modes().autocast_regions = self.regions
        return False


# ---------------------------------------------------------------- the rule
def rule_for(op, device_type):
    """The op's rule on device_type: innermost override, then register_autocast, then its table policy."""
    return rule_and_source(op, device_type)[0]


def rule_and_source(op, device_type):
    """(rule, where it came from): "mp.amp.override", "mp.amp.register_autocast" or "the autocast op table"."""
    key = (op, device_type)
    for layer in reversed(_state().overrides):
        if key in layer:
            return layer[key], "mp.amp.override"
    if key in REGISTERED:
        return REGISTERED[key], "mp.amp.register_autocast"
    return op.policy[device_type], "the autocast op table"


def target_dtypes(op_name, device_type, rule, lower, dtypes):
    """The dtype each input is cast to under ``rule`` in a region whose lower dtype is ``lower`` (pure)."""
    if rule is None:
        return tuple(dtypes)
    if rule is CastPolicy.BANNED:
        raise RuntimeError(_text.BANNED_HINTS.get(op_name, f"{op_name} is banned inside an enabled autocast "
                                                           f"region on {device_type}; run it with autocast disabled"))
    if rule is CastPolicy.PROMOTE:
        floating = [d for d in dtypes if d in ELIGIBLE]
        target = lower if floating and all(d == lower for d in floating) else _dt.float32
    elif rule is CastPolicy.FP32:
        target = _dt.float32
    elif rule is CastPolicy.LOWER_PRECISION_FP:
        target = lower
    else:  # a fixed dtype from register_autocast/override
        target = rule
    return tuple(target if d in ELIGIBLE else d for d in dtypes)


class Decision(NamedTuple):
    """What autocast did to one op call (observers such as mp.amp.trace show it)."""
    rule: object           # the CastPolicy or fixed dtype applied
    lower: np.dtype        # the region's lower dtype
    dtypes: tuple          # the dtype each data input was cast to
    cache_hits: int        # casts served from the weight-cast cache
    source: str = "the autocast op table"  # where the rule came from (rule_and_source)


def cast_inputs(op, args, data, device_type):
    """Apply ``op``'s rule to its data inputs. ``data`` lists them as (arg index, list index or None, tensor).

    Returns (args, Decision), or (args, None) when the op has no rule on ``device_type``.
    """
    rule, source = rule_and_source(op, device_type)
    if rule is None:
        return args, None
    lower = modes().autocast_regions[device_type]
    targets = target_dtypes(op.name, device_type, rule, lower, [t.dtype for _, _, t in data])
    new, hits = list(args), 0
    for (i, j, t), dtype in zip(data, targets):
        if t.dtype != dtype:
            cast, hit = _cast(t, dtype, lower)
            hits += hit
            if j is None:
                new[i] = cast
            else:
                new[i] = list(new[i]) if new[i] is args[i] else new[i]
                new[i][j] = cast
    return tuple(new), Decision(rule, lower, targets, hits, source)


def _cast(t, dtype, lower):
    """(t.to(dtype), served from the cache?) — float32 leaf weights going to the lower dtype are cached.

    The cache key includes the weight's version and the cached cast must still be
    differentiable, so an in-place update of the weight (an optimizer step) or a
    graph already freed by backward always gets a fresh cast.
    """
    s = _state()
    if not (s.cache_enabled and dtype == lower and t.dtype == _dt.float32 and t.requires_grad
            and t.grad_fn is None and _gm.is_grad_enabled()):
        return t.to(dtype), False
    if s.cache is None:
        s.cache = {}
    key = (id(t), dtype)
    hit = s.cache.get(key)
    if hit is not None and hit[0] is t and hit[1] == t._version and not hit[2].grad_fn.freed:
        return hit[2], True
    cast = t.to(dtype)
    s.cache[key] = (t, t._version, cast)
    return cast, False
