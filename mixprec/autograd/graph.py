"""The backward graph (torch.autograd.graph): nodes, edges, saved tensors, and every write of a tensor's history.

**The one front door.** Every differentiable call -- a registered op through
dispatch, a custom ``Function``, an in-place write, a view -- ends in
:func:`record`, after its forward ran. ``record`` builds the call's
:class:`OpNode` once, from

- the op (which says how its backward is called and what it saves),
- the call's **next edges**: for each input slot, the ``(node, output_nr)`` the
  input's gradient goes to -- the input's own grad_fn, or for a leaf its
  :class:`AccumulateGrad` node -- or None. They are fixed now, so a later
  in-place change of an input does not re-route gradients already recorded;
- what backward **saves**: only the inputs and outputs the op declares, each a
  :class:`SavedTensor` that remembers the tensor's version (an in-place change
  is caught when backward reads it) and goes through the active
  :class:`saved_tensors_hooks`;
- the ``ctx`` forward wrote its notes on (``ctx.dim = ...``), a plain object.

and makes it the grad_fn of the call's differentiable outputs. The node never
changes afterwards, except that backward releases what it saved (and a saved
output follows its tensor when an in-place write moves the output into it).

**History.** A tensor's autograd identity -- ``_grad_fn``, ``_requires_grad``,
``output_nr``, its tangent ``_fw`` and its view relation ``_view`` -- is written
only here: :func:`set_history` (and :func:`take_over_output`), :func:`make_leaf`, :func:`set_tangent`,
:func:`make_view` and :func:`refresh_view` (the one place a view follows its
base after an in-place change). Tensors start as leaves (mixprec/tensor.py).
"""
from __future__ import annotations

import contextlib
import functools
import itertools
import weakref
from typing import NamedTuple

import numpy as np

from .. import _text
from ..backend import devices
from .._state import PER_THREAD
from ..dtypes import COMPLEX, FLOAT8, FLOATING
from ..hooks import RemovableHandle
from ..tensor import Tensor
from .grad_mode import enable_grad

_DIFFERENTIABLE = frozenset(FLOATING + COMPLEX + FLOAT8)  # outputs that get a grad_fn
_NUMBERS = (int, float, np.generic)
_sequence = itertools.count()  # creation order: backward runs later nodes first, as torch's engine does

INFERENCE_SAVE = ("inference tensors cannot be saved for backward: a tensor made under mp.inference_mode() was "
                  "used in an op that records a graph and needs it for its gradient. Clone it outside "
                  "inference_mode (t.clone()) to get a normal tensor, or use mp.no_grad() instead of "
                  "inference_mode")


class Node:
    """A node of the backward graph (the ``grad_fn`` of a tensor): gradients of its forward outputs in,
    gradients of its forward inputs out, along ``next_functions``."""

    _pre_hooks = None      # register_prehook: fn(grad_outputs) -> None or new grad_outputs
    _post_hooks = None     # register_hook: fn(grad_inputs, grad_outputs) -> None or new grad_inputs
    _tensor_hooks = None   # {output_nr: {id: fn}} from Tensor.register_hook on an output
    _retained = None       # {output_nr: weakref} of outputs that called retain_grad()
    _metadata = None
    _next_edges = ()
    _visible = None        # which slots next_functions shows (None: all)
    trace = None           # the forward call's stack, in anomaly mode
    freed = False
    _plain = True          # no hooks, no retain_grad, not a Function's: the engine may take its plain path
    user_backward = False  # True for custom Functions: their gradients may alias user tensors

    def __init__(self):
        self._seq = next(_sequence)

    def name(self) -> str:
        return type(self).__name__

    @property
    def next_functions(self) -> tuple:
        """((node, output_nr), ...) per input: where each input's gradient goes ((None, 0): nowhere)."""
        edges = self._next_edges
        if self._visible is not None:
            edges = [e for e, v in zip(edges, self._visible) if v]
        return tuple(e if e is not None else (None, 0) for e in edges)

    @property
    def metadata(self) -> dict:
        """A dict for your own notes on this node (torch's Node.metadata)."""
        if self._metadata is None:
            self._metadata = {}
        return self._metadata

    def register_prehook(self, fn):
        """Call ``fn(grad_outputs)`` before this node runs; a returned tuple replaces the gradients."""
        self._pre_hooks, handle = add_hook(self._pre_hooks, fn, "register_prehook")
        self._plain = False
        return handle

    def register_hook(self, fn):
        """Call ``fn(grad_inputs, grad_outputs)`` after this node ran; a returned tuple replaces grad_inputs."""
        self._post_hooks, handle = add_hook(self._post_hooks, fn, "register_hook")
        self._plain = False
        return handle

    def _add_tensor_hook(self, output_nr, fn):
        if self._tensor_hooks is None:
            self._tensor_hooks = {}
        hooks, handle = add_hook(self._tensor_hooks.get(output_nr), fn, "register_hook")
        self._tensor_hooks[output_nr] = hooks
        self._plain = False
        return handle

    def _retain(self, output_nr, tensor):
        if self._retained is None:
            self._retained = {}
        self._retained[output_nr] = weakref.ref(tensor)
        self._plain = False

    def _check_alive(self):
        if self.freed:
            raise RuntimeError(
                f"trying to backward through the graph a second time (through {self._label()}): its saved "
                "tensors were freed after the first backward; pass retain_graph=True to the first "
                "backward() or autograd.grad() call if you need to backward twice")

    def _label(self):
        return self.name()

    def _release(self):
        """Drop what backward needed once it ran (retain_graph=False)."""
        self.freed = True

    def __repr__(self):
        return f"<{self.name()}>"


def add_hook(hooks, fn, what, prepend=False):
    """Register ``fn`` in ``hooks`` (a dict keyed by handle id, made when None); returns (hooks, handle)."""
    if not callable(fn):
        raise TypeError(f"{what}: expected a callable hook, got {type(fn).__name__}")
    hooks = {} if hooks is None else hooks
    handle = RemovableHandle(hooks)
    hooks[handle.id] = fn
    if prepend:
        for key in [k for k in hooks if k != handle.id]:
            hooks[key] = hooks.pop(key)  # re-insert the others after the new one
    return hooks, handle


# ---------------------------------------------------------------- leaves
class AccumulateGrad(Node):
    """The node of a leaf that requires grad: adds the gradient that reaches it into ``variable.grad``.

    One per leaf, kept by the leaf (and by every graph that uses it); it holds
    the leaf weakly, so a leaf nobody can read any more is not kept alive by
    old graphs (its gradient then goes nowhere). Backward runs it once, after
    every contribution, and as soon as it is ready, so post-accumulate-grad
    hooks (DDP's bucketed all-reduce) fire while the rest of backward goes on.
    """

    def __init__(self, variable):
        super().__init__()
        self._seq = float("inf")  # ready accumulators run first
        self._variable = weakref.ref(variable)

    @property
    def variable(self):
        """The leaf tensor (None once it is gone)."""
        return self._variable()

    _n_outputs = 1

    def _release(self):
        pass  # shared by every graph that uses the leaf


def accumulator(t) -> AccumulateGrad:
    """The AccumulateGrad node of leaf ``t`` (made on first use, then kept by the leaf)."""
    owner = t if t._accumulate_into is None else t._accumulate_into
    acc = owner._accumulator
    if acc is None:
        acc = owner._accumulator = AccumulateGrad(owner)
    return acc


def gradient_edge(t) -> tuple:
    """(node, output_nr) that receives the gradient of ``t`` (which requires grad)."""
    if t._view is not None:
        refresh_view(t)
    fn = t._grad_fn
    return (fn, t.output_nr) if fn is not None else (accumulator(t), 0)


class GradientEdge(NamedTuple):
    """Where a tensor's gradient goes (torch.autograd.graph.GradientEdge); usable as ``inputs=`` of autograd.grad."""
    node: Node
    output_nr: int


def get_gradient_edge(t) -> GradientEdge:
    """The GradientEdge of ``t``: its grad_fn and output number, or its leaf's AccumulateGrad."""
    if not (isinstance(t, Tensor) and t._requires_grad):
        raise RuntimeError(f"get_gradient_edge: expected a Tensor that requires grad, got {t!r:.80}")
    return GradientEdge(*gradient_edge(t))


class _MultiGradHook:
    """register_multi_grad_hook's state: the gradients one backward pass has delivered so far."""

    def __init__(self, tensors, fn, mode):
        self.tensors, self.fn, self.mode, self.run, self.grads, self.waiting = tensors, fn, mode, None, None, None
        self.handles = [t.register_hook(functools.partial(self.arrived, i)) for i, t in enumerate(tensors)]

    def arrived(self, i, grad):
        run = PER_THREAD.engine.runs[-1]  # (the backward pass running now: engine.py's)
        first = run is not self.run
        if first:
            self.run, self.grads = run, [None] * len(self.tensors)
            self.waiting = {j for j, t in enumerate(self.tensors) if run.will_run(gradient_edge(t)[0])}
        if self.mode == "any":
            if first:
                self.fn(grad)
            return None
        self.grads[i] = grad
        self.waiting.discard(i)
        if not self.waiting:
            self.waiting = {None}  # (called once per backward pass)
            self.fn(tuple(self.grads))

    def remove(self):
        for h in self.handles:
            h.remove()


def register_multi_grad_hook(tensors, fn, *, mode="all"):
    """torch's: mode "all" calls fn(grads) once per backward pass when every tensor it reaches has its gradient
    (None for the others); mode "any" calls fn(grad) with the first to arrive. Returns a handle (remove())."""
    tensors = list(tensors)
    if mode not in ("all", "any"):
        raise ValueError(f"register_multi_grad_hook: mode must be 'all' or 'any', got {mode!r}")
    if not tensors or not all(isinstance(t, Tensor) and t._requires_grad for t in tensors):
        raise ValueError("register_multi_grad_hook: expected a non-empty sequence of tensors that require grad")
    return _MultiGradHook(tensors, fn, mode)


# ---------------------------------------------------------------- a tensor's history: the only writers
def set_history(t, node, output_nr=0):
    """``t`` is output ``output_nr`` of ``node`` (its gradient goes there)."""
    t._grad_fn, t._requires_grad = node, True
    if t.output_nr != output_nr:  # (most outputs are output 0, the class default: no per-tensor attribute)
        t.output_nr = output_nr


def take_over_output(t, node, output_nr):
    """``t`` takes over output ``output_nr`` of ``node`` (an in-place write moved the value into ``t``): its history,
    and, when ``node`` saved that output, the saved output follows ``t``'s version from now on."""
    set_history(t, node, output_nr)
    saved = node._saved_outputs
    if saved is not None and saved[output_nr] is not None:
        saved[output_nr].follow(t)


def make_leaf(t, requires_grad):
    """``t`` has no history: a leaf that records (or not) the gradients reaching it."""
    t._grad_fn, t._requires_grad = None, bool(requires_grad)


def set_tangent(t, level, tangent):
    """``t`` carries ``tangent`` at forward-AD ``level`` (None for both: no tangent)."""
    t._fw = None if level is None else (level, tangent)


def stop_following(t):
    """``t`` stops following its base's autograd identity (it became a leaf of its own)."""
    t._view = None


class ViewInfo:
    """How a view tensor relates to its root base: ``replay(base)`` makes the view again (the parent view's
    replay, for a view of a view, then this view's op with its arguments, taking result ``output`` of an op
    that returns several views).

    ``state`` is the base's autograd identity (grad_fn, requires_grad, tangent)
    when the view's own was last derived from it; when the base has changed
    since (an in-place op rebased it), :func:`refresh_view` derives the view's again.
    ``multi_output``: one of several views one call made (unbind, split, chunk), which
    autograd cannot let be written in place (torch's rule).
    """
    __slots__ = ("base", "parent", "op", "rest", "kwargs", "output", "made_without_grad", "multi_output", "state")

    def __init__(self, source, op, rest, kwargs, made_without_grad, output=None):
        parent = source._view
        self.base = source if parent is None else parent.base
        self.parent, self.op, self.rest, self.kwargs, self.output = parent, op, rest, kwargs, output
        self.made_without_grad = made_without_grad or (parent is not None and parent.made_without_grad)
        self.multi_output = output is not None or (parent is not None and parent.multi_output)
        base = self.base
        self.state = (base._grad_fn, base._requires_grad, base._fw)

    def replay(self, x):
        if self.parent is not None:
            x = self.parent.replay(x)
        x = self.op(x, *self.rest, **self.kwargs)
        return x if self.output is None else x[self.output]


def make_view(out, source, op, rest, kwargs, made_without_grad, output=None):
    """``out`` views ``source``'s memory, made by ``op(source, *rest, **kwargs)`` (its result ``output`` when the op
    returns several): it shares the version counter (made by the caller) and follows the base's autograd identity."""
    out._view = ViewInfo(source, op, rest, kwargs, made_without_grad, output)


def mark_multi_output(views):
    """Views one composite call made together (split, chunk) count as one op's several outputs."""
    for v in views:
        if v._view is not None:
            v._view.multi_output = True


def refresh_view(view, force=False):
    """Re-derive a view's grad_fn and tangent from its base when the base changed in place since (``force``:
    always). The one place a view follows its base; reads of a view's history call it first."""
    info = view._view
    base = info.base
    grad_fn, requires_grad, fw = info.state
    if not force and base._grad_fn is grad_fn and base._requires_grad == requires_grad and base._fw is fw:
        return
    if info.multi_output and base._requires_grad:
        raise RuntimeError("a view among several that one call made (unbind, split, chunk...) is used after its base "
                           "or another view of it was modified in place, which autograd cannot follow; index the "
                           "tensor instead, or clone the views before the in-place write")
    info.state = (base._grad_fn, base._requires_grad, base._fw)
    with enable_grad():
        fresh = info.replay(base)
    view._grad_fn, view._requires_grad, view.output_nr, view._fw = (
        fresh._grad_fn, fresh._requires_grad, fresh.output_nr, fresh._fw)


# ---------------------------------------------------------------- saved tensors
# (PER_THREAD.saving: this thread's saved_tensors_hooks and in-place bookkeeping, _state.py)
class SavedTensor:
    """One tensor a node keeps for backward (torch's SavedVariable).

    Inside ``saved_tensors_hooks`` it stores ``pack_hook(tensor)``; the hooks own that value, so as in torch
    no version is checked. Otherwise ``unpack`` checks the version (an in-place change since saving is an
    error). It returns the tensor (through ``unpack_hook``) with its autograd identity restored (grad_fn,
    or the leaf its gradient accumulates into), so backward can still be differentiated.
    """

    # what most saved tensors never set, as class defaults (an instance sets only what it needs)
    _tensor = _data = _packed = _unpack = _grad_fn = _leaf = _fw = None
    _is_output, _requires_grad, _output_nr = False, False, 0

    def __init__(self, t, is_output=False, saving=None):
        # saving: this thread's Saving (_state.py), when the caller has it at hand (record saves several at once)
        if t._inference:
            raise RuntimeError(INFERENCE_SAVE)
        if saving is None:
            saving = PER_THREAD.saving
        state = saving.inplace
        if state is not None and t is state[0] and not is_output:
            # the op's input is being overwritten by this very in-place op: save its old value
            if state[1] is None:
                state[1] = t.clone()
            t = state[1]
        self._vc = vc = t._version_counter()
        self._version = vc[0]
        hooks = saving.hooks
        if not hooks:
            if is_output:  # the data, not the tensor: an output owns its node, not the reverse
                self._data, self._is_output, self._output_nr, self._fw = t._array, True, t.output_nr, t._fw
            else:
                self._tensor = t
            return
        pack, self._unpack = hooks[-1]
        self._packed = pack(t)
        self._is_output, self._output_nr, self._fw = is_output, t.output_nr, t._fw
        self._grad_fn, self._requires_grad = t._grad_fn, t._requires_grad
        leaf = t if t._accumulate_into is None else t._accumulate_into
        self._leaf = leaf if t._requires_grad and t._grad_fn is None else None

    def follow(self, t):
        """The saved output now lives in ``t`` (an in-place op's target, holding the same values): follow its
        version from here on (no second pack)."""
        self._vc = vc = t._version_counter()
        self._version = vc[0]
        if self._data is not None:
            self._data = t._array

    def unpack(self, node, index):
        """The saved tensor for ``node``'s backward; ``index`` (its argument or output position) names it in
        errors, through ``node._saved_label``."""
        if self._unpack is None and self._vc[0] != self._version:
            what = node._saved_label(index, self._is_output)
            raise RuntimeError(_text.version_error(node, self._is_output, what, self._vc[0], self._version))
        if self._unpack is None:
            if not self._is_output:
                return self._tensor
            t = Tensor._wrap(self._data, grad_fn=node, vc=self._vc)
        else:
            value = self._unpack(self._packed)
            if not isinstance(value, Tensor):
                raise TypeError(f"unpack_hook must return a Tensor, got {type(value).__name__} (for "
                                f"{node._saved_label(index, self._is_output)})")
            t = Tensor._wrap(value._array)
            if self._is_output:
                t._grad_fn, t._requires_grad = node, True
            else:
                t._grad_fn, t._requires_grad = self._grad_fn, self._requires_grad
                t._accumulate_into = self._leaf
        t.output_nr = self._output_nr
        t._fw = self._fw
        return t


@contextlib.contextmanager
def overwriting(t):
    """While an in-place op computes ``t``'s new value: an op inside that saves ``t`` saves a clone of its old
    value instead (made once, when first needed), since ``t`` is about to be overwritten."""
    saving = PER_THREAD.saving
    prev, saving.inplace = saving.inplace, [t, None]
    try:
        yield
    finally:
        saving.inplace = prev


class NotSaved:
    """Stands in, at backward time, for an input or output the op did not declare saved.

    Any use of it is an error naming the op and the value: the op's ``saves=``
    declaration must list everything its backward reads.
    """

    __slots__ = ("_node", "_index", "_is_output", "_undeclared")

    def __init__(self, node, index, is_output=False, undeclared=False):
        # what it stands for: input or output ``index`` of ``node`` (undeclared: the op saves no output at all)
        self._node, self._index, self._is_output, self._undeclared = node, index, is_output, undeclared

    @property
    def _what(self):  # (worded only when needed: most stand-ins are never touched)
        return self._node._saved_label(self._index, self._is_output, self._undeclared)

    def _fail(self, *args, **kwargs):
        raise RuntimeError(f"backward used {self._what}, which the op does not save for backward; list it in "
                           "register(..., saves=...) (the names of the forward arguments backward reads, and "
                           "'output' for the output)")

    def __getattr__(self, name):
        self._fail()

    def __repr__(self):
        return f"<not saved: {self._what}>"


for _name in ("add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv", "pow", "rpow", "matmul",
              "rmatmul", "neg", "getitem", "len", "iter", "bool", "lt", "le", "gt", "ge", "array", "float", "int",
              "index", "abs", "invert", "and", "or"):
    setattr(NotSaved, f"__{_name}__", NotSaved._fail)


class saved_tensors_hooks:
    """Inside this block, every tensor an op saves for backward is stored as ``pack_hook(tensor)`` and
    read back with ``unpack_hook(packed)`` when backward needs it (torch.autograd.graph.saved_tensors_hooks).

    What "saved" means: for a built-in op, exactly the inputs and outputs its
    ``saves=`` declaration names (``mul`` saves both inputs, ``exp`` its output,
    ``add`` nothing); for a custom Function, what forward passed to
    ``ctx.save_for_backward``. pack_hook is called once per saved tensor when
    the op runs; unpack_hook once per saved tensor each time a built-in node's
    backward runs (a Function's ``ctx.saved_tensors`` unpacks on every access).
    Arrays an op computes and keeps for itself (dropout's mask, max_pool2d's
    argmax positions) are not tensors it saves and do not pass through the hooks.
    Only the innermost block's pair is active.
    """

    def __init__(self, pack_hook, unpack_hook):
        if not callable(pack_hook) or not callable(unpack_hook):
            raise TypeError("saved_tensors_hooks(pack_hook, unpack_hook) needs two callables")
        self.pack_hook, self.unpack_hook = pack_hook, unpack_hook

    def __enter__(self):
        saving = PER_THREAD.saving
        if saving.disabled is not None:
            raise RuntimeError(saving.disabled)
        saving.hooks = saving.hooks + ((self.pack_hook, self.unpack_hook),)
        return self

    def __exit__(self, *exc):
        saving = PER_THREAD.saving
        saving.hooks = saving.hooks[:-1]
        return False


class save_on_cpu(saved_tensors_hooks):
    """Keep tensors saved for backward in host memory (torch.autograd.graph.save_on_cpu).

    On the GPU each saved tensor is copied to the host when the op runs (into
    page-locked memory with ``pin_memory=True``, so the copy back can overlap
    other work) and copied back to its device when backward needs it: device
    memory for activations is traded for transfer time. Tensors already on
    the CPU are kept as they are, so on a CPU-only machine this is a no-op that
    keeps the contract (same gradients, hooks called once per saved tensor).
    """

    def __init__(self, pin_memory=False, device_type="cuda"):
        self.pin_memory = bool(pin_memory)
        super().__init__(self._pack, self._unpack)

    def _pack(self, t):
        if t.device.type == "cpu":
            return (None, t)
        host = devices.to_host(t._array, pinned=self.pin_memory)
        return (t.device, Tensor._wrap(host))

    def _unpack(self, packed):
        device, t = packed
        if device is None:
            return t
        with devices.on_device(device):
            return Tensor._wrap(devices.to_device(t._array, device))


class disable_saved_tensors_hooks:
    """Entering saved_tensors_hooks (or save_on_cpu) inside this block raises RuntimeError(error_message)."""

    def __init__(self, error_message):
        self.error_message = str(error_message)

    def __enter__(self):
        saving = PER_THREAD.saving
        self._prev, saving.disabled = saving.disabled, self.error_message
        return self

    def __exit__(self, *exc):
        PER_THREAD.saving.disabled = self._prev
        return False


def increment_version(tensor) -> None:
    """Mark ``tensor`` as changed in place (after writing its ``._array`` directly), so saved copies of it fail."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"increment_version expects a Tensor, got {type(tensor).__name__}")
    tensor._bump_version()


# ---------------------------------------------------------------- the front door
class Notes:
    """The ``ctx`` an op's forward writes notes on (``ctx.dim = ...``), for its backward and tangent rules."""


def record(op, ctx, args, kwargs, outs, differentiable=None, saves=None, attach_tangents=None, anomaly=None):
    """Build the node of one op call, after its forward, and make it the grad_fn of the call's outputs.

    ``op``'s ``run_backward(node, grads)`` is how backward calls it. ``args``: the
    call's positional arguments (a registered op's list arguments -- cat's tensors
    -- get one edge per tensor; a Function's get none, as in torch). Outputs become
    the node's when ``differentiable`` says so (default: the floating and complex
    ones). ``saves``: the tensors a Function saved, in order (default: what a
    registered op declares, ``op.saved_positions`` and ``op.saved_outputs``).
    ``attach_tangents(rule_ctx)``, when given, runs after the outputs are attached
    (so a tangent rule's use of them is differentiable) and before outputs are
    saved (so a saved output keeps its tangent). ``anomaly``: whether anomaly mode
    is on (None: look), to keep the caller's stack on the node.
    """
    node = OpNode(op, ctx, kwargs)
    # this thread's saving state, fetched once, and only by calls that save something
    saving = PER_THREAD.saving if saves is not None or op.saved_positions or op.saved_outputs else None
    if saves is None:
        _edges_and_saved_inputs(node, op, args, saving)
    else:
        node._next_edges = [gradient_edge(a) if isinstance(a, Tensor) and a._requires_grad else None for a in args]
        node._metas = [(a._array.shape, a._array.dtype) if e is not None else None
                       for a, e in zip(args, node._next_edges)]
        node._layout = len(args)
    node._n_outputs = len(outs)
    for i, o in enumerate(outs):  # (after the edges: a Function's dirty input is also its output)
        if (o._array.dtype in _DIFFERENTIABLE) if differentiable is None else differentiable[i]:
            set_history(o, node, i)
    if attach_tangents is not None:
        attach_tangents(RuleCtx(op, ctx, args, outs, kwargs, node))
    if saves is None:
        wanted = op.saved_outputs
        if wanted:
            node._saved_outputs = [SavedTensor(o, True, saving) if (wanted is True or i in wanted) else None
                                   for i, o in enumerate(outs)]
    else:
        output_ids = {id(o) for o in outs}
        node.saved = tuple(None if t is None else SavedTensor(t, id(t) in output_ids, saving) for t in saves)
        node._plain = False  # (a Function's: its gradients may be the user's tensors)
    if PER_THREAD.modes.anomaly if anomaly is None else anomaly:
        node.trace = _text.caller_stack()
    return node


def _edges_and_saved_inputs(node, op, args, saving):
    """A registered op's edges (a list argument's tensors one slot each), what next_functions shows, and its args
    with the inputs it saves as SavedTensors (the others as _UNSAVED)."""
    positions, promote = op.saved_positions, op.promote
    edges, metas, saved = [], [], []
    lists = hidden = None
    for i, a in enumerate(args):
        if isinstance(a, Tensor):  # the common case first
            saved.append(SavedTensor(a, False, saving) if i in positions else _UNSAVED)
            if a._requires_grad:
                fn = a._grad_fn  # (gradient_edge's answer for an output that is no view, without the call)
                edges.append((fn, a.output_nr) if fn is not None and a._view is None else gradient_edge(a))
                metas.append((a._array.shape, a._array.dtype))
            else:
                edges.append(None)
                metas.append(None)
        elif isinstance(a, (list, tuple)) and any(isinstance(x, Tensor) for x in a):  # cat, stack, indices
            lists = lists or {}
            lists[i] = len(a)
            saved.append(type(a)((SavedTensor(x, False, saving) if i in positions else _UNSAVED)
                                 if isinstance(x, Tensor) else x for x in a))
            for x in a:
                grad = isinstance(x, Tensor) and x._requires_grad
                edges.append(gradient_edge(x) if grad else None)
                metas.append((x._array.shape, x._array.dtype) if grad else None)
        else:
            saved.append(a)
            if not (i in promote and isinstance(a, _NUMBERS)):
                hidden = hidden or set()
                hidden.add(len(edges))
            edges.append(None)
            metas.append(None)
    node._next_edges, node._metas, node.saved = edges, metas, tuple(saved)
    # how backward's results map to the edges: one per argument, a list's gradients spread over its slots
    node._layout = len(saved) if lists is None else [lists.get(i) for i in range(len(saved))]
    if hidden:  # next_functions lists tensor inputs and numbers in data positions, as torch's does
        node._visible = [k not in hidden for k in range(len(edges))]


_UNSAVED = object()  # marks, in a node's saved args, a tensor the op does not save (NotSaved at backward)


class OpNode(Node):
    """The node one op call leaves behind, built once by :func:`record`.

    op, ctx (forward's notes; for a Function its ctx), kwargs (the call's
    keyword options); ``saved``: a registered op's positional args with the
    saved ones as SavedTensors, or the tensors a Function saved; the edges.
    Backward reads the saved tensors through :meth:`rule_ctx` (version-checked,
    unpacked once per backward).
    """

    saved = None
    _saved_outputs = None

    def __init__(self, op, ctx, kwargs):
        self._seq = next(_sequence)
        self.op, self.ctx, self.kwargs = op, ctx, kwargs

    def name(self) -> str:
        return f"{self.op.name}Backward"

    def _label(self):
        return self.op.name

    @property
    def user_backward(self):
        return self.op.user_backward

    def __getattr__(self, name):  # a Function's node shows its ctx's attributes, as torch's does
        ctx = self.__dict__.get("ctx")
        if name.startswith("_saved_") and "op" in self.__dict__ and not self.op.user_backward:
            return self._saved_attribute(name[7:])
        if ctx is None or not self.op.user_backward:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(ctx, name)

    def _saved_attribute(self, key):
        """torch's grad_fn._saved_<name>: what backward keeps of argument <name> ("self" is the first), or of the
        output ("result"; "result1"... for a later one)."""
        self._check_alive()
        names = ("self", *self.op.arg_names[1:])
        if key.startswith("result") and key[6:] in ("", *map(str, range(self._n_outputs))):
            values, i = self._unpack_outputs(), int(key[6:] or 0)
        elif key in names or key in self.op.arg_names:
            values, i = self._unpack_inputs(), names.index(key) if key in names else self.op.arg_names.index(key)
        else:
            raise AttributeError(f"{self._label()} has no argument or output {key!r} (its arguments: {names})")
        value = values[i] if i < len(values) else self.kwargs.get(self.op.arg_names[i])
        if isinstance(value, NotSaved):
            raise AttributeError(f"{self._label()}'s backward does not keep {key!r}, so it has no _saved_{key}")
        return value

    def _apply(self, grads):
        """One gradient per input slot, from the gradients of the outputs."""
        return self.op.run_backward(self, grads)

    def rule_ctx(self):
        """The ctx a registered op's backward gets: its saved inputs (and outputs, when it reads them), unpacked
        for this backward."""
        return RuleCtx(self.op, self.ctx, self._unpack_inputs(), None, self.kwargs, self)

    @property
    def needs_input_grad(self) -> tuple:
        """One bool per positional argument (torch's ctx.needs_input_grad): whether its gradient goes anywhere
        (for a list argument, whether any of its tensors' does)."""
        edges, layout = self._next_edges, self._layout
        if type(layout) is int:
            return tuple(e is not None for e in edges)
        needs, k = [], 0
        for n in layout:  # (None: one edge for a plain argument; n: a list's n slots)
            width = 1 if n is None else n
            needs.append(any(e is not None for e in edges[k:k + width]))
            k += width
        return tuple(needs)

    def _saved_label(self, index, is_output, undeclared=False):
        """How errors name saved input or output ``index`` (undeclared: an output of an op that saves none)."""
        if self.op.user_backward:
            return f"saved tensor {index} (position {index} of save_for_backward)"
        if is_output:
            return f"output {index} of {self.op.name}" + (" (declare saves=('output',))" if undeclared else "")
        names = self.op.arg_names
        return f"input {index}{f' ({names[index]})' if index < len(names) else ''} of {self.op.name}"

    def unpack_saved(self):
        """A Function's saved tensors, in the order it saved them (None where it saved None)."""
        self._check_alive()
        return tuple(None if s is None else s.unpack(self, i) for i, s in enumerate(self.saved))

    def _unpack_inputs(self):
        if self.freed:
            self._check_alive()
        out = []
        for i, a in enumerate(self.saved):
            if type(a) is SavedTensor:
                out.append(a.unpack(self, i))
            elif a is _UNSAVED:
                out.append(NotSaved(self, i))
            elif isinstance(a, (list, tuple)) and any(isinstance(x, SavedTensor) or x is _UNSAVED for x in a):
                out.append(type(a)(self._unpack_arg(i, x) for x in a))  # a list of tensors (cat, indices)
            else:
                out.append(a)  # anything else (numbers, shapes, a NamedTuple of options) as forward got it
        return tuple(out)

    def _unpack_arg(self, i, a):
        if isinstance(a, SavedTensor):
            return a.unpack(self, i)
        return NotSaved(self, i) if a is _UNSAVED else a

    def _unpack_outputs(self):
        saved = self._saved_outputs
        if saved is None:
            return tuple(NotSaved(self, i, is_output=True, undeclared=True) for i in range(self._n_outputs))
        return tuple(NotSaved(self, i, is_output=True) if s is None else s.unpack(self, i) for i, s in enumerate(saved))

    def _release(self):
        self.freed = True
        self.saved = self._saved_outputs = None
        if not self.op.user_backward:
            self.ctx = None  # forward's notes (masks, shapes) are not needed any more; a Function's ctx stays


class RuleCtx:
    """What a registered op's backward and tangent rules get as ``ctx``: the call's positional ``inputs`` and its
    ``outputs`` (in backward: the saved ones, version-checked; a NotSaved stand-in for the others), ``kwargs``,
    ``op``, ``needs_input_grad``, and whatever forward noted (``ctx.dim``)."""
    __slots__ = ("op", "inputs", "_outputs", "kwargs", "_notes", "_node")

    def __init__(self, op, notes, inputs, outputs, kwargs, node):
        # (outputs None: the node's saved ones, unpacked when the rule first reads them)
        self.op, self.inputs, self._outputs, self.kwargs, self._notes, self._node = (
            op, inputs, outputs, kwargs, notes, node)

    @property
    def outputs(self):
        outputs = self._outputs
        if outputs is None:
            outputs = self._outputs = self._node._unpack_outputs()
        return outputs

    @property
    def output(self):
        """The (first) output."""
        return self.outputs[0]

    @property
    def needs_input_grad(self) -> tuple:
        return self._node.needs_input_grad

    def __getattr__(self, name):
        try:
            return getattr(self._notes, name)
        except AttributeError:
            raise AttributeError(f"{self.op.name}: its forward noted no {name!r} on ctx") from None


def flatten_grads(grads, layout):
    """Match a backward's per-argument results to the input slots (lists expand; missing trailing ones are None).

    layout: per argument, None or the length of a list argument; or just the number of arguments when none is a
    list (the common case: one slot per argument).
    """
    if type(layout) is int:
        n = len(grads)
        return list(grads) if n == layout else list(grads[:layout]) + [None] * (layout - n)
    flat = []
    for i, n in enumerate(layout):
        g = grads[i] if i < len(grads) else None
        if n is None:
            flat.append(g)
        else:
            flat.extend(g if g is not None else [None] * n)
    return flat


from .allow_mutation import allow_mutation_on_saved_tensors  # noqa: E402,F401  (built on saved_tensors_hooks)
