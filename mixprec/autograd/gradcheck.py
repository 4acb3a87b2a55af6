"""gradcheck and gradgradcheck: derivatives against central finite differences (torch.autograd.gradcheck).

The Jacobian of ``fn`` at ``inputs`` is computed three ways: numerically,
(f(x + eps e_j) - f(x - eps e_j)) / 2 eps column by column; by reverse mode, row
by row (one backward per output element); and, with ``check_forward_ad``, by
forward mode, column by column (one dual pass per input element). They must
agree within ``atol + rtol * |numeric|``. ``fast_mode`` compares one random
projection v^T J u instead of whole Jacobians (one backward and two function
evaluations per pair of output and input).

Inputs that require grad must be float64: in lower precision the finite
differences drown in rounding error. Keep the tensors small.
"""
from __future__ import annotations

import numpy as np

from .. import backend
from ..tensor import Tensor, tensor
from . import engine, forward_ad, grad_mode


class GradcheckError(RuntimeError, AssertionError):
    """A derivative disagrees with finite differences (a RuntimeError, as in torch; also an AssertionError,
    so tests may catch it as a failed assertion)."""


def _outputs(result):
    return result if isinstance(result, (tuple, list)) else (result,)


def _differentiable(outs):
    return [k for k, o in enumerate(outs) if isinstance(o, Tensor) and o.is_floating_point()]


def gradcheck(fn, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, check_forward_ad=False,
              check_backward_ad=True, check_undefined_grad=True, fast_mode=False):
    """Check the derivatives of ``fn`` at ``inputs``; True when they agree (else GradcheckError, or False with
    raise_exception=False). check_undefined_grad is accepted for torch compatibility (None gradients are
    always treated as zeros here)."""
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    diff = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    if not diff:
        raise ValueError("gradcheck: no input requires grad (at least one Tensor input needs requires_grad=True)")
    for i in diff:
        if inputs[i].dtype != np.float64:
            raise TypeError(f"gradcheck: input {i} is {inputs[i].dtype.name}; use float64 inputs "
                            "(finite differences are meaningless in lower precision; for a complex input, pass its "
                            "real and imaginary parts and build it with mp.complex)")
    if not (check_forward_ad or check_backward_ad):
        raise ValueError("gradcheck: check_forward_ad and check_backward_ad are both False: nothing to check")

    def run(args):
        with grad_mode.enable_grad():
            return _outputs(fn(*args))
    outs = run(inputs)
    if any(isinstance(o, Tensor) and o.dtype.kind == "c" for o in outs):
        raise TypeError("gradcheck: fn returns a complex tensor; return mp.view_as_real(out) (or its real and "
                        "imaginary parts) so that each real component is checked")
    keep = _differentiable(outs)
    try:
        for k in keep:
            for i in diff:
                if fast_mode:
                    _check_projection(run, inputs, k, i, eps, atol, rtol, check_forward_ad, check_backward_ad)
                else:
                    _check_jacobian(run, inputs, outs[k], k, i, eps, atol, rtol, check_forward_ad,
                                    check_backward_ad)
    except GradcheckError:
        if raise_exception:
            raise
        return False
    return True


def _numeric(run, inputs, k, i, eps, direction=None):
    """Central differences of output k with respect to input i: the Jacobian (out.numel, x.numel), or
    J @ direction when a direction (shaped like x) is given."""
    x = inputs[i]
    base = x._array.copy()
    xp = backend.array_module(base)
    columns = [direction] if direction is not None else range(x.numel())
    result = []
    try:
        for e in columns:
            step = np.zeros(x.shape) if direction is None else direction
            if direction is None:
                step.reshape(-1)[e] = 1.0
            step = xp.asarray(step)  # x's device: CuPy refuses a NumPy operand
            x._array[...] = base + eps * step
            plus = run(inputs)[k].numpy().astype(np.float64).reshape(-1)
            x._array[...] = base - eps * step
            minus = run(inputs)[k].numpy().astype(np.float64).reshape(-1)
            result.append((plus - minus) / (2 * eps))
    finally:
        x._array[...] = base
    return np.stack(result, axis=1)


def _reverse_rows(run, inputs, k, i, seeds):
    """One vector-Jacobian product per seed (shaped like output k): rows of seed^T J for input i."""
    x = inputs[i]
    rows = []
    for seed in seeds:
        out = run(inputs)[k]
        if not out.requires_grad:
            rows.append(np.zeros(x.numel()))
            continue
        g = engine.grad(out, [x], grad_outputs=tensor(seed, dtype=out.dtype, device=out.device),
                        allow_unused=True)[0]
        rows.append(np.zeros(x.numel()) if g is None else g.numpy().astype(np.float64).reshape(-1))
    return np.stack(rows)


def _forward_columns(run, inputs, k, i, directions):
    """One Jacobian-vector product per direction (shaped like input i), by forward mode: columns of J u."""
    x = inputs[i]
    cols = []
    for u in directions:
        with forward_ad.dual_level():
            args = list(inputs)
            args[i] = forward_ad.make_dual(x, tensor(u, dtype=x.dtype, device=x.device))
            out = run(args)[k]
            t = forward_ad.unpack_dual(out).tangent
        cols.append(np.zeros(out.numel()) if t is None else t.numpy().astype(np.float64).reshape(-1))
    return np.stack(cols, axis=1)


def _check_jacobian(run, inputs, out, k, i, eps, atol, rtol, check_forward_ad, check_backward_ad):
    x = inputs[i]
    numeric = _numeric(run, inputs, k, i, eps)
    if check_backward_ad:
        seeds = [np.eye(out.numel())[j].reshape(out.shape) for j in range(out.numel())]
        _compare(_reverse_rows(run, inputs, k, i, seeds), numeric, k, i, "backward", atol, rtol)
    if check_forward_ad:
        directions = [np.eye(x.numel())[e].reshape(x.shape) for e in range(x.numel())]
        _compare(_forward_columns(run, inputs, k, i, directions), numeric, k, i, "forward", atol, rtol)


def _check_projection(run, inputs, k, i, eps, atol, rtol, check_forward_ad, check_backward_ad):
    x, out = inputs[i], run(inputs)[k]
    rng = np.random.default_rng(k * 1009 + i)
    u = rng.standard_normal(x.shape)
    v = rng.standard_normal(out.shape)
    numeric = v.reshape(-1) @ _numeric(run, inputs, k, i, eps, direction=u)[:, 0]
    if check_backward_ad:
        analytic = _reverse_rows(run, inputs, k, i, [v])[0] @ u.reshape(-1)
        _compare(np.array([[analytic]]), np.array([[numeric]]), k, i, "backward (fast mode: v^T J u)", atol, rtol)
    if check_forward_ad:
        analytic = v.reshape(-1) @ _forward_columns(run, inputs, k, i, [u])[:, 0]
        _compare(np.array([[analytic]]), np.array([[numeric]]), k, i, "forward (fast mode: v^T J u)", atol, rtol)


def _compare(analytic, numeric, k, i, mode, atol, rtol):
    if np.allclose(analytic, numeric, atol=atol, rtol=rtol, equal_nan=False):
        return
    bad = np.unravel_index(np.argmax(np.abs(analytic - numeric)), analytic.shape)
    raise GradcheckError(f"gradcheck: Jacobian mismatch for output {k} with respect to input {i} ({mode} mode): "
                         f"at (out {bad[0]}, in {bad[1]}) analytic {analytic[bad]:.6g} vs numeric "
                         f"{numeric[bad]:.6g}\nanalytic:\n{analytic}\nnumeric:\n{numeric}")


def gradgradcheck(fn, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
                  check_fwd_over_rev=False, check_rev_over_rev=True, fast_mode=False, seed=0):
    """Check second derivatives: gradcheck of the map (inputs, v) -> v^T J(inputs) (the gradients of
    ``fn``'s outputs weighted by ``grad_outputs``; random float64 ones, requiring grad, by default)."""
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    diff = [t for t in inputs if isinstance(t, Tensor) and t.requires_grad]
    with grad_mode.enable_grad():
        outs = [o for o in _outputs(fn(*inputs)) if isinstance(o, Tensor) and o.requires_grad]
    if grad_outputs is None:
        rng = np.random.default_rng(seed)
        grad_outputs = tuple(tensor(rng.standard_normal(o.shape), dtype=o.dtype, device=o.device,
                                    requires_grad=True) for o in outs)
    grad_outputs = tuple(_outputs(grad_outputs))
    if len(grad_outputs) != len(outs):
        raise ValueError(f"gradgradcheck: {len(grad_outputs)} grad_outputs for {len(outs)} differentiable outputs")
    n = len(inputs)

    def first_derivatives(*args):
        xs, vs = args[:n], args[n:]
        ys = [o for o in _outputs(fn(*xs)) if isinstance(o, Tensor) and o.requires_grad]
        wrt = [t for t in xs if isinstance(t, Tensor) and t.requires_grad]
        grads = engine.grad(ys, wrt, grad_outputs=list(vs), create_graph=True, allow_unused=True)
        return tuple(g for g in grads if g is not None)
    if not diff:
        raise ValueError("gradgradcheck: no input requires grad")
    return gradcheck(first_derivatives, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception, check_forward_ad=check_fwd_over_rev,
                     check_backward_ad=check_rev_over_rev, fast_mode=fast_mode)
