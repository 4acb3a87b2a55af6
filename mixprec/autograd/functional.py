"""The functional API (torch.autograd.functional): derivatives of a function of tensors.

``func`` takes tensors (one, or a tuple of them as ``inputs``) and returns a
tensor or a tuple of tensors. Results mirror those structures, as torch's do:

    vjp(func, inputs, v)        (outputs, v^T J)           shaped like inputs     reverse mode
    jvp(func, inputs, v)        (outputs, J v)             shaped like outputs    forward mode
    jacobian(func, inputs)      J[i][j] = d out_i / d in_j, shape out_i.shape + in_j.shape
    hessian(func, inputs)       H[i][j] = d^2 f / d in_i d in_j  (func returns one element)
    vhp(func, inputs, v)        (output, v^T H)                                   reverse over reverse
    hvp(func, inputs, v)        (output, H v)                                     forward over reverse

Tuples of tuples appear only where both sides are tuples; a single tensor
input/output gives a tensor (or a tuple over the other side). Inputs are
never modified: each is replaced by a fresh tensor that requires grad, so
tensors the function captures from outside are treated as constants.
``create_graph=True`` keeps the results differentiable (with respect to the
original inputs and ``v``); ``strict=True`` raises when an output does not
depend on an input instead of returning zeros. ``vectorize`` is accepted and
ignored (mixprec has no vmap: the Jacobian is built one row or column at a
time). Unlike torch, ``jacobian(strategy="forward-mode")`` supports
create_graph and strict, and jvp uses forward mode directly (torch uses the
double-backward trick).
"""
from __future__ import annotations

from ..tensor import Tensor
from ..creation import ones_like, zeros_like
from . import engine, forward_ad, grad_mode

__all__ = ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"]


# ---------------------------------------------------------------- structure helpers
def _as_tuple(value, what, fn_name):
    """(was it a tuple, a tuple of Tensors); a clear TypeError for anything else."""
    is_tuple = isinstance(value, tuple)
    items = value if is_tuple else (value,)
    for i, el in enumerate(items):
        if not isinstance(el, Tensor):
            where = f"the value at index {i} has type {type(el).__name__}" if is_tuple else \
                f"the given {what} has type {type(el).__name__}"
            raise TypeError(f"the {what} given to {fn_name} must be either a Tensor or a tuple of Tensors, but {where}")
    return is_tuple, items


def _untuple(items, is_tuple):
    return items if is_tuple else items[0]


def _prepare(inputs, create_graph):
    """Fresh tensors standing for the inputs: differentiable views when create_graph (so results connect to
    the caller's tensors), detached leaves that require grad otherwise."""
    out = []
    for t in inputs:
        if create_graph and t.requires_grad:
            out.append(t.view(t.shape))
        elif t.is_floating_point():
            out.append(t.detach().requires_grad_(True))
        else:
            out.append(t.detach())
    return tuple(out)


def _inputs_and_v(inputs, v, create_graph, fn_name):
    """(was inputs a tuple, prepared inputs, v matching them) for the functions that take a v per input."""
    inputs_tuple, inputs = _as_tuple(inputs, "inputs", fn_name)
    inputs = _prepare(inputs, create_graph)
    v = _check_v(v, inputs, inputs_tuple, fn_name, "the input to the user-provided function")
    return inputs_tuple, inputs, v if create_graph else tuple(u.detach() for u in v)


def _finish(tensors, create_graph):
    return tuple(t.detach() if not create_graph and isinstance(t, Tensor) else t for t in tensors)


def _check_v(v, reference, ref_is_tuple, fn_name, who):
    """v as a tuple matching ``reference`` (sizes), or the vector of ones torch allows for one element."""
    if v is None:
        if len(reference) != 1 or reference[0].numel() != 1:
            raise RuntimeError(f"{fn_name}: the vector v can only be None if {who} is a single Tensor with a single "
                               "element")
        return (ones_like(reference[0]),)
    _, v = _as_tuple(v, "v", fn_name)
    if len(v) != len(reference):
        if ref_is_tuple:
            raise RuntimeError(f"{fn_name}: v is a tuple of invalid length: should be {len(reference)} but got "
                               f"{len(v)}")
        raise RuntimeError(f"{fn_name}: the given v should contain a single Tensor")
    for i, (a, b) in enumerate(zip(v, reference)):
        if a.shape != b.shape:
            prefix = f"entry {i} in " if ref_is_tuple else ""
            raise RuntimeError(f"{fn_name}: {prefix}v has invalid size: should be {b.shape} but got {a.shape}")
    return v


def _check_outputs(outputs, strict, fn_name):
    if strict:
        for i, o in enumerate(outputs):
            if not o.requires_grad:
                raise RuntimeError(f"{fn_name}: output {i} of the user-provided function does not require "
                                   "gradients; in strict mode the outputs must be computed in a differentiable "
                                   "manner from the inputs")


def _grads(outputs, inputs, grad_outputs, create_graph):
    """autograd.grad over the outputs that require grad; None for inputs they do not reach."""
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    if not pairs:
        return [None] * len(inputs)
    return list(engine.grad([o for o, _ in pairs], list(inputs), [g for _, g in pairs], retain_graph=True,
                            create_graph=create_graph, allow_unused=True))


def _fill(grads, refs, strict, create_graph, fn_name, message):
    out = []
    for i, (g, ref) in enumerate(zip(grads, refs)):
        if g is None:
            if strict:
                raise RuntimeError(f"{fn_name}: {message.format(i=i)}; this is not allowed in strict mode")
            g = zeros_like(ref)
        elif strict and create_graph and not g.requires_grad:
            raise RuntimeError(f"{fn_name}: the derivative with respect to input {i} is independent of the inputs; "
                               "this is not allowed in strict mode with create_graph=True")
        out.append(g)
    return out


# ---------------------------------------------------------------- reverse mode
def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T J): the vector-Jacobian product at ``inputs`` (reverse mode)."""
    with grad_mode.enable_grad():
        inputs_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        inputs = _prepare(inputs, create_graph)
        out_tuple, outputs = _as_tuple(func(*inputs), "outputs of the user-provided function", "vjp")
        _check_outputs(outputs, strict, "vjp")
        v = _check_v(v, outputs, out_tuple, "vjp", "the output of the user-provided function")
    with grad_mode.set_grad_enabled(create_graph or grad_mode.is_grad_enabled()):
        grads = _grads(outputs, inputs, v, create_graph)
        grads = _fill(grads, inputs, strict, create_graph, "vjp",
                      "the output of the user-provided function is independent of input {i}")
    return _untuple(_finish(outputs, create_graph), out_tuple), _untuple(_finish(grads, create_graph), inputs_tuple)


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T H): the vector-Hessian product of a function with one output element."""
    with grad_mode.enable_grad():
        inputs_tuple, inputs, v = _inputs_and_v(inputs, v, create_graph, "vhp")
        output = _scalar_output(func(*inputs), strict, "vhp")
        jac = _grads([output], inputs, [None], create_graph=True)
        _check_jacobian_depends(jac, strict)
        grads = _grads([j for j in jac if j is not None], inputs, [u for j, u in zip(jac, v) if j is not None],
                       create_graph) if any(j is not None and j.requires_grad for j in jac) else [None] * len(inputs)
    grads = _fill(grads, inputs, strict, create_graph, "vhp", "the jacobian of the user-provided function is "
                  "independent of input {i}")
    return _finish((output,), create_graph)[0], _untuple(_finish(grads, create_graph), inputs_tuple)


def _scalar_output(out, strict, fn_name):
    if isinstance(out, tuple) or not isinstance(out, Tensor):
        raise RuntimeError(f"the function given to {fn_name} should return a single Tensor")
    _check_outputs((out,), strict, fn_name)
    if out.numel() != 1:
        raise RuntimeError(f"the Tensor returned by the function given to {fn_name} should contain a single element")
    return out


def _check_jacobian_depends(jac, strict):
    if strict:
        for i, j in enumerate(jac):
            if j is None:
                raise RuntimeError(f"the output of the user-provided function is independent of input {i}; this is "
                                   "not allowed in strict mode")
            if not j.requires_grad:
                raise RuntimeError(f"while computing the hessian, found that the jacobian of the user-provided "
                                   f"function with respect to input {i} is independent of the input; this is not "
                                   "allowed in strict mode")


# ---------------------------------------------------------------- forward mode
def _dual_pass(func, inputs, directions):
    """func on duals of ``inputs`` moving along ``directions`` (None: that input is held constant):
    (is the output a tuple, outputs, tangents -- None for an output that does not depend on them)."""
    with forward_ad.dual_level():
        duals = tuple(forward_ad.make_dual(x, u.to(x.dtype)) if u is not None and x.is_floating_point() else x
                      for x, u in zip(inputs, directions))
        out_tuple, outs = _as_tuple(func(*duals), "outputs of the user-provided function", "jvp")
        unpacked = [forward_ad.unpack_dual(o) for o in outs]
    return out_tuple, tuple(u.primal for u in unpacked), [u.tangent for u in unpacked]


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J v): the Jacobian-vector product at ``inputs``, in one forward-mode pass."""
    with grad_mode.enable_grad():
        inputs_tuple, inputs, v = _inputs_and_v(inputs, v, create_graph, "jvp")
        out_tuple, outputs, tangents = _dual_pass(func, inputs, v)
        _check_outputs(outputs, strict, "jvp")
    tangents = _fill(tangents, outputs, strict, create_graph, "jvp",
                     "output {i} of the user-provided function is independent of the inputs")
    return _untuple(_finish(outputs, create_graph), out_tuple), _untuple(_finish(tangents, create_graph), out_tuple)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), H v): the Hessian-vector product of a function with one output element, by forward
    mode over reverse mode (a dual pass through the gradient's computation)."""
    with grad_mode.enable_grad():
        inputs_tuple, inputs, v = _inputs_and_v(inputs, v, create_graph, "hvp")
        with forward_ad.dual_level():
            duals = tuple(forward_ad.make_dual(x, u.to(x.dtype)) for x, u in zip(inputs, v))
            output = _scalar_output(func(*duals), strict, "hvp")
            jac = _grads([output], duals, [None], create_graph=True)
            _check_jacobian_depends(jac, strict)
            tangents = [None if j is None else forward_ad.unpack_dual(j).tangent for j in jac]
            output = forward_ad.unpack_dual(output).primal
    tangents = _fill(tangents, inputs, strict, create_graph, "hvp", "the hessian of the user-provided function is "
                     "independent of input {i}")
    return _finish((output,), create_graph)[0], _untuple(_finish(tangents, create_graph), inputs_tuple)


# ---------------------------------------------------------------- whole matrices
def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``: one backward per output element ("reverse-mode", fewer
    outputs than inputs) or one dual pass per input element ("forward-mode", fewer inputs)."""
    if strategy not in ("forward-mode", "reverse-mode"):
        raise ValueError(f"jacobian: strategy must be 'forward-mode' or 'reverse-mode', got {strategy!r} (with more "
                         "outputs than inputs 'forward-mode' tends to be faster, otherwise 'reverse-mode')")
    with grad_mode.enable_grad():
        inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _prepare(inputs, create_graph)
        if strategy == "forward-mode":
            out_tuple, outputs, table = _jacobian_forward(func, inputs, create_graph, strict)
        else:
            out_tuple, outputs, table = _jacobian_reverse(func, inputs, create_graph, strict)
    rows = tuple(_untuple(_finish(row, create_graph), inputs_tuple) for row in table)
    return _untuple(rows, out_tuple)


def _jacobian_reverse(func, inputs, create_graph, strict):
    out_tuple, outputs = _as_tuple(func(*inputs), "outputs of the user-provided function", "jacobian")
    _check_outputs(outputs, strict, "jacobian")
    table = []
    for i, out in enumerate(outputs):
        flat = out.reshape(-1)
        columns = [[] for _ in inputs]
        for e in range(out.numel()):
            grads = _grads([flat[e]], inputs, [None], create_graph) if out.requires_grad else [None] * len(inputs)
            for j, (g, x) in enumerate(zip(grads, inputs)):
                if g is None:
                    if strict:
                        raise RuntimeError(f"jacobian: output {i} of the user-provided function is independent of "
                                           f"input {j}; this is not allowed in strict mode")
                    g = zeros_like(x)
                elif strict and create_graph and not g.requires_grad:
                    raise RuntimeError(f"jacobian: the jacobian of the user-provided function is independent of "
                                       f"input {j}; this is not allowed in strict mode when create_graph=True")
                columns[j].append(g)
        table.append(tuple(_stacked(col, out.shape, x.shape, x) for col, x in zip(columns, inputs)))
    return out_tuple, outputs, table


def _jacobian_forward(func, inputs, create_graph, strict):
    from ..ops.shape import stack
    outputs, out_tuple, per_input = None, False, []
    for j, x in enumerate(inputs):
        columns = []
        for e in range(x.numel()):
            direction = zeros_like(x)
            direction._array.reshape(-1)[e] = 1
            out_tuple, outputs, tangents = _dual_pass(func, inputs, [direction if k == j else None
                                                                     for k in range(len(inputs))])
            columns.append(tangents)
        if outputs is None:  # an empty input: still learn the outputs' shapes
            out_tuple, outputs, _ = _dual_pass(func, inputs, [None] * len(inputs))
        _check_outputs(outputs, strict, "jacobian")
        per_input.append(columns)
    table = []
    for i, out in enumerate(outputs):
        row = []
        for j, x in enumerate(inputs):
            cols = [c[i] for c in per_input[j]]
            if strict and cols and all(t is None for t in cols):
                raise RuntimeError(f"jacobian: output {i} of the user-provided function is independent of input {j}; "
                                   "this is not allowed in strict mode")
            cols = [zeros_like(out) if t is None else t for t in cols]
            if cols:
                jac = stack([c.reshape(-1) for c in cols], dim=1).reshape(out.shape + x.shape)
            else:
                jac = zeros_like(out).reshape(-1)[:0].reshape(out.shape + x.shape)
            row.append(jac)
        table.append(tuple(row))
    return out_tuple, outputs, table


def _stacked(rows, out_shape, in_shape, like):
    from ..ops.shape import stack
    if rows:
        return stack(rows, dim=0).reshape(tuple(out_shape) + tuple(in_shape))
    return Tensor._wrap(like._array.reshape(-1)[:0].reshape(tuple(out_shape) + tuple(in_shape)) * 0)


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False, outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a function with one output element: H[i][j] = d^2 f / d in_i d in_j, each of shape
    in_i.shape + in_j.shape. The inner Jacobian is reverse mode; the outer one ``outer_jacobian_strategy``."""
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise ValueError(f"hessian: outer_jacobian_strategy must be 'forward-mode' or 'reverse-mode', got "
                         f"{outer_jacobian_strategy!r}")
    inputs_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")

    def gradient(*xs):
        out = _scalar_output(func(*xs), strict, "hessian")
        jac = _grads([out.reshape(())], xs, [None], create_graph=True)
        _check_jacobian_depends(jac, strict)
        return tuple(zeros_like(x) if g is None else g for g, x in zip(jac, xs))
    res = jacobian(gradient, inputs, create_graph=create_graph, strict=strict, strategy=outer_jacobian_strategy)
    return _untuple(tuple(_untuple(row, inputs_tuple) for row in res), inputs_tuple)
