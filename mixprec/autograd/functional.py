"""autograd.grad and gradcheck."""
from __future__ import annotations

import numpy as np

from . import engine


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=True):
    """Gradients of outputs w.r.t. inputs, returned instead of accumulated into .grad.

    With create_graph=True the returned gradients are themselves differentiable
    (higher-order derivatives).
    """
    from ..tensor import Tensor, ones_like
    single = isinstance(outputs, Tensor)
    outputs = [outputs] if single else list(outputs)
    inputs_list = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    elif isinstance(grad_outputs, Tensor):
        grad_outputs = [grad_outputs]
    seeds = []
    for o, g in zip(outputs, grad_outputs):
        if g is None:
            if o.numel() != 1:
                raise RuntimeError(f"grad can be implicitly created only for scalar outputs; pass grad_outputs "
                                   f"for the output of shape {o.shape}")
            g = ones_like(o)
        seeds.append(g)
    for t in inputs_list:
        if not t.requires_grad:
            raise RuntimeError("one of the inputs does not require grad; mark it with requires_grad=True")
    retain = create_graph if retain_graph is None else retain_graph
    return tuple(engine.backward(outputs, seeds, retain_graph=retain, create_graph=create_graph,
                                 inputs=inputs_list, allow_unused=allow_unused))


def gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True):
    """Compare backward's gradients with central finite differences.

    Inputs that require grad should be float64: in lower precision the finite
    differences drown in rounding error. Checks every input element against every
    output element (so keep the tensors small).
    """
    from ..tensor import Tensor, tensor
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    diff = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    if not diff:
        raise ValueError("gradcheck: no input requires grad")
    for i in diff:
        if inputs[i].dtype != np.float64:
            raise TypeError(f"gradcheck: input {i} is {inputs[i].dtype.name}; use float64 inputs "
                            "(finite differences are meaningless in lower precision; for a complex input, pass its "
                            "real and imaginary parts and build it with mp.complex)")

    def run(args):
        out = fn(*args)
        return out if isinstance(out, (tuple, list)) else (out,)

    outs = [o for o in run(inputs) if isinstance(o, Tensor) and o.requires_grad]
    if any(o.dtype.kind == "c" for o in outs):
        raise TypeError("gradcheck: fn returns a complex tensor; return mp.view_as_real(out) (or its real and "
                        "imaginary parts) so that each real component is checked")
    for k, out in enumerate(outs):
        for i in diff:
            x = inputs[i]
            # analytic: one backward per output element gives one row of the Jacobian
            analytic = np.zeros((out.numel(), x.numel()))
            for j in range(out.numel()):
                seed = np.zeros(out.numel())
                seed[j] = 1.0
                outs_now = [o for o in run(inputs) if isinstance(o, Tensor) and o.requires_grad]
                g = grad(outs_now[k], [x], grad_outputs=tensor(seed.reshape(out.shape), dtype=out.dtype,
                                                                  device=out.device), allow_unused=True)[0]
                if g is not None:
                    analytic[j] = g.numpy().reshape(-1)
            # numeric: central differences, perturbing x's memory in place (grad mode stays
            # on, so fn may itself call autograd.grad: that is how 2nd derivatives are checked)
            numeric = np.zeros_like(analytic)
            base = x.data.copy()
            for e in range(x.numel()):
                at = np.unravel_index(e, x.shape)
                orig = x.data[at].item()
                x.data[at] = orig + eps
                plus = run(inputs)[k].numpy().astype(np.float64).reshape(-1)
                x.data[at] = orig - eps
                minus = run(inputs)[k].numpy().astype(np.float64).reshape(-1)
                x.data[at] = orig
                numeric[:, e] = (plus - minus) / (2 * eps)
            x.data[...] = base
            if not np.allclose(analytic, numeric, atol=atol, rtol=rtol, equal_nan=False):
                if raise_exception:
                    bad = np.unravel_index(np.argmax(np.abs(analytic - numeric)), analytic.shape)
                    raise AssertionError(
                        f"gradcheck: Jacobian mismatch for output {k} w.r.t. input {i}: at (out {bad[0]}, "
                        f"in {bad[1]}) analytic {analytic[bad]:.6g} vs numeric {numeric[bad]:.6g}\n"
                        f"analytic:\n{analytic}\nnumeric:\n{numeric}")
                return False
    return True
