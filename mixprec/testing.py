"""mp.testing: tools to test ops and their autocast policies, mixprec's own and yours.

- :func:`make_tensor` — a random tensor of a shape, dtype and device.
- :func:`assert_close` — compare with tolerances that fit the dtype (torch.testing's defaults).
- :func:`check_autocast` — run an op under autocast and check it against its policy.
- Hypothesis strategies (hypothesis is imported only when you call them):
  :func:`autocast_dtypes`, :func:`device_types`, :func:`input_dtypes`, :func:`autocast_cases`.

Property-test the policy of your own op in a few lines::

    from hypothesis import given, settings
    import mixprec as mp
    from mixprec.testing import autocast_cases, check_autocast, make_tensor

    @settings(max_examples=50, deadline=None)
    @given(autocast_cases(n_inputs=2))
    def test_my_op_follows_its_policy(case):
        args = [make_tensor((3, 4), d, device=case.device_type) for d in case.input_dtypes]
        check_autocast("my_op", args, device_type=case.device_type, dtype=case.autocast_dtype)
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import backend as _be
from .backend import devices
from . import dtypes as _dt
from .amp import autocast_mode as _am
from .ops import autocast as _ac
from .ops import dispatch as _dispatch
from .ops import registry as _reg
from .ops.autocast import CastPolicy
from .tensor import Tensor, tensor
from .autograd import grad as _grad, grad_mode as _gm
from .backend.availability import is_cuda_available
from .amp.trace import trace

__all__ = ["make_tensor", "assert_close", "default_tolerance", "check_autocast", "AutocastCase",
           "autocast_dtypes", "device_types", "input_dtypes", "autocast_cases"]

# torch.testing.assert_close's defaults: (rtol, atol) per dtype
_TOLERANCE = {_dt.float16: (1e-3, 1e-5), _dt.bfloat16: (1.6e-2, 1e-5), _dt.float32: (1.3e-6, 1e-5),
              _dt.float64: (1e-7, 1e-7)}


def default_tolerance(*dtypes) -> tuple[float, float]:
    """(rtol, atol) for comparing values of these dtypes: the loosest of them; exact for non-floats."""
    tols = [_TOLERANCE.get(_dt.as_dtype(d), (0.0, 0.0)) for d in dtypes]
    return max(t[0] for t in tols), max(t[1] for t in tols)


def _to_numpy64(x):
    if isinstance(x, Tensor):
        x = x.numpy()
    a = devices.to_device(x, devices.CPU) if _be.is_array(x) else np.asarray(x)  # (a CuPy array comes to the host)
    return a.astype(np.float64) if a.dtype.kind in "fV" or a.dtype in _dt.LOW_PRECISION else a


def assert_close(actual, expected, *, rtol=None, atol=None, check_dtype=True, msg=""):
    """Assert |actual - expected| <= atol + rtol * |expected| elementwise (NaNs must match).

    Without rtol/atol, the tolerances of the dtypes involved (default_tolerance).
    With check_dtype, tensors must also have the same dtype.
    """
    dts = [x.dtype for x in (actual, expected) if isinstance(x, Tensor)]
    if check_dtype and len(dts) == 2 and dts[0] != dts[1]:
        raise AssertionError(f"dtypes differ: {dts[0].name} vs {dts[1].name}. {msg}")
    if rtol is None or atol is None:
        r, a = default_tolerance(*dts) if dts else (1.3e-6, 1e-5)
        rtol = r if rtol is None else rtol
        atol = a if atol is None else atol
    x, y = _to_numpy64(actual), _to_numpy64(expected)
    if x.shape != y.shape:
        raise AssertionError(f"shapes differ: {x.shape} vs {y.shape}. {msg}")
    if x.dtype.kind in "biu" and y.dtype.kind in "biu":
        bad = x != y
    else:
        with np.errstate(invalid="ignore"):
            bad = ~((np.abs(x - y) <= atol + rtol * np.abs(y)) | (np.isnan(x) & np.isnan(y)) | (x == y))
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise AssertionError(f"{int(bad.sum())} of {bad.size} elements differ beyond rtol={rtol:g}, atol={atol:g}; "
                             f"first at {idx}: {x[idx]!r} vs {y[idx]!r}. {msg}")


def make_tensor(shape, dtype, device="cpu", *, low=-2.0, high=2.0, requires_grad=None, seed=None):
    """A tensor of uniform values in [low, high) (integers: [low, high)), on device.

    requires_grad defaults to True for floating dtypes, so gradients can be checked.
    """
    dtype = _dt.as_dtype(dtype)
    rng = np.random.default_rng(seed)
    if _dt.is_floating(dtype):
        data = rng.uniform(low, high, size=shape)
    elif dtype == _dt.bool_:
        data = rng.random(size=shape) < 0.5
    else:
        data = rng.integers(int(np.ceil(low)), int(np.ceil(high)), size=shape)
    if requires_grad is None:
        requires_grad = _dt.is_floating(dtype)
    return tensor(data, dtype=dtype, device=device, requires_grad=requires_grad)


# ---------------------------------------------------------------- the policy checker
def _data_tensors(op, args):
    return [t for _, _, t in _dispatch.data_tensors(op, list(args))]


def _replace_data(op, args, new_tensors):
    """args with the data tensors replaced, in order, by new_tensors."""
    args = list(args)
    it = iter(new_tensors)
    for i, j, _ in _dispatch.data_tensors(op, args):
        if j is None:
            args[i] = next(it)
        else:
            args[i] = list(args[i])
            args[i][j] = next(it)
    return args


def _outputs(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _run(op, args, kwargs):
    try:
        return _dispatch.dispatch(op, tuple(args), dict(kwargs)), None
    except Exception as exc:  # the comparison below needs to know *that* it failed, and how
        return None, exc


def check_autocast(op, args, kwargs=None, *, device_type=None, dtype=None, expect_policy="any",
                   check_grads=True):
    """Check that ``op(*args, **kwargs)`` under autocast does what its policy says.

    expect_policy: the policy you mean the op to have on device_type (a
    CastPolicy, its name, or None); checked first, together with the output
    rule of that policy: on inputs without float64, a floating result is in the
    region's dtype (lower_precision_fp), float32 (fp32), or the widest floating
    input (promote). The default "any" skips this.

    Then, for the op's data inputs (its ``promote`` positions):
      1. the dtypes autocast gives them are ``mp.amp.resolve_dtypes(...)``'s,
         so float64 and integer inputs are never cast;
      2. the result equals the op run outside autocast on inputs cast to those
         dtypes beforehand (same dtype, same bits) — or both raise the same
         error type (a banned op raises under autocast only). A composite op
         without a rule is compared inside the region (its inner ops are autocast);
      3. outside autocast (and in an ``enabled=False`` region inside one) no
         input is cast;
      4. with check_grads, backward gives every input that requires grad a
         gradient of its own dtype.
    Returns the resolved dtypes. Raises AssertionError naming the broken rule.
    """
    op = op if isinstance(op, _reg.Op) else _reg.get(op)
    kwargs = dict(kwargs or {})
    tensors = _data_tensors(op, args)
    if device_type is None:
        device_type = tensors[0].device.type if tensors else "cpu"
    lower = _ac.DEFAULT_DTYPES[device_type] if dtype is None else _am.autocast(device_type, dtype).fast_dtype
    in_dtypes = tuple(t.dtype for t in tensors)
    rule = _ac.rule_for(op, device_type)
    if _dispatch.explicit_dtype_or_out(op, tuple(args), kwargs):
        rule = None  # an explicit dtype= or out= is respected: the op is not autocast
    if not (isinstance(expect_policy, str) and expect_policy == "any"):
        want = _ac.as_policy(expect_policy)
        have = _am.op_policy(op.name, device_type)
        if have is not want:
            raise AssertionError(f"{op.name}: policy on {device_type!r} is {have}, expected {want}")
    banned = rule is CastPolicy.BANNED
    expected = in_dtypes if banned or rule is None else _am.resolve_dtypes(op, device_type, lower, in_dtypes)
    for d_in, d_out in zip(in_dtypes, expected):
        if d_in not in _ac.ELIGIBLE and d_out != d_in:
            raise AssertionError(f"{op.name}: resolve_dtypes casts a {d_in.name} input to {d_out.name}; float64 "
                                 "and non-floating inputs must never be cast")

    with trace() as t, _am.autocast(device_type, dtype=lower):
        out, err = _run(op, args, kwargs)
    if banned:
        if not isinstance(err, RuntimeError):
            raise AssertionError(f"{op.name} is banned under autocast({device_type!r}) but did not raise "
                                 f"RuntimeError (got {err!r})")
        return expected
    top = [r for r in t.records if r.name == op.name and r.depth == 0]
    if err is None:
        if not top:
            raise AssertionError(f"{op.name}: the call was not dispatched through the registry")
        rec = top[-1]
        if rule is not None and rec.policy is None:
            raise AssertionError(f"{op.name}: autocast did not apply its rule {rule!r}")
        if rule is None and (rec.policy is not None or any(r.cast_for == op.name for r in t.records)):
            raise AssertionError(f"{op.name}: has no rule on {device_type!r}, but autocast cast its inputs")

    # 2. same as running on pre-cast inputs outside autocast. (A composite with no rule of its own
    #    has its inner ops autocast, so its reference runs in the region too: only its top level is checked.)
    with _gm.no_grad():
        pre = [x if x.dtype == d else x.detach().to(d) for x, d in zip(tensors, expected)]
    inner_autocast = op.composite and rule is None
    with _am.autocast(device_type, dtype=lower, enabled=inner_autocast):
        ref, ref_err = _run(op, _replace_data(op, args, pre), kwargs)
    if (err is None) != (ref_err is None) or (err is not None and type(err) is not type(ref_err)):
        raise AssertionError(f"{op.name}: under autocast the call {'raised ' + repr(err) if err else 'worked'}, "
                             f"but on inputs pre-cast to {[d.name for d in expected]} it "
                             f"{'raised ' + repr(ref_err) if ref_err else 'worked'}")
    if err is not None:
        return expected
    ran = [r for r in t.records if r.name == op.name and r.depth == 0][-1]
    if not (isinstance(expect_policy, str) and expect_policy == "any"):
        _check_output_rule(op.name, rule, lower, in_dtypes, expected, _outputs(out))
    for o, r in zip(_outputs(out), _outputs(ref)):
        if getattr(o, "dtype", None) != getattr(r, "dtype", None):
            raise AssertionError(f"{op.name}: output dtype under autocast is {o.dtype.name}, but "
                                 f"{r.dtype.name} on the pre-cast inputs (ran in {[d.name for d in ran.run_dtypes]})")
        if hasattr(o, "numpy") and not _same_values(o.numpy(), r.numpy()):
            raise AssertionError(f"{op.name}: values under autocast differ from the op on pre-cast inputs")

    # 3. nothing is cast outside autocast, nor in an enabled=False region inside one
    for region in (None, "disabled"):
        with trace() as t_off:
            if region is None:
                _run(op, args, kwargs)
            else:
                with _am.autocast(device_type, dtype=lower), _am.autocast(device_type, enabled=False):
                    _run(op, args, kwargs)
        if t_off.casts or any(r.policy is not None for r in t_off.records):
            where = "outside a region" if region is None else "in an enabled=False region"
            raise AssertionError(f"{op.name}: autocast cast inputs {where}")

    # 4. gradients arrive in each leaf's dtype
    if check_grads:
        outs = [o for o in _outputs(out) if getattr(o, "requires_grad", False)]
        leaves = [x for x in _dispatch.tensors_in(args) if x.requires_grad]
        if outs and leaves:
            total = sum(o.float().sum() for o in outs)
            grads = _grad(total, leaves, allow_unused=True)
            for x, g in zip(leaves, grads):
                if g is not None and g.dtype != x.dtype:
                    raise AssertionError(f"{op.name}: a {x.dtype.name} input got a {g.dtype.name} gradient")
    return expected


def _check_output_rule(name, rule, lower, in_dtypes, expected, outs):
    """The output dtype each policy promises, for floating results of calls without float64 inputs."""
    if _dt.float64 in in_dtypes or rule is None:
        return
    if rule is CastPolicy.PROMOTE:
        floating = [d for d in expected if d in _ac.ELIGIBLE]
        want = floating[0] if floating else None
    elif rule is CastPolicy.FP32:
        want = _dt.float32
    elif rule is CastPolicy.LOWER_PRECISION_FP:
        want = lower
    else:  # a fixed dtype
        want = rule
    for o in outs:
        d = getattr(o, "dtype", None)
        if want is not None and d is not None and _dt.is_floating(d) and d != want:
            raise AssertionError(f"{name}: under its {getattr(rule, 'value', rule)} rule the result should be "
                                 f"{want.name}, got {d.name}")


def _same_values(a, b):
    """Bit-identical, or equal as float64 with NaNs in the same places."""
    if a.shape != b.shape:
        return False
    if a.tobytes() == b.tobytes():
        return True
    return a.dtype.kind not in "biu" and np.array_equal(_to_numpy64(a), _to_numpy64(b), equal_nan=True)




# ---------------------------------------------------------------- hypothesis strategies
def _st():
    try:
        from hypothesis import strategies
    except ImportError:
        raise ImportError("mp.testing's strategies need hypothesis: pip install hypothesis "
                          "(or mixprec[test])") from None
    return strategies


FLOATING = (_dt.float16, _dt.bfloat16, _dt.float32, _dt.float64)


def autocast_dtypes():
    """float16 or bfloat16: the dtypes an autocast region can lower to."""
    return _st().sampled_from(_ac.LOWER_DTYPES)


def device_types(cuda=None):
    """"cpu", plus "cuda" when a GPU is usable (or when cuda=True)."""
    with_cuda = is_cuda_available() if cuda is None else cuda
    return _st().sampled_from(("cpu", "cuda") if with_cuda else ("cpu",))


def input_dtypes(integers=False):
    """A dtype for one input: the four floating dtypes, plus int64 with integers=True."""
    return _st().sampled_from(FLOATING + ((_dt.int64,) if integers else ()))


class AutocastCase(NamedTuple):
    """One drawn situation: where it runs, the region's dtype and each input's dtype."""
    device_type: str
    autocast_dtype: np.dtype
    input_dtypes: tuple


def autocast_cases(n_inputs, *, integers=False, cuda=None):
    """AutocastCase values: a device type, an autocast dtype and a mix of n_inputs input dtypes."""
    st = _st()
    return st.builds(AutocastCase, device_types(cuda), autocast_dtypes(),
                     st.tuples(*[input_dtypes(integers)] * n_inputs))
