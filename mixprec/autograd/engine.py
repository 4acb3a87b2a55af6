"""Reverse mode: run the backward graph, and its entry points ``backward`` and ``grad``.

The engine counts, for every node reachable from the outputs, how many edges
lead into it; a node runs once all of them delivered (its gradients are then
complete), the most recently created ready node first, ready leaves'
accumulators before anything else. For one node, in torch's order:

    tensor hooks of each output (Tensor.register_hook), retain_grad, capture for autograd.grad
    node pre-hooks (Node.register_prehook)
    the node: an op's backward, a Function's backward, or AccumulateGrad (.grad += g, then
              post-accumulate-grad hooks)
    node hooks (Node.register_hook)
    each input's gradient reduced to its shape and dtype, and sent along its edge

With ``inputs`` (``autograd.grad``, ``backward(inputs=...)``) only nodes that
lead to one of them run. Backward runs with autocast off and, unless
``create_graph``, grad mode off; forward mode stays on, so the ops of backward
carry tangents (forward-over-reverse, for Hessian-vector products).
"""
from __future__ import annotations

import heapq
import math

import numpy as np

from .. import dtypes as _dt
from .. import observers
from .._state import PER_THREAD
from ..ops import autocast
from ..tensor import Tensor, tensor
from ..creation import ones_like, zeros_like
from . import grad_mode
from .graph import AccumulateGrad, GradientEdge, gradient_edge


def queue_callback(fn) -> None:
    """Run ``fn()`` when the backward pass now running finishes (torch's engine.queue_callback)."""
    runs = PER_THREAD.engine.runs  # this thread's backward passes now running, innermost last (_state.py)
    if not runs:
        raise RuntimeError("queue_callback can only be called while backward runs (from a hook)")
    runs[-1].callbacks.append(fn)


class _Run:
    """The state of one backward pass."""

    def __init__(self, create_graph, retain_graph, accumulate, targets, foreign, observed):
        self.create_graph = create_graph
        self.retain_graph = retain_graph
        self.accumulate = accumulate   # False: autograd.grad (capture only)
        self.targets = targets         # {(id(node), output_nr): [input indices]} or None
        self.captured = {}
        self.callbacks = []
        self.foreign = foreign         # ids of arrays others hold: a leaf's .grad must not alias them
        self.anomaly = grad_mode.is_anomaly_enabled()
        self.check_nan = self.anomaly and grad_mode.is_anomaly_check_nan_enabled()
        self.observed = observed       # a dispatch observer sees each node's backward as a call


def run_backward(outputs, grad_outputs, *, retain_graph=False, create_graph=False, inputs=None,
                 accumulate=True):
    """Backpropagate ``grad_outputs`` from ``outputs``.

    accumulate=True: gradients go into ``.grad`` of the leaves (of ``inputs`` only,
    when given); returns None. accumulate=False: returns the gradient of each of
    ``inputs`` (None where none arrived); no ``.grad`` changes.
    """
    if observers.watching_backward():  # mp.amp.trace, mp.profiler, mp.amp.inspect: the pass is a call they see
        device = outputs[0].device if outputs else None
        return observers.observed_backward("backward pass", None, (outputs, grad_outputs), device, lambda: _run(
            outputs, grad_outputs, retain_graph, create_graph, inputs, accumulate, observed=True))
    return _run(outputs, grad_outputs, retain_graph, create_graph, inputs, accumulate, observed=False)


def _run(outputs, grad_outputs, retain_graph, create_graph, inputs, accumulate, observed):
    roots = []
    for i, out in enumerate(outputs):
        if not out._requires_grad:
            raise RuntimeError(f"element {i} of tensors does not require grad and has no grad_fn: nothing to "
                               "differentiate (did you call it under mp.no_grad()?)")
        roots.append(gradient_edge(out))
    targets = None
    if inputs is not None:
        targets = {}
        for k, t in enumerate(inputs):
            node, nr = t if type(t) is GradientEdge else gradient_edge(t)
            targets.setdefault((id(node), nr), []).append(k)
    run = _Run(create_graph, retain_graph, accumulate, targets, {id(g._array) for g in grad_outputs}, observed)
    pending = _collect([node for node, _ in roots])
    execute = _to_execute(pending, targets, accumulate, inputs)
    run.will_run = lambda node: id(node) in pending and (execute is None or id(node) in execute)
    for (node, nr), g in zip(roots, grad_outputs):
        _deliver(pending[id(node)], nr, g)
    ready = [(-entry[0]._seq, key, entry[0]) for key, entry in pending.items() if entry[1] == 0]
    heapq.heapify(ready)
    plain = execute is None and not observed and not run.anomaly  # then a node without hooks takes _run_plain
    pop, push = heapq.heappop, heapq.heappush
    engine = PER_THREAD.engine
    engine.runs = engine.runs + (run,)
    try:
        with grad_mode.set_grad_enabled(create_graph), autocast.suspended():
            while ready:
                node = pop(ready)[2]
                entry = pending[id(node)]
                grads, entry[2], result = entry[2], None, None
                if grads is not None:
                    if plain and node._plain:
                        result = _run_plain(run, node, grads)
                    else:
                        result = _run_node(run, node, grads, execute is None or id(node) in execute)
                    if result is not None and not retain_graph:
                        node._release()
                for i, edge in enumerate(node._next_edges):
                    if edge is None:
                        continue
                    entry = pending[id(edge[0])]
                    if result is not None and result[i] is not None:
                        _deliver(entry, edge[1], result[i])
                    entry[1] -= 1
                    if not entry[1]:
                        child = entry[0]
                        push(ready, (-child._seq, id(child), child))
            for fn in run.callbacks:
                fn()
    finally:
        engine.runs = engine.runs[:-1]
    if accumulate:
        if inputs is not None:  # a non-leaf among inputs gets its gradient in .grad too
            for key, idx in targets.items():
                for k in idx:
                    t, g = inputs[k], run.captured.get(k)
                    if g is not None and t._grad_fn is not None:
                        _store_grad(t, g, run.foreign, create_graph)
        return None
    return [run.captured.get(k) for k in range(len(inputs))]


def _collect(roots):
    """Every node reachable from ``roots``: {id(node): [node, how many edges lead into it, its gradients (None
    until one arrives)]}."""
    pending, stack = {}, []
    for node in roots:
        if id(node) not in pending:
            pending[id(node)] = [node, 0, None]
            stack.append(node)
    while stack:
        node = stack.pop()
        if node.freed:
            node._check_alive()
        for edge in node._next_edges:
            if edge is not None:
                child = edge[0]
                entry = pending.get(id(child))
                if entry is None:
                    pending[id(child)] = [child, 1, None]
                    stack.append(child)
                else:
                    entry[1] += 1
    return pending


def _to_execute(pending, targets, accumulate, inputs):
    """Ids of the nodes that must run (None: all): with ``inputs``, those that lead to one of them,
    and the accumulators of leaves among them in accumulate mode."""
    if targets is None:
        return None if accumulate else set()
    target_nodes = {key[0] for key in targets}
    leads = {}

    def reaches(start):  # iterative post-order over the graph
        stack = [(start, False)]
        while stack:
            node, done = stack.pop()
            if done:
                leads[id(node)] = any(e is not None and (id(e[0]) in target_nodes or leads.get(id(e[0])))
                                      for e in node._next_edges)
                continue
            if id(node) in leads:
                continue
            leads[id(node)] = False
            stack.append((node, True))
            stack.extend((e[0], False) for e in node._next_edges if e is not None and id(e[0]) not in leads)
    nodes = [entry[0] for entry in pending.values()]
    for node in nodes:
        reaches(node)
    run = {key for key, yes in leads.items() if yes}
    if accumulate:
        run |= {id(n) for n in nodes if isinstance(n, AccumulateGrad) and id(n) in target_nodes}
    return run


def _deliver(entry, nr, grad):
    grads = entry[2]
    if grads is None:
        grads = entry[2] = [None] * entry[0]._n_outputs
    grads[nr] = grad if grads[nr] is None else grads[nr] + grad


def _run_plain(run, node, grads):
    """_run_node for a node with no hooks and no retain_grad and not a Function's, in a pass that captures nothing,
    with no observer and not in anomaly mode (the common case: the same results with fewer checks)."""
    if type(node) is AccumulateGrad:
        variable = node._variable()
        if variable is None or variable._hooks:
            return _run_node(run, node, grads, True)
        _accumulate(run, variable, grads[0])
        return ()
    result = node.op.run_backward(node, grads)
    if len(result) != len(node._next_edges):
        _check_count(node, result)
    metas = node._metas
    for i, g in enumerate(result):
        if g is not None and metas[i] is not None:
            shape, dtype = metas[i]
            a = g._array
            if a.shape != shape or (a.dtype is not dtype and a.dtype != dtype):
                result[i] = _fit(node, i, g, shape, dtype)
    return result


def _run_node(run, node, grads, execute):
    """Hooks, capture and the node itself; returns one gradient per input slot (or None when it did not run)."""
    accumulates = isinstance(node, AccumulateGrad)
    variable = node.variable if accumulates else None
    if accumulates and variable is None:
        return None  # the leaf is gone: nobody can read its gradient
    tensor_hooks = node._tensor_hooks
    if tensor_hooks or node._retained is not None or run.targets is not None or (variable is not None
                                                                                  and variable._hooks):
        _each_output(run, node, variable, grads)
    if not execute:
        return None
    if node._pre_hooks:
        for hook in list(node._pre_hooks.values()):
            new = hook(tuple(grads))
            if new is not None:
                grads = _replace(grads, new, "pre-hook", node)
    try:
        if variable is not None:
            _accumulate(run, variable, grads[0])
            result = []
        elif run.observed:  # each node's backward is a call the observers see
            device = next(g.device for g in grads if g is not None)
            result = observers.observed_backward("backward", getattr(node, "op", None), tuple(grads), device,
                                                lambda: node._apply(grads), node)
            _check_count(node, result)
        else:
            result = node._apply(grads)
            _check_count(node, result)
    except Exception as exc:
        if run.anomaly and node.trace:
            exc.add_note(f"Traceback of the forward call that created {node.name()} (anomaly mode):\n{node.trace}")
        raise
    if node._post_hooks:
        for hook in list(node._post_hooks.values()):
            new = hook(tuple(result), tuple(grads))
            if new is not None:
                result = _replace(result, new, "hook", node)
    for i, (g, meta) in enumerate(zip(result, node._metas if variable is None else ())):
        if g is None or meta is None:
            continue
        if node.user_backward:
            run.foreign.add(id(g._array))
        if g._array.shape != meta[0] or (g._array.dtype is not meta[1] and g._array.dtype != meta[1]):
            g = result[i] = _fit(node, i, g, *meta)
        if run.check_nan:
            _check_finite(node, i, g)
    return result


def _each_output(run, node, variable, grads):
    """The gradient of each output of ``node``: its tensor hooks (which may replace it in ``grads``), retain_grad,
    and autograd.grad's capture."""
    tensor_hooks = node._tensor_hooks
    for nr, g in enumerate(grads):
        if g is None:
            continue
        hooks = variable._hooks if variable is not None else tensor_hooks.get(nr) if tensor_hooks else None
        if hooks:
            g = grads[nr] = _call_tensor_hooks(hooks, g, run.foreign)
        if node._retained is not None and nr in node._retained and run.accumulate:
            kept = node._retained[nr]()
            if kept is not None:
                _store_grad(kept, g, run.foreign, run.create_graph)
        if run.targets is not None:
            for k in run.targets.get((id(node), nr), ()):
                run.captured[k] = g


def _call_tensor_hooks(hooks, grad, foreign):
    for hook in list(hooks.values()):
        new = hook(grad)
        if new is not None:
            if not isinstance(new, Tensor):
                raise TypeError(f"a tensor hook must return a Tensor or None, got {type(new).__name__}")
            if new.shape != grad.shape:
                raise RuntimeError(f"a tensor hook returned a gradient of shape {new.shape} for a tensor of shape "
                                   f"{grad.shape}")
            grad = new
            foreign.add(id(grad._array))
    return grad


def _replace(old, new, kind, node):
    new = list(new) if isinstance(new, (tuple, list)) else [new]
    if len(new) != len(old):
        raise RuntimeError(f"a {kind} of {node.name()} returned {len(new)} gradients, expected {len(old)}")
    return new


def _check_count(node, result):
    n = len(node._next_edges)
    if len(result) == n:
        return
    if len(result) < n or any(g is not None for g in result[n:]):
        raise RuntimeError(f"function {node.name()} returned an incorrect number of gradients (expected {n}, "
                           f"got {len(result)})")
    del result[n:]


def _fit(node, index, grad, shape, dtype):
    """Reduce a broadcast gradient to the input's shape and cast it to the input's dtype.

    A complex gradient reaching a real input keeps its real part: that is dL/dx for a real
    loss L (torch's convention: the gradient of a complex z is dL/dRe(z) + i dL/dIm(z)).
    """
    if _dt.is_complex(grad.dtype) and not _dt.is_complex(dtype):
        grad = grad.real
    if grad.shape != shape:
        fitted = sum_to(grad, shape) if not node.user_backward or grad.numel() == math.prod(shape) else None
        if fitted is None:
            raise RuntimeError(f"function {node.name()} returned an invalid gradient at index {index}: got shape "
                               f"{tuple(grad.shape)}, but expected a shape compatible with {tuple(shape)}")
        grad = fitted
    if grad.dtype != dtype:
        grad = grad.to(dtype)
    return grad


def sum_to(grad, shape):
    """The gradient of a tensor of ``shape`` that was broadcast to ``grad``'s shape: ``grad`` summed over the
    broadcast dims (None when ``shape`` does not broadcast to grad's shape)."""
    have = grad.shape
    extra = len(have) - len(shape)
    fits, kept = extra >= 0, ()  # kept: the dims of size 1 in shape that grad has wider
    for i, n in enumerate(shape if fits else ()):
        if n != have[i + extra]:
            if n != 1:
                fits = False
                break
            kept += (i + extra,)
    if not fits:
        return None if grad.numel() != math.prod(shape) else grad.reshape(shape)
    if not kept:  # only leading dims to drop (a bias's gradient): the sum has the shape already
        return grad.sum(tuple(range(extra)), False, grad.dtype) if extra else grad  # (by position: no binding)
    grad = grad.sum(tuple(range(extra)) + kept, True, grad.dtype)
    return grad.reshape(shape) if grad.shape != tuple(shape) else grad


def _check_finite(node, index, g):
    if bool(g.isnan().any().item()):  # NaN only, as torch: an inf gradient (sqrt at 0) is legitimate
        where = f"\nthe forward call of {node._label()} was made at:\n{node.trace}" if node.trace else ""
        raise RuntimeError(f"function {node._label()}Backward returned NaN values in its gradient "
                           f"{index}{where}")


# ---------------------------------------------------------------- leaves' .grad
def _accumulate(run, variable, grad):
    if not run.accumulate:
        return
    _store_grad(variable, grad, run.foreign, run.create_graph)
    if variable._post_acc_hooks:
        for hook in list(variable._post_acc_hooks.values()):
            hook(variable)


def _store_grad(leaf, g, foreign, create_graph):
    """Accumulate ``g`` into ``leaf.grad`` as torch does.

    The first gradient is kept as is only when its array is fresh: owned (not a
    view such as the zero-stride expand of a sum's gradient), contiguous, and
    not held by anyone else (a seed, a hook's result, another leaf's grad).
    Otherwise it is copied, so optimizers and the grad scaler can update .grad
    in place. Later gradients are added in place into the existing .grad.
    With create_graph the gradient is part of a graph and stays out of place.
    """
    grad = leaf._grad
    if create_graph or (grad is not None and grad.requires_grad):
        leaf.grad = g if grad is None else grad + g
        return
    a = g._array
    if grad is None:
        if a.base is not None or not a.flags.c_contiguous or id(a) in foreign:
            g = Tensor._wrap(a.copy())
        elif g.requires_grad:
            g = g.detach()
        foreign.add(id(g._array))
        leaf.grad = g  # (the setter refuses a hook's change of dtype, shape or device, as torch does)
    else:
        grad._array += a
        grad._bump_version()


# ---------------------------------------------------------------- entry points
def _tensors(value, what):
    kinds = (Tensor, GradientEdge) if what == "grad: inputs" else Tensor  # grad also takes GradientEdges
    if isinstance(value, kinds):
        return [value]
    items = list(value) if hasattr(value, "__iter__") and not isinstance(value, (str, bytes)) else [None]
    if all(isinstance(t, kinds) for t in items):  # any iterable: model.parameters() is a generator
        return items
    raise TypeError(f"{what} must be a Tensor or an iterable of Tensors, got {type(value).__name__}")


def _seeds(outputs, grad_outputs, who):
    """One gradient per output: given (Tensor or number) or ones for a one-element output."""
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    elif isinstance(grad_outputs, Tensor):
        grad_outputs = [grad_outputs]
    else:
        grad_outputs = list(grad_outputs)
    if len(grad_outputs) != len(outputs):
        raise RuntimeError(f"{who}: got {len(grad_outputs)} gradients for {len(outputs)} outputs")
    seeds = []
    for i, (o, g) in enumerate(zip(outputs, grad_outputs)):
        if g is None:
            if o.requires_grad and o.numel() != 1:
                raise RuntimeError(f"grad can be implicitly created only for scalar outputs; output {i} has shape "
                                   f"{o.shape}, so pass its gradient (gradient=/grad_outputs=) of that shape")
            g = Tensor._wrap(np.ones(o.shape, o._array.dtype)) if type(o._array) is np.ndarray else ones_like(o)
        elif not isinstance(g, Tensor):
            g = tensor(g, dtype=o.dtype, device=o.device)
        if g.shape != o.shape:
            raise RuntimeError(f"{who}: gradient has shape {g.shape}, but output {i} has shape {o.shape}")
        seeds.append(g)
    return seeds


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate the gradients of ``tensors`` (seeded with ``grad_tensors``) into the leaves' ``.grad``
    (torch.autograd.backward). With ``inputs``, only those tensors' ``.grad`` change."""
    tensors = _tensors(tensors, "backward: tensors")
    seeds = _seeds(tensors, grad_tensors, "backward")
    if inputs is not None:
        inputs = _tensors(inputs, "backward: inputs")
        if not inputs:
            raise RuntimeError("backward: inputs= was given but is empty")
        for i, t in enumerate(inputs):
            if not t.requires_grad:
                raise RuntimeError(f"backward: input {i} does not require grad")
    retain = create_graph if retain_graph is None else retain_graph
    run_backward(tensors, seeds, retain_graph=retain, create_graph=create_graph, inputs=inputs)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=None,
         is_grads_batched=False, materialize_grads=False):
    """The gradients of ``outputs`` with respect to ``inputs``, returned instead of accumulated
    (torch.autograd.grad). With create_graph=True they are themselves differentiable.

    An input that does not reach the outputs is an error unless ``allow_unused``
    (then its gradient is None) or ``materialize_grads`` (then zeros).
    """
    if is_grads_batched:
        raise NotImplementedError("grad: is_grads_batched=True (vmap over grad_outputs) is not supported; loop "
                                  "over the batch of grad_outputs instead")
    if materialize_grads and allow_unused is False:
        raise ValueError("grad: allow_unused must be True or not passed when materialize_grads=True")
    allow_unused = materialize_grads if allow_unused is None else allow_unused
    outputs = _tensors(outputs, "grad: outputs")
    inputs_list = _tensors(inputs, "grad: inputs")
    seeds = _seeds(outputs, grad_outputs, "grad")
    for i, t in enumerate(inputs_list):
        if type(t) is not GradientEdge and not t.requires_grad:
            raise RuntimeError(f"grad: input {i} (shape {t.shape}) does not require grad; mark it with "
                               "requires_grad=True")
    retain = create_graph if retain_graph is None else retain_graph
    result = run_backward(outputs, seeds, retain_graph=retain, create_graph=create_graph, inputs=inputs_list,
                          accumulate=False)
    for i, (t, g) in enumerate(zip(inputs_list, result)):
        if g is None:
            if not allow_unused:
                what = f"shape {t.shape}" if isinstance(t, Tensor) else t
                raise RuntimeError(f"the differentiated tensor at index {i} ({what}) appears to not have "
                                   "been used in the graph; set allow_unused=True if this is the desired behavior "
                                   "(its gradient is then None), or materialize_grads=True (zeros)")
            if materialize_grads:
                result[i] = zeros_like(t)
    return tuple(result)
