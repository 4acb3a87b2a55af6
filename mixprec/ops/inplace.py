"""In-place ops and views under autograd (torch's rules).

An in-place op ``t.mul_(c)`` is the out-of-place op computed from ``t``, written
into ``t``'s memory (its version counter goes up), after which ``t`` *is* that
result for autograd: its grad_fn becomes the op's node ("rebase"). So

- a non-leaf can be changed in place: ``b = a * 2; b.mul_(3)`` differentiates as
  ``b = (a * 2) * 3``. Gradients already recorded keep flowing to the old value
  (each edge was fixed when its op ran).
- if the op itself needs ``t``'s old value for backward (``mul_`` by a tensor that
  requires grad, ``clamp_``, ``sin_``...), that value is cloned before it is
  overwritten (the clone is what gets saved), as torch does.
- an op that saved ``t`` *earlier* fails at backward with the "modified by an
  in-place operation" error (its saved version no longer matches).
- a leaf that requires grad cannot be changed in place while grad mode is on
  (parameter updates go under ``mp.no_grad()``).
- outside grad mode (and forward mode) the write is all that happens.

**Views.** An op registered ``view=True`` whose output shares its input's memory
records how to recompute the view from its root *base* (:class:`mixprec.autograd.graph.ViewInfo`).
Writing into a view in place rebases the base too: the base becomes
``_copy_slices(old base, new view value)`` (gradient: the view's region of the
base's gradient goes to the new value, the rest to the old base), and the view
becomes the view of that new base. A view whose base was changed in place since
(by this or another view) recomputes its grad_fn from the base when it is next
used, so it never differentiates a stale value. Tangents (forward mode) follow
the same rules. Writing into a view of a leaf that requires grad, or, with grad
mode on, into a view made under no_grad of a base that requires grad, is an
error (torch's rules). Not copied from torch: views made outside inference mode
of an inference tensor are not inference tensors themselves.
"""
from __future__ import annotations

import numpy as np

from .. import backend as _be
from ..backend import array_module, devices, float8 as _f8
from .. import dtypes as _dt
from .._state import modes
from ..tensor import Tensor
from ..autograd import grad_mode, graph
from .registry import is_operand, register
from .elementwise import where
from .shape import broadcasts_to, index_put


# ---------------------------------------------------------------- the two ops in-place writes record
@register("_overwrite", promote=(1,), linear=True, doc="The value an in-place write leaves (copy_, fill_, "
          "zero_): ``value`` broadcast to ``input``'s shape and cast to its dtype; input's gradient is zero.")
def _overwrite(ctx, input, value):
    xp = array_module(input)
    v = xp.asarray(value)
    if v.dtype != input.dtype:
        v = v.astype(input.dtype)
    try:
        return xp.broadcast_to(v, input.shape)
    except ValueError:
        raise RuntimeError(f"a value of shape {tuple(v.shape)} cannot be written into a tensor of shape "
                           f"{tuple(input.shape)} (it must broadcast to that shape)") from None


@_overwrite.grad
def _(ctx, g):
    # the old value gets a zero gradient (not None: a leaf overwritten this way still receives one, as in torch)
    return Tensor._wrap(array_module(g._array).zeros_like(g._array)), g


@register("_copy_slices", promote=(0, 1), linear=True,
          doc="``base`` with the region a view of it covers (``replay(base)``) replaced by ``value``.")
def _copy_slices(ctx, base, value, replay):
    xp = array_module(base)
    out = base.copy(order="K")
    region = _region(out, replay)
    try:
        region[...] = value
    except ValueError:
        raise RuntimeError(f"_copy_slices: a value of shape {tuple(value.shape)} cannot be written into a view of "
                           f"shape {tuple(region.shape)} (it must broadcast to that shape)") from None
    ctx.region = xp.zeros_like(base, dtype=np.bool_)  # same layout as base, so replay views it the same way
    _region(ctx.region, replay)[...] = True
    return out


@_copy_slices.grad
def _(ctx, g):
    replay = ctx.inputs[2]
    return where(Tensor._wrap(ctx.region), 0.0, g), replay(g), None


def _region(array, replay):
    """The view ``replay`` makes of ``array`` (an error when it would be a copy instead)."""
    region = replay(Tensor._wrap(array))._array
    if _be.owner(region) is not _be.owner(array):
        raise RuntimeError("in-place write into a view: the view's region of its base cannot be addressed as a "
                           "view of a copy of the base (unusual memory layout); clone() the view first")
    return region


# ---------------------------------------------------------------- the in-place write
def apply(t, what, compute, direct=None, others=None):
    """``t`` <- ``compute(t)`` in ``t``'s memory, with autograd's bookkeeping; returns ``t``.

    ``compute(source)`` builds the new value out of place from ``source`` (``t``
    itself) with ordinary ops, so the graph records it; see the module docstring.
    ``others`` lists the other tensors compute reads (None: unknown). When no
    tensor involved requires grad (with grad mode on) or carries a tangent, the
    value is just written: by ``direct(t)`` when given (e.g. ``t[key] = v``
    without building a copy), else from compute.
    """
    _check_writable(t, what)
    grad_on = grad_mode.is_grad_enabled()
    view = t._view
    if grad_on:
        _check_grad_rules(t, view, what)
    base = view.base if view is not None else None
    if not _autograd_involved(t, base, others, grad_on, modes().dual_level is not None):
        if direct is not None:
            direct(t)
        else:
            t._write(what, compute(t))
        return t
    with graph.overwriting(t):
        new = compute(t)
    new = _fit(t, new, what)
    track = (grad_on and (new._requires_grad or t._requires_grad or (base is not None and base._requires_grad))) \
        or new._fw is not None or t._fw is not None or (base is not None and base._fw is not None)
    t._write(what, new._array, any_cast=True)
    if not track:
        return t
    if view is None:
        _rebase(t, new)
        return t
    with grad_mode.set_grad_enabled(grad_on):
        base_new = _copy_slices(base, new, view.replay)
    _rebase(base, base_new)
    graph.refresh_view(t, force=True)
    return t


def _autograd_involved(t, base, others, grad_on, dual_level):
    if others is None:
        return grad_on or dual_level
    tensors = [t] + ([base] if base is not None else []) + [o for o in others if isinstance(o, Tensor)]
    return any((grad_on and x._requires_grad) or (dual_level and x._fw is not None) for x in tensors)


def _rebase(t, new):
    """``t`` (already holding new's values) takes over new's place in both modes of autograd."""
    old_node, old_nr = t._grad_fn, t.output_nr
    node = new._grad_fn
    if node is not None:
        graph.take_over_output(t, node, new.output_nr)
        if t._retains_grad:  # retain_grad follows the tensor to its new value, as in torch
            if old_node is not None and old_node._retained:
                old_node._retained.pop(old_nr, None)
            node._retain(new.output_nr, t)
    elif not new._requires_grad:
        graph.make_leaf(t, t._requires_grad and t._grad_fn is None)
    graph.set_tangent(t, *(new._fw or (None, None)))


def _check_writable(t, what):
    if t._inference:
        if not grad_mode.is_inference_mode_enabled():
            raise RuntimeError(f"{what}: an in-place update to an inference tensor outside inference mode is not "
                               "allowed (it was made under mp.inference_mode()); clone() it first")
    if not getattr(getattr(t._array, "flags", None), "writeable", True):
        raise RuntimeError(f"{what}: the tensor's memory is read-only; clone() the tensor before the in-place "
                           "operation")
    t._check_overlap(what)


def _check_grad_rules(t, view, what):
    if view is not None:
        base = view.base
        if base._requires_grad and base._grad_fn is None:
            raise RuntimeError(f"{what}: a view of a leaf tensor that requires grad is being used in an in-place "
                               "operation; use the out-of-place op, or do it under mp.no_grad()")
        if view.multi_output and base._requires_grad:
            raise RuntimeError(f"{what}: this view is one of several that one call made (unbind, split, chunk...), "
                               "and such views cannot be modified in place while autograd tracks them; use the "
                               "out-of-place op, or index the tensor instead")
        if base._requires_grad and what in ("fill_", "zero_"):
            t._check_overlap("a write into an expand() view of a tensor autograd tracks")  # (torch fails in backward)
        if view.made_without_grad and base._requires_grad:
            raise RuntimeError(f"{what}: a view was made under no_grad and is being modified in place with grad "
                               "mode enabled; this is ambiguous, so it is forbidden: make the view and change it "
                               "both inside the no_grad block, or both outside")
        graph.refresh_view(t)
    if t._requires_grad and t._grad_fn is None:
        raise RuntimeError(f"{what}: a leaf tensor that requires grad is being used in an in-place operation; "
                           "wrap it in mp.no_grad() (parameter updates) or use the out-of-place op")


def _fit(t, new, what):
    """``new`` as a Tensor of t's device, dtype and shape (differentiably)."""
    if not isinstance(new, Tensor):
        new = Tensor._wrap(_be.xp_of(t.device).asarray(new))
    if new.device != t.device:
        new = new.to(device=t.device)
    if new.dtype != t.dtype:
        t._check_cast(new.dtype, what)
        new = new.to(t.dtype)
    if new.shape != t.shape:
        if not broadcasts_to(new.shape, t.shape):
            raise RuntimeError(f"{what}: a value of shape {tuple(new.shape)} cannot be written into a tensor of "
                               f"shape {t.shape} (it must broadcast to that shape)")
        new = new.expand(t.shape)
    return new


# ---------------------------------------------------------------- Tensor's in-place methods
_FROM_OUT_OF_PLACE = ("add", "sub", "mul", "div", "true_divide", "pow", "clamp", "clip", "neg", "abs", "sign", "exp",
                      "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal", "sin", "cos",
                      "tan", "sinh", "cosh", "asin", "acos", "atan2", "tanh", "sigmoid", "relu", "erf", "erfinv",
                      "addcmul", "addcdiv", "floor_divide", "remainder", "fmod", "bitwise_and", "bitwise_or",
                      "bitwise_xor", "bitwise_not", "bitwise_left_shift", "bitwise_right_shift", "logical_and",
                      "logical_or", "logical_xor", "logical_not")
# (no __imatmul__, as torch: ``a @= b`` rebinds a to the new tensor a @ b)
_OPERATORS = {"__iadd__": "add", "__isub__": "sub", "__imul__": "mul", "__itruediv__": "div", "__ipow__": "pow",
              "__ifloordiv__": "floor_divide", "__imod__": "remainder", "__iand__": "bitwise_and",
              "__ior__": "bitwise_or", "__ixor__": "bitwise_xor", "__ilshift__": "bitwise_left_shift",
              "__irshift__": "bitwise_right_shift"}


def _method(name, out_of_place):
    def method(self, *args, **kwargs):
        others = [a for a in (*args, *kwargs.values()) if isinstance(a, Tensor)]
        return apply(self, name, lambda src: getattr(src, out_of_place)(*args, **kwargs), others=others)
    method.__name__ = name
    method.__doc__ = f"In-place {out_of_place}: self = self.{out_of_place}(...) in self's memory (autograd follows)."
    return method


def _operator(name, out_of_place):
    """``a op= b``: refuses a result type a cannot hold before computing, as torch; a non-operand (a list)
    returns NotImplemented, so Python tries ``a op b`` and then raises its TypeError."""
    inplace = _method(name, out_of_place)

    def method(self, other):
        if not is_operand(other):
            return NotImplemented
        self._check_cast(_dt.result_type(self, other), name)
        return inplace(self, other)
    method.__name__ = name
    method.__doc__ = inplace.__doc__
    return method


def _copy_(self, src):
    """Copy ``src`` into self: broadcast to this shape, cast to this dtype, moved to this device."""
    def compute(t):
        value = src.to(device=t.device) if isinstance(src, Tensor) and src.device != t.device else src
        return _overwrite(t, value)
    return apply(self, "copy_", compute, lambda t: t._write("copy_", src, any_cast=True), others=[src])


def _fill_(self, value):
    """Set every element to ``value`` (a number or a one-element tensor)."""
    _dt.check_fits(value, self.dtype, "fill_")
    return apply(self, "fill_", lambda t: _overwrite(t, value), lambda t: t._write("fill_", value, any_cast=True),
                 others=[value])


def _zero_(self):
    return apply(self, "zero_", lambda t: _overwrite(t, 0), lambda t: t._write("zero_", 0, any_cast=True), others=[])


def _setitem(self, key, value):
    """``t[key] = value`` in place: index_put under autograd, a direct write otherwise."""
    xp = _be.xp_of(self.device)
    if isinstance(key, list):
        key = xp.asarray(_index_key(key))

    def compute(t):
        v = value
        if isinstance(v, Tensor):
            v = v.to(device=t.device) if v.device != t.device else v
            v = v.to(t.dtype) if v.dtype != t.dtype else v
        elif isinstance(v, (int, float, np.generic)):
            v = _number(t, v)
        else:
            v = Tensor._wrap(xp.asarray(v).astype(t.dtype, copy=False))
        try:
            return index_put(t, key, v)
        except ValueError:
            raise RuntimeError(f"__setitem__: a value of shape {v.shape} cannot be written into the indexed part "
                               f"of a tensor of shape {t.shape}") from None

    def direct(t):
        v = value
        if isinstance(v, Tensor):
            v = devices.to_device(v._array, t.device)
        if isinstance(v, (int, float, np.generic)):
            v = _number(t, v)
        else:
            v = xp.asarray(v).astype(t.dtype, copy=False)
        try:
            t._array[_index_key(key)] = v
        except ValueError:
            raise RuntimeError(f"__setitem__: a value of shape {tuple(np.shape(v))} cannot be written into the "
                               f"indexed part of a tensor of shape {t.shape}") from None
        t._bump_version()
    keys = key if isinstance(key, tuple) else (key,)
    apply(self, "__setitem__", compute, direct, others=[value, *keys])


def _number(t, v):
    """A number written into t, as t's dtype holds it: one an integer dtype cannot hold is refused, as torch (a
    floating one rounds, to inf beyond its range)."""
    if t.dtype.kind not in "iu":
        return t.dtype.type(v) if t.dtype not in _dt.IS_FLOAT8 else _f8.fill_value(v, t.dtype)
    if type(v) is int and not -2 ** 63 <= v < 2 ** 63:
        raise ValueError(f"__setitem__: the Python int {v} does not fit in int64")
    _dt.check_fits(v, t.dtype, "__setitem__")
    return _dt.as_integer(v, t.dtype) if type(v) is int else t.dtype.type(v)


def _index_key(key):
    """Replace Tensors inside an index by their arrays."""
    if isinstance(key, Tensor):
        return key._array
    if isinstance(key, (tuple, list)):
        return type(key)(k._array if isinstance(k, Tensor) else k for k in key)
    return key


def _bind_methods():
    for name in _FROM_OUT_OF_PLACE:
        if hasattr(Tensor, name):
            setattr(Tensor, name + "_", _method(name + "_", name))
    for name, out_of_place in _OPERATORS.items():
        setattr(Tensor, name, _operator(name, out_of_place))
    Tensor.copy_, Tensor.fill_, Tensor.zero_, Tensor.__setitem__ = _copy_, _fill_, _zero_, _setitem


_bind_methods()
