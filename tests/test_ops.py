"""Every registered op, driven by one case table (tests/op_cases/), plus op semantics and errors.

Each case builds float64 NumPy inputs, calls mixprec, and compares with the same
computation done in NumPy float64. The same table drives:
  * forward in float64 against NumPy (tight tolerance),
  * reverse mode: the gradient via mp.autograd.gradcheck (float64 finite differences),
    and for some cases the second derivative,
  * forward mode: each JVP against finite differences and against reverse mode
    (u . (J v) from forward mode equals (J^T u) . v from backward),
  * forward in float16 / bfloat16 against float64 on the rounded inputs,
on the CPU and, marked gpu, on CUDA (the ``device`` fixture). A registered op that
no case exercises, or a differentiable op without a backward or tangent rule,
fails test_every_registered_op_has_a_case / test_every_differentiable_op_has_both_rules.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

import mixprec as mp
import mixprec.nn.functional as F
from mixprec.autograd import forward_ad
from mixprec import observers
from op_cases import CASES, EPS

LOW = [pytest.param(mp.float16, id="float16"), pytest.param(mp.bfloat16, id="bfloat16")]

# The core ops a training loop is written with: each must stay registered and public (mp.<name>, and
# mp.nn.functional.<name> for those torch has there).
CORE_OPS = """add sub mul div neg pow exp log log1p expm1 sqrt rsqrt reciprocal abs sin cos tanh sigmoid relu
gelu softplus maximum minimum where clamp sum mean prod amax amin var cumsum matmul mm bmm mv dot addmm baddbmm
linear reshape view transpose permute squeeze unsqueeze expand flatten cat stack split __getitem__ index_put
scatter_add softmax log_softmax""".split()
NN_FUNCTIONAL = ["relu", "gelu", "softplus", "sigmoid", "linear", "softmax", "log_softmax"]



def _params(cases):
    return [pytest.param(c, id=c.id) for c in cases]


def _outputs(result):
    return list(result) if isinstance(result, (tuple, list)) else [result]


def _floating(t):
    return isinstance(t, mp.Tensor) and t.dtype in (mp.float16, mp.bfloat16, mp.float32, mp.float64)


# ----------------------------------------------------------------- coverage: the registry is the list
def test_every_registered_op_has_a_case():
    """Every op (aliases once) is dispatched by the forward of at least one case."""
    seen = set()

    class Seen:
        def enter(self, call):
            seen.add(call.op.name)

        def exit(self, call):
            pass
    for case in CASES:
        with observers.observe(Seen()):
            case.fn(*case.tensors(case.inputs()))
    missing = sorted(op.name for op in mp.ops.ops() if op.name not in seen)
    assert missing == [], f"registered ops no case exercises (add cases in tests/op_cases/): {missing}"


def test_opinfo_entries_still_missing_are_listed():
    """torch's OpInfo database (where torch is installed) names the ops mixprec has yet to implement: printed
    (pytest -rP shows it), not failed. What is checked: an entry whose name is a public mixprec function
    counts as implemented, so the listing never names what mixprec has."""
    pytest.importorskip("torch")
    import importlib.util
    import warnings
    from pathlib import Path
    spec = importlib.util.spec_from_file_location(
        "opinfo_coverage", Path(__file__).resolve().parent.parent / "tools" / "opinfo_coverage.py")
    oc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(oc)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        op_db = oc.load_op_db()
    applicable = [op for op in op_db if oc.applies(op)]
    missing = [oc.entry_id(op) for op in applicable if oc.mixprec_callable(op) is None]
    assert [m for m in missing if m.isidentifier() and callable(getattr(mp, m, None))] == []
    print(f"OpInfo entries mixprec does not implement yet ({len(missing)} of {len(applicable)}): "
          + ", ".join(missing))


def test_every_differentiable_op_has_both_rules():
    """A differentiable op needs a backward (reverse mode) and a tangent rule (forward mode), unless it is a
    composite, whose rules come from the ops it is built of."""
    lacking = [(op.name, [m for m, rule in (("backward", op.backward), ("tangent", op.tangent)) if rule is None])
               for op in mp.ops.ops() if op.differentiable and not op.composite]
    assert [(n, m) for n, m in lacking if m] == []


@pytest.mark.parametrize("name", CORE_OPS)
def test_core_op_is_registered_and_public(name):
    assert name in mp.ops.names()
    if name.isidentifier() and not name.startswith("_"):
        assert callable(getattr(mp, name))
    if name in NN_FUNCTIONAL:
        assert callable(getattr(F, name))


def test_nn_functional_lists_only_functional_ops():
    assert set(NN_FUNCTIONAL) <= set(dir(F))
    with pytest.raises(AttributeError, match="no function 'exp'"):
        F.exp


# ----------------------------------------------------------------- the drivers
@pytest.mark.parametrize("case", _params(CASES))
def test_forward_float64(case, device):
    values = case.inputs()
    out = _outputs(case.fn(*case.tensors(values, device)))
    ref = _outputs(case.ref(*values))
    assert len(out) == len(ref)
    for o, r in zip(out, ref):
        assert isinstance(o, mp.Tensor)
        assert o.device.type == device
        r = np.asarray(r)
        assert o.shape == r.shape
        if r.dtype.kind == "f":
            assert o.dtype == mp.float64
            np.testing.assert_allclose(o.numpy(), r, rtol=case.rtol64, atol=1e-12)
        else:  # masks and indices: exact, bool stays bool, integers are int64
            assert o.dtype == (mp.bool if r.dtype == np.bool_ else mp.int64)
            np.testing.assert_array_equal(o.numpy(), r)


@pytest.mark.parametrize("case", _params([c for c in CASES if c.grad]))
def test_gradcheck(case, device):
    inputs = case.tensors(case.inputs(), device, requires_grad=True)
    assert mp.autograd.gradcheck(case.fn, inputs)


@pytest.mark.parametrize("case", _params([c for c in CASES if c.second_order]))
def test_second_derivatives(case):
    """Backwards are built from Tensor ops, so they differentiate again."""
    inputs = case.tensors(case.inputs(), requires_grad=True)
    assert any(t.requires_grad for t in inputs if isinstance(t, mp.Tensor))

    def first_grad_sum(*xs):
        outs = [o for o in _outputs(case.fn(*xs)) if _floating(o)]
        grads = mp.autograd.grad(sum(o.sum() for o in outs), [x for x in xs if _floating(x) and x.requires_grad],
                                 create_graph=True)
        return sum((g * g).sum() for g in grads if g is not None)
    assert mp.autograd.gradcheck(first_grad_sum, inputs, atol=1e-4, rtol=1e-3)


def _directions(case, inputs):
    """A random float64 direction for each floating input (None for the others), seeded by the case."""
    rng = np.random.default_rng(len(case.id))
    return [mp.tensor(rng.standard_normal(x.shape), dtype=mp.float64) if _floating(x) else None for x in inputs]


def _jvp(case, inputs, directions):
    """The floating outputs and their tangents, by forward-mode AD."""
    with forward_ad.dual_level():
        duals = [x if v is None else forward_ad.make_dual(x, v) for x, v in zip(inputs, directions)]
        outs = [o for o in _outputs(case.fn(*duals)) if _floating(o)]
        unpacked = [forward_ad.unpack_dual(o) for o in outs]
    return [u.primal for u in unpacked], [u.tangent for u in unpacked]


@pytest.mark.parametrize("case", _params([c for c in CASES if c.grad]))
def test_forward_mode_matches_finite_differences(case):
    inputs = case.tensors(case.inputs())
    directions = _directions(case, inputs)
    primals, tangents = _jvp(case, inputs, directions)
    eps = 1e-6

    def shifted(sign):
        xs = [x if v is None else x + sign * eps * v for x, v in zip(inputs, directions)]
        return [o.numpy() for o in _outputs(case.fn(*xs)) if _floating(o)]
    plus, minus = shifted(1), shifted(-1)
    for out, t, p, m in zip(primals, tangents, plus, minus):
        numeric = (p - m) / (2 * eps)
        got = np.zeros(out.shape) if t is None else t.numpy()
        assert t is None or (t.shape == out.shape and t.dtype == out.dtype)
        np.testing.assert_allclose(got, numeric, rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("case", _params([c for c in CASES if c.grad]))
def test_forward_mode_matches_reverse_mode(case):
    """u . (J v) == (J^T u) . v: the two modes compute the same Jacobian."""
    inputs = case.tensors(case.inputs(), requires_grad=True)
    directions = _directions(case, inputs)
    _, tangents = _jvp(case, [x.detach() if _floating(x) else x for x in inputs], directions)
    outs = [o for o in _outputs(case.fn(*inputs)) if _floating(o)]
    rng = np.random.default_rng(1)
    us = [mp.tensor(rng.standard_normal(o.shape), dtype=mp.float64) for o in outs]
    forward = sum(float((u * t).sum()) for u, t in zip(us, tangents) if t is not None)
    wrt = [x for x in inputs if _floating(x)]
    grads = mp.autograd.grad(sum((u * o).sum() for u, o in zip(us, outs)), wrt, allow_unused=True)
    reverse = sum(float((g * v).sum()) for g, v in zip(grads, [v for v in directions if v is not None])
                  if g is not None)
    assert forward == pytest.approx(reverse, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("case", _params([c for c in CASES if c.lowp]))
def test_forward_low_precision(case, dtype, device):
    """Half-precision results agree with float64 math on the same (rounded) inputs.

    Ops compute in float32 (or exactly) and round once, so the error is about half
    an ulp of the output; see Case for the tolerance of ops that round intermediates.
    """
    values = case.inputs()
    tensors = case.tensors(values, device, dtype=dtype)
    rounded = [t.numpy().astype(np.float64) if _floating(t) else v for t, v in zip(tensors, values)]
    out = _outputs(case.fn(*tensors))
    ref = _outputs(case.ref(*rounded))
    eps = EPS[dtype]
    for o, r in zip(out, ref):
        r = np.asarray(r)
        if r.dtype.kind != "f":
            np.testing.assert_array_equal(o.numpy(), r)
            continue
        assert o.dtype == dtype
        got = o.numpy().astype(np.float64)
        spread = max(1.0, np.max(np.abs(r))) if r.size else 0.0
        tol = eps * (case.lowp_ulps * np.abs(r) + case.lowp_spread * spread) + 1e-30
        assert np.all(np.abs(got - r) <= tol), (got, r)


# ----------------------------------------------------------------- matmul family on half inputs
MATMUL_FAMILY = [
    ("matmul", lambda a, b: a @ b, [(8, 32), (32, 5)]),
    ("matmul-batched", mp.matmul, [(3, 4, 32), (32, 6)]),
    ("matmul-1d", mp.matmul, [(64,), (64,)]),
    ("mm", mp.mm, [(8, 32), (32, 5)]),
    ("bmm", mp.bmm, [(2, 4, 32), (2, 32, 3)]),
    ("mv", mp.mv, [(6, 48), (48,)]),
    ("dot", mp.dot, [(96,), (96,)]),
]


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("name,fn,shapes", MATMUL_FAMILY, ids=[m[0] for m in MATMUL_FAMILY])
def test_half_matmul_is_float32_accumulate_then_round(name, fn, shapes, dtype, device):
    """The tensor-core contract: half inputs, float32 accumulation, one rounding at the end."""
    rng = np.random.default_rng(7)
    a, b = (mp.tensor(rng.standard_normal(s), dtype=dtype, device=device) for s in shapes)
    out = fn(a, b)
    a32, b32 = a.numpy().astype(np.float32), b.numpy().astype(np.float32)
    expected = np.asarray(a32 @ b32).astype(dtype)
    assert out.dtype == dtype
    got_bits, want_bits = out.numpy().view(np.int16).astype(np.int32), expected.view(np.int16).astype(np.int32)
    if device == "cpu":
        np.testing.assert_array_equal(got_bits, want_bits)
    else:  # cuBLAS sums in another order: the float32 sum may differ in its last bits, so allow one ulp
        assert np.max(np.abs(got_bits - want_bits)) <= 1
    # and that is within a K-dependent tolerance of the float64 product of the same inputs
    exact = a32.astype(np.float64) @ b32.astype(np.float64)
    assert np.all(np.abs(out.numpy().astype(np.float64) - exact) <= EPS[dtype] * np.abs(exact) + 1e-5 * shapes[0][-1])


@pytest.mark.parametrize("dtype", LOW)
def test_half_fused_matmul_ops_round_once(dtype):
    """addmm / baddbmm / linear add their bias in float32 before the single rounding (as torch's CPU GEMM)."""
    rng = np.random.default_rng(3)
    c, a, b = (mp.tensor(rng.standard_normal(s), dtype=dtype) for s in [(8, 5), (8, 32), (32, 5)])
    f = [t.numpy().astype(np.float32) for t in (c, a, b)]
    np.testing.assert_array_equal(mp.addmm(c, a, b, beta=0.5, alpha=2.0).numpy(),
                                  (np.float32(0.5) * f[0] + np.float32(2.0) * (f[1] @ f[2])).astype(dtype))
    w, bias = b.T.contiguous(), c[0]
    np.testing.assert_array_equal(F.linear(a, w, bias).numpy(), (f[1] @ f[2] + f[0][0]).astype(dtype))
    bc, ba, bb = (mp.tensor(rng.standard_normal(s), dtype=dtype) for s in [(2, 3, 4), (2, 3, 16), (2, 16, 4)])
    g = [t.numpy().astype(np.float32) for t in (bc, ba, bb)]
    np.testing.assert_array_equal(mp.baddbmm(bc, ba, bb).numpy(), (g[0] + g[1] @ g[2]).astype(dtype))


@pytest.mark.parametrize("dtype", LOW)
def test_half_reductions_accumulate_in_float32(dtype):
    """A float16 sum of 4096 ones stays exact; accumulating in float16 itself would stall at 2048."""
    x = mp.ones(4096, dtype=dtype)
    assert x.sum().item() == 4096.0
    assert x.mean().item() == 1.0
    assert x.cumsum(0)[-1].item() == 4096.0


# ----------------------------------------------------------------- specific gradient semantics
def test_amax_splits_gradient_between_ties(device):
    x = mp.tensor([[1.0, 3.0, 3.0], [2.0, 0.0, 2.0]], device=device, requires_grad=True)
    x.amax(dim=1).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 0.5, 0.5], [0.5, 0, 0.5]])


def test_maximum_splits_gradient_on_ties(device):
    a = mp.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    b = mp.tensor([1.0, 5.0, 0.0], device=device, requires_grad=True)
    mp.maximum(a, b).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [0.5, 0.0, 1.0])
    np.testing.assert_array_equal(b.grad.numpy(), [0.5, 1.0, 0.0])


def test_relu_gradient_at_zero_is_zero(device):
    x = mp.tensor([-1.0, 0.0, 2.0], device=device, requires_grad=True)
    mp.relu(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0, 1.0])


def test_getitem_gradient_accumulates_repeated_rows(device):
    x = mp.zeros(3, 2, device=device, requires_grad=True)
    x[mp.tensor([0, 2, 0, 0], device=device)].sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[3, 3], [0, 0], [1, 1]])


def test_index_put_without_accumulate_blocks_gradient_of_overwritten_slots(device):
    x = mp.ones(4, device=device, requires_grad=True)
    v = mp.tensor([5.0, 6.0], device=device, requires_grad=True)
    y = mp.index_put(x, (mp.tensor([1, 3], device=device),), v)
    np.testing.assert_array_equal(y.numpy(), [1, 5, 1, 6])
    (y * mp.tensor([1.0, 2.0, 3.0, 4.0], device=device)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1, 0, 3, 0])
    np.testing.assert_array_equal(v.grad.numpy(), [2, 4])


def test_index_put_accumulate_sums_repeated_indices(device):
    x = mp.zeros(3, device=device)
    y = mp.index_put(x, (mp.tensor([0, 0, 2, 0], device=device),), mp.tensor([1.0, 2.0, 3.0, 4.0], device=device),
                     accumulate=True)
    np.testing.assert_array_equal(y.numpy(), [7, 0, 3])
    np.testing.assert_array_equal(x.numpy(), [0, 0, 0])  # out of place


def test_scatter_add_repeated_indices_and_grad(device):
    x = mp.zeros(3, device=device, requires_grad=True)
    src = mp.tensor([1.0, 2.0, 3.0, 4.0], device=device, requires_grad=True)
    idx = mp.tensor([2, 2, 0, 2], device=device)
    y = mp.scatter_add(x, 0, idx, src)
    np.testing.assert_array_equal(y.numpy(), [3, 0, 7])
    (y * mp.tensor([10.0, 20.0, 30.0], device=device)).sum().backward()
    np.testing.assert_array_equal(src.grad.numpy(), [30, 30, 10, 30])
    np.testing.assert_array_equal(x.grad.numpy(), [10, 20, 30])


def test_second_derivatives_of_nonlinear_ops(device):
    """Backwards are written with Tensor ops, so they differentiate again (gradgradcheck)."""
    rng = np.random.default_rng(0)
    for fn in (mp.tanh, mp.sigmoid, mp.exp, lambda t: t.log_softmax(dim=-1), mp.gelu,
               lambda t: (t * t).softmax(0), lambda t: t.var(), lambda t: t.prod()):
        x = mp.tensor(rng.uniform(0.2, 1.0, (3,)), dtype=mp.float64, device=device, requires_grad=True)

        def first(t, fn=fn):
            return mp.autograd.grad(fn(t).sum(), t, create_graph=True)[0]
        assert mp.autograd.gradcheck(first, (x,))


# ----------------------------------------------------------------- dtypes of results
def test_integer_division_gives_float32(device):
    out = mp.tensor([1, 2, 3], device=device) / mp.tensor([2, 2, 2], device=device)
    assert out.dtype == mp.float32
    np.testing.assert_array_equal(out.numpy(), [0.5, 1.0, 1.5])
    assert (2 / mp.tensor([4], device=device)).dtype == mp.float32


def test_integer_sum_counts_in_int64(device):
    assert mp.tensor([True, True, False], device=device).sum().dtype == mp.int64
    assert mp.tensor([1, 2], dtype=mp.int32, device=device).sum().dtype == mp.int64


def test_comparisons_give_bool_and_no_graph(device):
    x = mp.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    for out in (x < 2, x <= 2, x > 2, x >= 2, x == 2, x != 2, 2 < x):
        assert out.dtype == mp.bool and out.grad_fn is None and not out.requires_grad
    np.testing.assert_array_equal((x > 1.5).numpy(), [False, True, True])
    np.testing.assert_array_equal((2 > x).numpy(), [True, False, False])


# ----------------------------------------------------------------- bad input: clear errors, never raw NumPy ones
def _x():
    return mp.ones(2, 3)


ERRORS = [
    # broadcasting failures name the op and both shapes (one mechanism for every elementwise op)
    ("add", lambda: mp.tensor([1, 2]) + mp.ones(3), RuntimeError, r"add: shapes \(2,\) and \(3,\) cannot be broadcast"),
    ("sub", lambda: _x() - mp.ones(2), RuntimeError, r"sub: shapes \(2, 3\) and \(2,\)"),
    ("mul", lambda: mp.mul(_x(), mp.ones(4, 1, 2)), RuntimeError, r"mul: shapes \(2, 3\) and \(4, 1, 2\)"),
    ("div", lambda: _x() / mp.ones(4), RuntimeError, r"div: shapes \(2, 3\) and \(4,\)"),
    ("rdiv", lambda: mp.ones(4).__rtruediv__(_x()), RuntimeError, r"__rtruediv__: shapes"),
    ("pow", lambda: _x() ** mp.ones(2), RuntimeError, r"pow: shapes \(2, 3\) and \(2,\)"),
    ("maximum", lambda: mp.maximum(_x(), mp.ones(5)), RuntimeError, r"maximum: shapes \(2, 3\) and \(5,\)"),
    ("where", lambda: mp.where(mp.ones(2) > 0, _x(), mp.ones(3)), RuntimeError,
     r"where: shapes \(2,\), \(2, 3\) and \(3,\)"),
    ("clamp", lambda: _x().clamp(mp.zeros(4)), RuntimeError, r"clamp: shapes \(2, 3\) and \(4,\)"),
    ("eq", lambda: _x() == mp.ones(2), RuntimeError, r"eq: shapes \(2, 3\) and \(2,\)"),
    ("add_", lambda: mp.ones(3).add_(_x()), RuntimeError, r"add_: a value of shape \(2, 3\) cannot be written"),
    # matrix products name both shapes and the op
    ("matmul", lambda: _x() @ _x(), RuntimeError, r"matmul: shapes \(2, 3\) and \(2, 3\) cannot be multiplied"),
    ("matmul-batch", lambda: mp.ones(2, 3, 4) @ mp.ones(5, 4, 3), RuntimeError, r"batch dimensions"),
    ("matmul-0d", lambda: mp.tensor(1.0) @ _x(), RuntimeError, r"matmul: .*0-d"),
    ("mm", lambda: mp.mm(_x(), mp.ones(3)), RuntimeError, r"mm: shapes \(2, 3\) and \(3,\)"),
    ("bmm", lambda: mp.bmm(mp.ones(2, 2, 3), mp.ones(3, 3, 2)), RuntimeError,
     r"bmm: shapes \(2, 2, 3\) and \(3, 3, 2\)"),
    ("mv", lambda: mp.mv(_x(), mp.ones(2)), RuntimeError, r"mv: shapes \(2, 3\) and \(2,\)"),
    ("dot", lambda: mp.dot(mp.ones(3), mp.ones(4)), RuntimeError, r"dot: shapes \(3,\) and \(4,\)"),
    ("linear", lambda: F.linear(_x(), mp.ones(4, 2)), RuntimeError, r"linear: input of shape \(2, 3\).*\(4, 2\)"),
    ("linear-bias", lambda: F.linear(_x(), mp.ones(4, 3), mp.ones(3)), RuntimeError, r"bias of shape \(3,\)"),
    ("addmm", lambda: mp.addmm(mp.ones(3, 3), _x(), mp.ones(3, 4)), RuntimeError, r"addmm: .*\(3, 3\).*\(2, 4\)"),
    ("matmul-dtypes", lambda: mp.ones(2, 2, dtype=mp.float16) @ mp.ones(2, 2), TypeError,
     r"matmul: .*same dtype, got float16 and float32"),
    # shape ops
    ("reshape", lambda: _x().reshape(4, 2), RuntimeError,
     r"reshape: shape \(4, 2\) is invalid for an input of shape \(2, 3\)"),
    ("view", lambda: _x().T.view(6), RuntimeError, r"view: cannot view .* use reshape"),
    ("expand", lambda: _x().expand(4, 3), RuntimeError, r"expand: cannot expand shape \(2, 3\) to \(4, 3\)"),
    ("cat", lambda: mp.cat([_x(), mp.ones(3, 3)], dim=1), RuntimeError, r"cat: shapes \(2, 3\) and \(3, 3\)"),
    ("stack", lambda: mp.stack([_x(), mp.ones(2, 2)]), RuntimeError, r"stack: shapes \(2, 3\) and \(2, 2\)"),
    ("permute", lambda: _x().permute(0, 0), ValueError, r"permute: dims \(0, 0\)"),
    ("split", lambda: _x().split([1, 1], dim=1), ValueError, r"split: sections \[1, 1\] do not add up to the size 3"),
    ("index_put", lambda: mp.index_put(mp.zeros(4), (mp.tensor([0, 1]),), mp.ones(3)), ValueError,
     r"index_put: .*\(3,\).*\(2,\)"),
    ("index_put-oob", lambda: mp.index_put(mp.zeros(4), (mp.tensor([5]),), mp.ones(1)), IndexError,
     r"index_put: index 5 is out of bounds"),
    ("scatter_add-oob", lambda: mp.scatter_add(mp.zeros(3), 0, mp.tensor([5]), mp.ones(1)), IndexError,
     r"scatter_add: index 5 is out of bounds"),
    ("scatter_add-src", lambda: mp.scatter_add(mp.zeros(3), 0, mp.tensor([0, 1]), mp.ones(1)), RuntimeError,
     r"scatter_add: index of shape \(2,\) must not be larger than src"),
    ("scatter_add-float-index", lambda: mp.scatter_add(mp.zeros(3), 0, mp.tensor([0.0]), mp.ones(1)), TypeError,
     r"scatter_add: index must be an integer tensor"),
    ("getitem", lambda: _x()[5], IndexError, r"__getitem__: .*\(tensor of shape \(2, 3\)\)"),
    # dims out of range name the op
    *[(f"dim-{name}", fn, IndexError, rf"{name}: dim .* out of range for a tensor with 2 dimensions")
      for name, fn in [("sum", lambda: _x().sum(2)), ("mean", lambda: _x().mean(-3)), ("amax", lambda: _x().amax(5)),
                       ("var", lambda: _x().var(2)), ("cumsum", lambda: _x().cumsum(2)),
                       ("softmax", lambda: _x().softmax(2)), ("log_softmax", lambda: _x().log_softmax(-3)),
                       ("transpose", lambda: _x().transpose(0, 2)), ("squeeze", lambda: _x().squeeze(3)),
                       ("unsqueeze", lambda: _x().unsqueeze(4)), ("flatten", lambda: _x().flatten(2)),
                       ("split", lambda: _x().split(1, dim=2)), ("cat", lambda: mp.cat([_x(), _x()], dim=2)),
                       ("unbind", lambda: _x().unbind(2))]],
    ("unbind-0d", lambda: mp.tensor(1.0).unbind(), IndexError, r"unbind: a 0-d tensor has no dim"),
    # argument errors
    ("where-cond", lambda: mp.where(mp.ones(2), mp.ones(2), mp.ones(2)), TypeError, r"where: condition must be a bool"),
    ("clamp-none", lambda: _x().clamp(), ValueError, r"clamp: at least one of min and max"),
    ("gelu-approximate", lambda: _x().gelu(approximate="erf"), ValueError, r"gelu: approximate must be"),
    ("softmax-no-dim", lambda: _x().softmax(), TypeError, r"softmax: pass dim="),
    ("softmax-int", lambda: mp.tensor([1, 2]).softmax(0), TypeError, r"softmax: needs a floating input"),
    ("mean-int", lambda: mp.tensor([1, 2]).mean(), TypeError, r"mean: needs a floating input"),
    ("var-int", lambda: mp.tensor([1, 2]).var(), TypeError, r"var: needs a floating input"),
    ("neg-bool", lambda: -mp.tensor([True]), RuntimeError, r"neg: .*bool.*logical_not"),
    ("too-many-args", lambda: mp.exp(_x(), 1), TypeError, r"exp\(\) takes at most 1 positional arguments \(input\)"),
    ("operand-str", lambda: _x() + "a", TypeError, r"unsupported operand type\(s\) for \+: 'Tensor' and 'str'"),
    ("operand-none", lambda: _x() * None, TypeError, r"unsupported operand"),
    ("function-str", lambda: mp.add(_x(), "a"), TypeError, r"add: expected a Tensor or a number, got str"),
]


@pytest.mark.parametrize("fn,exc,match", [pytest.param(f, e, m, id=i) for i, f, e, m in ERRORS])
def test_bad_input_raises_a_clear_error(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()


def test_integer_inputs_of_float_math_compute_in_float32():
    """exp/sin/sqrt/... of an int or bool tensor are float32 (torch), never float64; relu/abs keep ints."""
    i = mp.tensor([1, 4])
    for fn in (mp.exp, mp.log, mp.sqrt, mp.rsqrt, mp.sin, mp.cos, mp.tanh, mp.sigmoid, mp.log1p, mp.expm1,
               mp.reciprocal, mp.gelu, mp.softplus, mp.silu):
        assert fn(i).dtype == mp.float32, fn
    np.testing.assert_allclose(mp.sqrt(i).numpy(), [1.0, 2.0])
    assert mp.log(mp.tensor([True])).dtype == mp.float32
    assert mp.relu(mp.tensor([-1, 2])).tolist() == [0, 2] and mp.relu(mp.tensor([-1, 2])).dtype == mp.int64
    assert mp.tensor([-3], dtype=mp.int32).abs().dtype == mp.int32


def test_ops_accept_numpy_arrays_and_scalars_as_data():
    x = mp.ones(3, dtype=mp.float16)
    assert (x * np.float64(2.0)).dtype == mp.float16  # NumPy scalars are weak like Python ones
    out = x + np.full(3, 2.0, dtype=np.float32)  # an array is a tensor operand
    assert out.dtype == mp.float32 and out.tolist() == [3.0, 3.0, 3.0]
    assert mp.where(mp.tensor([True, False]), 1.0, 0.0).tolist() == [1.0, 0.0]
    assert mp.exp(0.0).item() == 1.0 and mp.exp(0.0).dtype == mp.float32


# ----------------------------------------------------------------- broadcasting, property-based
def _unbroadcast(x, shape):
    """Sum x over the dims that broadcasting added or stretched, back to ``shape``."""
    x = x.sum(axis=tuple(range(x.ndim - len(shape)))) if x.ndim > len(shape) else x
    return x.sum(axis=tuple(i for i, n in enumerate(shape) if n == 1), keepdims=True).reshape(shape)


BINARY_GRADS = {  # op -> (forward, d out / d a, d out / d b), all in NumPy
    "add": (np.add, lambda a, b: np.ones_like(a * b), lambda a, b: np.ones_like(a * b)),
    "mul": (np.multiply, lambda a, b: b + 0 * a, lambda a, b: a + 0 * b),
    "div": (np.divide, lambda a, b: 1 / b + 0 * a, lambda a, b: -a / (b * b)),
}


@settings(max_examples=40, deadline=None)
@given(shapes=mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3),
       name=st.sampled_from(sorted(BINARY_GRADS)))
def test_broadcasting_forward_and_gradients(shapes, name):
    """Any broadcastable shape pair: the result has the broadcast shape and each input gets a
    gradient of its own shape, the sum over the copies broadcasting made."""
    (sa, sb), result = shapes.input_shapes, shapes.result_shape
    rng = np.random.default_rng(0)
    a, b = rng.uniform(0.5, 2.0, sa), rng.uniform(0.5, 2.0, sb)
    ta = mp.tensor(a, dtype=mp.float64, requires_grad=True)
    tb = mp.tensor(b, dtype=mp.float64, requires_grad=True)
    fwd, da, db = BINARY_GRADS[name]
    out = getattr(mp, name)(ta, tb)
    assert out.shape == result
    np.testing.assert_allclose(out.numpy(), fwd(a, b), rtol=1e-12)
    out.sum().backward()
    assert ta.grad.shape == sa and tb.grad.shape == sb
    np.testing.assert_allclose(ta.grad.numpy(), _unbroadcast(np.broadcast_to(da(a, b), result), sa), rtol=1e-12)
    np.testing.assert_allclose(tb.grad.numpy(), _unbroadcast(np.broadcast_to(db(a, b), result), sb), rtol=1e-12)


def test_registry_introspection():
    names = mp.ops.names()
    assert names == sorted(names)
    for ref_name in ("mm", "matmul", "__matmul__", "linear", "log_softmax", "softmax", "addmm", "bmm"):
        assert ref_name in names
    P = mp.ops.CastPolicy
    assert mp.ops.policy("mm", "cuda") is P.LOWER_PRECISION_FP and mp.ops.policy("mm", "cpu") is P.LOWER_PRECISION_FP
    assert mp.ops.policy("log_softmax", "cuda") is P.FP32 and mp.ops.policy("log_softmax", "cpu") is None
    assert mp.ops.policy("mv", "cpu") is None and mp.ops.policy("dot", "cuda") is P.PROMOTE
    assert mp.ops.policy("add", "cuda") is None
    assert mp.ops.get("__matmul__") is mp.ops.get("matmul")
    with pytest.raises(KeyError, match="no op named 'nope'"):
        mp.ops.get("nope")
    with pytest.raises(ValueError, match="device_type"):
        mp.ops.policy("mm", "tpu")



@pytest.mark.gpu
@pytest.mark.parametrize("case", [c for c in CASES if sum(isinstance(m(np.random.default_rng(0)), np.ndarray)
                                                           for m in c.makers) >= 2], ids=lambda c: c.id)
def test_a_cpu_tensor_meeting_a_cuda_tensor_names_the_op_and_both_devices(case):
    """Every case with two tensor inputs, one of them left on the CPU: mixprec's device error naming the op's
    devices, never a raw CuPy or NumPy one."""
    values = case.inputs()
    tensors = case.tensors(values, "cuda")
    first = next(i for i, t in enumerate(tensors) if isinstance(t, mp.Tensor))
    tensors[first] = tensors[first].cpu()
    with pytest.raises(RuntimeError, match=r"expected all tensors on one device, got (cuda:0 and cpu|cpu and cuda:0)"):
        case.fn(*tensors)
