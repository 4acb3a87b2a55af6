"""Reverse-mode autodiff: walk the graph from the outputs in reverse topological order."""
from __future__ import annotations

from .. import dtypes as _dt
from ..tensor import Tensor
from . import grad_mode


def _topo_order(roots):
    """Nodes reachable from ``roots``, each after every node that consumes it."""
    order, seen = [], set()
    stack = [(n, False) for n in roots]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        node._check_alive()
        stack.append((node, True))
        for t in node.edges():
            if t is not None and t.grad_fn is not None and id(t.grad_fn) not in seen:
                stack.append((t.grad_fn, False))
    order.reverse()
    return order


def _fit(grad, shape, dtype):
    """Reduce a broadcast gradient to the input's shape and cast it to the input's dtype.

    A complex gradient reaching a real input keeps its real part: that is dL/dx for a real
    loss L (torch's convention: the gradient of a complex z is dL/dRe(z) + i dL/dIm(z)).
    """
    if grad.shape != shape:
        extra = grad.ndim - len(shape)
        axes = tuple(range(extra)) + tuple(i + extra for i, n in enumerate(shape)
                                           if n == 1 and grad.shape[i + extra] != 1)
        if axes:
            grad = grad.sum(dim=axes, keepdim=True, dtype=grad.dtype)
        if extra:
            grad = grad.reshape(shape)
        if grad.shape != shape:
            raise RuntimeError(f"gradient of shape {grad.shape} does not fit an input of shape {shape}")
    if _dt.is_complex(grad.dtype) and not _dt.is_complex(dtype):
        grad = grad.real
    if grad.dtype != dtype:
        grad = grad.to(dtype)
    return grad


def _add_output_grad(store, node, index, grad):
    """Add ``grad`` to what output ``index`` of ``node`` has received so far."""
    grads = store.get(id(node))
    if grads is None:
        grads = store[id(node)] = [None] * len(node.out_refs)
    grads[index] = grad if grads[index] is None else grads[index] + grad


def backward(outputs, grad_outputs, *, retain_graph=False, create_graph=False, inputs=None,
             allow_unused=True):
    """Run backward from ``outputs`` seeded with ``grad_outputs``.

    With ``inputs=None`` gradients accumulate into the ``.grad`` of leaves;
    otherwise the gradients of ``inputs`` are returned (autograd.grad). While a dispatch
    observer that sees backward watches (mp.amp.trace, mp.profiler, mp.amp.inspect), the pass
    and each node's backward are calls it sees (ops.dispatch.observed_backward).
    """
    from ..ops import dispatch  # (the ops package imports autograd: import it when backward runs)
    if dispatch.watching_backward():
        return dispatch.observed_backward(
            "backward pass", None, (outputs, grad_outputs), outputs[0].device if outputs else None,
            lambda: _backward(outputs, grad_outputs, retain_graph, create_graph, inputs, allow_unused, True))
    return _backward(outputs, grad_outputs, retain_graph, create_graph, inputs, allow_unused, False)


def _backward(outputs, grad_outputs, retain_graph, create_graph, inputs, allow_unused, observed):
    from ..ops import autocast, dispatch
    node_grads: dict[int, list] = {}
    leaf_grads: dict[int, object] = {}
    leaves: dict[int, object] = {}
    roots = []
    for out, g in zip(outputs, grad_outputs):
        if not out.requires_grad:
            raise RuntimeError("element of outputs does not require grad and has no grad_fn: "
                               "nothing to differentiate (did you call it under mp.no_grad()?)")
        if out.grad_fn is None:  # a leaf differentiated w.r.t. itself
            _accumulate(leaf_grads, id(out), g)
            leaves[id(out)] = out
        else:
            _add_output_grad(node_grads, out.grad_fn, out.output_nr, g)
            roots.append(out.grad_fn)
    wanted = {id(t): t for t in inputs} if inputs is not None else None
    captured = {}
    order = _topo_order(roots)
    anomaly = grad_mode.is_anomaly_enabled()
    # arrays that someone else may hold (seeds, hook results, custom backward results):
    # a leaf's .grad must never alias them (see _store_grad)
    foreign = {id(g.data) for g in grad_outputs}
    # backward runs every op in the dtypes forward saved, never under autocast
    with grad_mode.enable_grad() if create_graph else grad_mode.no_grad(), autocast.suspended():
        for node in order:
            grads = node_grads.pop(id(node), None)
            if grads is None:
                continue
            for i, ref in enumerate(node.out_refs):
                out = ref()
                if out is None or grads[i] is None:
                    continue
                if out._hooks:
                    grads[i] = _run_hooks(out, grads[i], foreign)
                if wanted is not None and id(out) in wanted:
                    captured[id(out)] = grads[i]
                if out._retains_grad and wanted is None:
                    _store_grad(out, grads[i], foreign, create_graph)
            if observed:
                result = dispatch.observed_backward("backward", node.op, tuple(grads), _device_of(grads),
                                                    lambda: _node_backward(node, grads), node)
            else:
                result = _node_backward(node, grads)
            edges = node.edges()
            if len(result) != len(edges):
                raise RuntimeError(f"backward of {node.name} returned {len(result)} gradients "
                                   f"for {len(edges)} inputs")
            for t, g in zip(edges, result):
                if t is None or g is None:
                    continue
                if node.user_backward:
                    foreign.add(id(g.data))
                if g.data.shape != t.data.shape or g.data.dtype != t.data.dtype:
                    g = _fit(g, t.data.shape, t.data.dtype)
                if anomaly:
                    _check_finite(node, g)
                if t.grad_fn is None:
                    _accumulate(leaf_grads, id(t), g)
                    leaves[id(t)] = t
                else:
                    _add_output_grad(node_grads, t.grad_fn, t.output_nr, g)
            if not retain_graph:
                node.release()
        for key, leaf in leaves.items():
            g = leaf_grads[key]
            if leaf._hooks:
                g = _run_hooks(leaf, g, foreign)
            if wanted is not None:
                if key in wanted:
                    captured[key] = g
            else:
                _store_grad(leaf, g, foreign, create_graph)
    if wanted is None:
        return None
    results = []
    for t in inputs:
        if id(t) not in captured and not allow_unused:
            raise RuntimeError("one of the differentiated tensors was not used to compute the outputs; "
                               "pass allow_unused=True to get None for it")
        results.append(captured.get(id(t)))
    return results


def _node_backward(node, grads):
    """Run one node's backward: one gradient (or None) per input edge, in node.edges() order."""
    result = node.op.backward(node, *grads)
    if not isinstance(result, (tuple, list)):
        result = (result,)
    return _flatten(result, node.args)


def _device_of(grads):
    return next(g.device for g in grads if g is not None)


def _accumulate(store, key, grad):
    prev = store.get(key)
    store[key] = grad if prev is None else prev + grad


def _store_grad(leaf, g, foreign, create_graph):
    """Accumulate ``g`` into ``leaf.grad`` as torch does.

    The first gradient is kept as is only when its array is fresh: owned (not a
    view such as the zero-stride expand of a sum's gradient), contiguous, and
    not held by anyone else (a seed, a hook's result, another leaf's grad).
    Otherwise it is copied, so optimizers and the grad scaler can update .grad
    in place. Later gradients are added in place into the existing .grad.
    With create_graph the gradient is part of a graph and stays out of place.
    """
    if create_graph or (leaf.grad is not None and leaf.grad.requires_grad):
        leaf.grad = g if leaf.grad is None else leaf.grad + g
        return
    a = g.data
    if leaf.grad is None:
        if a.base is not None or not a.flags.c_contiguous or id(a) in foreign:
            g = Tensor._wrap(a.copy())
        foreign.add(id(g.data))
        leaf.grad = g
    else:
        leaf.grad.data += a
        leaf.grad._bump_version()


def _flatten(grads, args):
    """Match a backward's per-arg results to the flattened input list (lists expand, missing trailing ones are None)."""
    flat = []
    for i, a in enumerate(args):
        g = grads[i] if i < len(grads) else None
        if isinstance(a, (list, tuple)):
            gs = g if g is not None else [None] * len(a)
            flat.extend(gs)
        else:
            flat.append(g)
    return flat


def _run_hooks(t, grad, foreign):
    for hook in t._hooks:
        new = hook(grad)
        if new is not None:
            grad = new
            foreign.add(id(grad.data))
    return grad


def _check_finite(node, g):
    if not bool(g.isfinite().all().item()):
        where = f"\nthe forward call of {node.name} was made at:\n{node.trace}" if node.trace else ""
        raise RuntimeError(f"function {node.name}Backward returned NaN or inf values in its gradient{where}")
