"""The backward graph (torch.autograd.graph): nodes, the edges between them, saved tensors and their hooks.

Every op call that records (grad mode on, an input requires grad) leaves an
:class:`OpNode` behind as its outputs' ``grad_fn``. A node holds

- its **next edges**: for each input slot, the ``(node, output_nr)`` the input's
  gradient goes to -- the input's own grad_fn, or for a leaf its
  :class:`AccumulateGrad` node -- or None. They are fixed when the op runs, so a
  later in-place change of an input (which gives the input a new grad_fn) does
  not re-route gradients already recorded.
- its **saved tensors**: only what the op declares its backward reads
  (``register(..., saves=...)``, see :meth:`mixprec.ops.registry.Op.saved_positions`),
  each a :class:`SavedTensor` that remembers the tensor's version (an in-place
  change is caught when backward reads it) and goes through the active
  :class:`saved_tensors_hooks` (pack on save, unpack when backward runs).
  Inputs the op does not save are not kept at all.
- hooks: ``register_prehook`` (on the gradients of its outputs), ``register_hook``
  (on its result), and the tensor hooks of its outputs.

The node doubles as the ``ctx`` an op's forward, backward and tangent rule
share (``ctx.dim = ...`` in forward, read in backward).
"""
from __future__ import annotations

import itertools
import threading
import weakref

import numpy as np

from ..dtypes import COMPLEX, FLOATING
from ..hooks import RemovableHandle
from ..tensor import Tensor

_DIFFERENTIABLE = frozenset(FLOATING + COMPLEX)  # outputs that get a grad_fn
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
        return handle

    def register_hook(self, fn):
        """Call ``fn(grad_inputs, grad_outputs)`` after this node ran; a returned tuple replaces grad_inputs."""
        self._post_hooks, handle = add_hook(self._post_hooks, fn, "register_hook")
        return handle

    def _add_tensor_hook(self, output_nr, fn):
        if self._tensor_hooks is None:
            self._tensor_hooks = {}
        hooks, handle = add_hook(self._tensor_hooks.get(output_nr), fn, "register_hook")
        self._tensor_hooks[output_nr] = hooks
        return handle

    def _retain(self, output_nr, tensor):
        if self._retained is None:
            self._retained = {}
        self._retained[output_nr] = weakref.ref(tensor)

    def _check_alive(self):
        if self.freed:
            raise RuntimeError(
                f"trying to backward through the graph a second time (through {self._label()}): its saved "
                "tensors were freed after the first backward; pass retain_graph=True to the first "
                "backward() or autograd.grad() call if you need to backward twice")

    def _label(self):
        return self.name()

    def _saved_label(self, index, is_output):
        """How errors name saved tensor ``index`` (an argument or output position) of this node."""
        return f"{'output' if is_output else 'saved tensor'} {index} of {self._label()}"

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

    def name(self) -> str:
        return "AccumulateGrad"

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
        t._view.refresh(t)
    fn = t._grad_fn
    return (fn, t.output_nr) if fn is not None else (accumulator(t), 0)


# ---------------------------------------------------------------- saved tensors
class _SavedState(threading.local):
    hooks = ()             # (pack, unpack) pairs of the saved_tensors_hooks entered, innermost last
    disabled = None        # disable_saved_tensors_hooks' message, while it is active
    inplace = None         # [source, clone] while an in-place op computes its new value (ops/inplace.py)


_saved = _SavedState()


class SavedTensor:
    """One tensor a node keeps for backward (torch's SavedVariable).

    Saving remembers the tensor's version and, inside ``saved_tensors_hooks``,
    stores ``pack_hook(tensor)`` instead of the tensor. ``unpack`` checks the
    version (an in-place change since saving is an error) and returns the
    tensor, through ``unpack_hook`` when it was packed, with its autograd
    identity restored (grad_fn, or the leaf its gradient accumulates into), so
    backward can still be differentiated.
    """

    # what most saved tensors never set, as class defaults (an instance sets only what it needs)
    _tensor = _data = _packed = _unpack = _grad_fn = _leaf = _fw = None
    _is_output, _requires_grad, _output_nr = False, False, 0

    def __init__(self, t, is_output=False):
        if t._inference:
            raise RuntimeError(INFERENCE_SAVE)
        state = _saved.inplace
        if state is not None and t is state[0] and not is_output:
            # the op's input is being overwritten by this very in-place op: save its old value
            if state[1] is None:
                state[1] = t.clone()
            t = state[1]
        self._vc = vc = t._version_counter()
        self._version = vc[0]
        hooks = _saved.hooks
        if not hooks:
            if is_output:  # the data, not the tensor: an output owns its node, not the reverse
                self._data, self._is_output, self._output_nr, self._fw = t.data, True, t.output_nr, t._fw
            else:
                self._tensor = t
            return
        pack, self._unpack = hooks[-1]
        self._packed = pack(t)
        self._is_output, self._output_nr, self._fw = is_output, t.output_nr, t._fw
        self._grad_fn, self._requires_grad = t._grad_fn, t._requires_grad
        leaf = t if t._accumulate_into is None else t._accumulate_into
        self._leaf = leaf if t._requires_grad and t._grad_fn is None else None

    def retarget(self, t):
        """The saved output now lives in ``t`` (an in-place op's target, holding the same values): follow its
        version from here on (no second pack)."""
        self._vc = vc = t._version_counter()
        self._version = vc[0]
        if self._data is not None:
            self._data = t.data

    def unpack(self, node, index):
        """The saved tensor for ``node``'s backward; ``index`` (its argument or output position) names it in
        errors, through ``node._saved_label``."""
        if self._vc[0] != self._version:
            what = node._saved_label(index, self._is_output)
            raise RuntimeError(version_error(node, self._is_output, what, self._vc[0], self._version))
        if self._unpack is None:
            if not self._is_output:
                return self._tensor
            t = Tensor._wrap(self._data, grad_fn=node, vc=self._vc)
        else:
            value = self._unpack(self._packed)
            if not isinstance(value, Tensor):
                raise TypeError(f"unpack_hook must return a Tensor, got {type(value).__name__} (for "
                                f"{node._saved_label(index, self._is_output)})")
            t = Tensor._wrap(value.data)
            if self._is_output:
                t._grad_fn, t._requires_grad = node, True
            else:
                t._grad_fn, t._requires_grad = self._grad_fn, self._requires_grad
                t._accumulate_into = self._leaf
        t.output_nr = self._output_nr
        t._fw = self._fw
        return t


def version_error(node, is_output, what, now, expected):
    """torch's "modified by an inplace operation" error, naming the op, the tensor and both versions."""
    name = node._label()
    if node.user_backward:
        subject = f"a tensor saved by {name} for backward"
    elif is_output:
        subject = f"the output of {name}, which its backward needs,"
    else:
        subject = f"one of the tensors needed for the gradient of {name}"
    return (f"{subject} has been modified by an in-place operation (version {now}, expected {expected}): {what}. "
            "Use an out-of-place op, or clone() the tensor before changing it; "
            "mp.autograd.set_detect_anomaly(True) shows where the failing op was called")


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
        return self._node._not_saved_label(self._index, self._is_output, self._undeclared)

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
        if _saved.disabled is not None:
            raise RuntimeError(_saved.disabled)
        _saved.hooks = _saved.hooks + ((self.pack_hook, self.unpack_hook),)
        return self

    def __exit__(self, *exc):
        _saved.hooks = _saved.hooks[:-1]
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
        from .. import backend as _be
        if t.device.type == "cpu":
            return (None, t)
        host = _be.to_host(t.data, pinned=self.pin_memory)
        return (t.device, Tensor._wrap(host))

    def _unpack(self, packed):
        from .. import backend as _be
        device, t = packed
        if device is None:
            return t
        with _be.on_device(device):
            return Tensor._wrap(_be.to_device(t.data, device))


class disable_saved_tensors_hooks:
    """Entering saved_tensors_hooks (or save_on_cpu) inside this block raises RuntimeError(error_message)."""

    def __init__(self, error_message):
        self.error_message = str(error_message)

    def __enter__(self):
        self._prev, _saved.disabled = _saved.disabled, self.error_message
        return self

    def __exit__(self, *exc):
        _saved.disabled = self._prev
        return False


def increment_version(tensor) -> None:
    """Mark ``tensor`` as changed in place (after writing its ``.data`` directly), so saved copies of it fail."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"increment_version expects a Tensor, got {type(tensor).__name__}")
    tensor._bump_version()


# ---------------------------------------------------------------- the node of an op call
class OpNode(Node):
    """The node an op call leaves behind; also that call's ``ctx``.

    During forward (and the tangent rule, which runs right after it) ``ctx.inputs``
    and ``ctx.output(s)`` are the call's own tensors. ``finish`` then records
    the edges and saves what the op declares; from then on backward reads
    ``ctx.inputs``/``ctx.output`` through the saved tensors (version-checked,
    unpacked once per backward), and anything not saved is a :class:`NotSaved`.
    """

    user_backward = False   # True for custom Functions: their gradients may alias user tensors
    _sealed = False
    _unpacked = None        # (inputs, outputs) while backward runs (the engine opens the node)
    _outs = None            # the output tensors, during forward only
    _saved_outputs = None

    def __init__(self, op, args, kwargs=None):
        self._seq = next(_sequence)
        self.op = op
        self._args = args
        self.kwargs = kwargs if kwargs is not None else {}

    def name(self) -> str:
        return f"{self.op.name}Backward"

    def _label(self):
        return self.op.name

    # ---- what forward, the tangent rule and backward read ----
    @property
    def inputs(self):
        """The op's positional args: the call's own during forward; saved (version-checked) in backward."""
        if self._unpacked is not None:
            return self._unpacked[0]
        if not self._sealed:
            return self._args
        return self._unpack_inputs()

    @property
    def output(self):
        """The op's (first) output, attached to this node (safe to differentiate through)."""
        return self.outputs[0]

    @property
    def outputs(self):
        """Every output (a NotSaved stand-in, at backward time, for one the op does not save)."""
        if self._unpacked is not None and self._unpacked[1] is not None:
            return self._unpacked[1]
        if not self._sealed:
            return self._outs
        return self._unpack_outputs()

    @property
    def needs_input_grad(self) -> tuple:
        """One bool per positional argument (torch's ctx.needs_input_grad): whether its gradient goes anywhere
        (for a list argument, whether any of its tensors' does). A backward rule skips what nobody needs."""
        edges, layout = self._next_edges, self._layout
        if type(layout) is int:
            return tuple(e is not None for e in edges)
        needs, k = [], 0
        for n in layout:  # (None: one edge for a plain argument; n: a list's n slots)
            width = 1 if n is None else n
            needs.append(any(e is not None for e in edges[k:k + width]))
            k += width
        return tuple(needs)

    # ---- recording ----
    def finish(self, outs):
        """Become the grad_fn of each floating output and record the edges and what to save (the tangent rule
        may then run, seeing the outputs attached and the call's own args); ``seal`` then keeps only the saved."""
        for i, o in enumerate(outs):
            if o.data.dtype in _DIFFERENTIABLE:
                o._grad_fn, o._requires_grad = self, True
                if i:
                    o.output_nr = i
        op = self.op
        promote, positions = op.promote, op.saved_positions
        edges, metas, sealed = [], [], []
        lists = hidden = None
        for i, a in enumerate(self._args):
            if isinstance(a, Tensor):  # the common case first
                sealed.append(SavedTensor(a) if i in positions else _UNSAVED)
                if a._requires_grad:
                    edges.append(gradient_edge(a))
                    metas.append((a.data.shape, a.data.dtype))
                else:
                    edges.append(None)
                    metas.append(None)
            elif isinstance(a, (list, tuple)) and any(isinstance(x, Tensor) for x in a):  # cat, stack, indices
                lists = lists or {}
                lists[i] = len(a)
                sealed.append(type(a)((SavedTensor(x) if i in positions else _UNSAVED) if isinstance(x, Tensor)
                                      else x for x in a))
                for x in a:
                    grad = isinstance(x, Tensor) and x._requires_grad
                    edges.append(gradient_edge(x) if grad else None)
                    metas.append((x.data.shape, x.data.dtype) if grad else None)
            else:
                sealed.append(a)
                if not (i in promote and isinstance(a, _NUMBERS)):
                    hidden = hidden or set()
                    hidden.add(len(edges))
                edges.append(None)
                metas.append(None)
        self._next_edges, self._metas, self._sealed_args = edges, metas, tuple(sealed)
        # how backward's results map to the edges: one per argument, a list's gradients spread over its slots
        self._layout = len(sealed) if lists is None else [lists.get(i) for i in range(len(sealed))]
        self._n_outputs = len(outs)
        if hidden:  # next_functions lists tensor inputs and numbers in data positions, as torch's does
            self._visible = [k not in hidden for k in range(len(edges))]

    def seal(self):
        """Keep only what the op declares its backward reads (SavedTensors), nothing else."""
        wanted = self.op.saved_outputs
        if wanted:
            self._saved_outputs = [SavedTensor(o, is_output=True) if (wanted is True or i in wanted) else None
                                   for i, o in enumerate(self._outs)]
        self._args, self._sealed_args, self._sealed, self._outs = self._sealed_args, None, True, None

    def _saved_label(self, index, is_output):
        return f"output {index} of {self.op.name}" if is_output else self._arg_name(index)

    def _not_saved_label(self, index, is_output, undeclared):
        if not is_output:
            return self._arg_name(index)
        return f"output {index} of {self.op.name}" + (" (declare saves=('output',))" if undeclared else "")

    def _arg_name(self, i):
        names = self.op.arg_names
        return f"input {i} ({names[i]}) of {self.op.name}" if i < len(names) else f"input {i} of {self.op.name}"

    def rebase_output(self, output_nr, tensor):
        """``tensor`` (an in-place op's target) now holds output ``output_nr``: save it instead."""
        tensor._grad_fn, tensor._requires_grad, tensor.output_nr = self, True, output_nr
        if self._saved_outputs is not None and self._saved_outputs[output_nr] is not None:
            self._saved_outputs[output_nr].retarget(tensor)

    # ---- backward ----
    def _unpack_inputs(self):
        self._check_alive()
        out = []
        for i, a in enumerate(self._args):
            if isinstance(a, SavedTensor):
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
        self._check_alive()
        saved = self._saved_outputs
        if saved is None:
            return tuple(NotSaved(self, i, is_output=True, undeclared=True) for i in range(self._n_outputs))
        return tuple(NotSaved(self, i, is_output=True) if s is None else s.unpack(self, i) for i, s in enumerate(saved))

    def _apply(self, grads):
        """Run the op's backward (saved tensors unpacked once for the whole call)."""
        # saved tensors are unpacked once for the whole call; outputs it does not save only if it asks
        self._unpacked = (self._unpack_inputs(), self._unpack_outputs() if self._saved_outputs else None)
        try:
            result = self.op.backward(self, *grads)
        finally:
            self._unpacked = None
        if not isinstance(result, (tuple, list)):
            result = (result,)
        return flatten_grads(result, self._layout)

    def _release(self):
        self.freed = True
        self._args = self._saved_outputs = None
        notes = self.__dict__
        for k in notes:  # what forward noted on ctx (masks, shapes): not needed any more (the keys stay)
            if k not in _KEEP:
                notes[k] = None


_UNSAVED = object()  # marks, in a sealed node's args, a tensor the op does not save (NotSaved at backward)

_KEEP = {"op", "freed", "trace", "_seq", "_next_edges", "_metas", "_layout", "_visible", "_pre_hooks",
         "_post_hooks", "_tensor_hooks", "_retained", "_metadata", "_sealed", "_args", "_saved_outputs",
         "_n_outputs", "_sealed_args"}


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
