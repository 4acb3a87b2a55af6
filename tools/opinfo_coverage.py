#!/usr/bin/env python3
"""mixprec against torch's own op database (OpInfo), sample by sample.

    PYTHONPATH=. python tools/opinfo_coverage.py              # the figures, every sample of every entry
    PYTHONPATH=. python tools/opinfo_coverage.py --missing    # and the entries not implemented yet
    PYTHONPATH=. python tools/opinfo_coverage.py --samples 4  # a cap per entry (what tests/test_opinfo.py runs)
    PYTHONPATH=. python tools/opinfo_coverage.py --only add,linalg.det -v   # some entries, each failure printed

torch's ``op_db`` (torch/testing/_internal/common_methods_invocations.py, which takes in the
linalg, fft, special, masked and signal databases) lists each op with sample inputs its developers
wrote. An entry *applies* when one of its CPU dtypes is a dtype mixprec has; mixprec *implements* it
when :func:`mixprec_callable` finds the function (mp.<name>, mp.nn.functional.<name>, mp.linalg.<name>,
mp.fft.<name>, mp.masked.<name>, a Tensor method, or an ADAPTERS entry where torch's entry calls its op through a lambda
that reorders the arguments). Each sample is converted value for value (a torch tensor becomes an
mp.tensor of the same values and dtype) and run through both:

- forward, in float32 (or the first dtype both support): the same structure, dtypes and shapes, and
  values within the dtype's tolerance (torch.testing's defaults);
- gradients, in float64, for entries torch differentiates: the vector-Jacobian product of the same
  random cotangent through mixprec's autograd and torch's.

DEVIATIONS lists deliberate, reasoned differences (those checks are not made); KNOWN_FAILURES lists what
is a defect of mixprec today, with its cause, so the table can only shrink. tests/test_opinfo.py runs the
same checks with a cap on the samples; this script is the full sweep.
"""
from __future__ import annotations

import argparse
import sys
import time
import types
import unittest
from collections import defaultdict

import numpy as np

import mixprec as mp
import mixprec.nn.functional as F

# --------------------------------------------------------------------------------------------- the tables
# entry id ('name' or 'name.variant') or (entry id, check) -> reason. check is 'forward' (values only:
# structure, dtypes and shapes are still compared), 'grad', or absent for the whole entry.
DEVIATIONS: dict = {
    # Random outputs: mixprec's generator is not torch's, so only structure, dtypes and shapes compare.
    ("nn.functional.dropout", "forward"): "random mask: mixprec's generator is not torch's",
    ("nn.functional.dropout", "grad"): "random mask: mixprec's generator is not torch's",
    ("nn.functional.dropout2d", "forward"): "random channel mask: mixprec's generator is not torch's",
    ("nn.functional.dropout2d", "grad"): "random channel mask: mixprec's generator is not torch's",
    ("nn.functional.dropout3d", "forward"): "random channel mask: mixprec's generator is not torch's",
    ("nn.functional.dropout3d", "grad"): "random channel mask: mixprec's generator is not torch's",
    ("nn.functional.feature_alpha_dropout.with_train", "forward"): "random mask: mixprec's generator is not torch's",
    ("nn.functional.feature_alpha_dropout.with_train", "grad"): "random mask: mixprec's generator is not torch's",
    ("nn.functional.fractional_max_pool2d", "forward"): "random pooling regions: mixprec's generator is not torch's",
    ("nn.functional.fractional_max_pool2d", "grad"): "random pooling regions: mixprec's generator is not torch's",
    ("nn.functional.fractional_max_pool3d", "forward"): "random pooling regions: mixprec's generator is not torch's",
    ("nn.functional.fractional_max_pool3d", "grad"): "random pooling regions: mixprec's generator is not torch's",
    ("uniform", "forward"): "random values: mixprec's generator is not torch's",
    ("normal.in_place", "forward"): "random values: mixprec's generator is not torch's",
    ("exponential", "forward"): "random values: mixprec's generator is not torch's",
    ("cauchy", "forward"): "random values: mixprec's generator is not torch's",
    ("geometric", "forward"): "random values: mixprec's generator is not torch's",
    ("log_normal", "forward"): "random values: mixprec's generator is not torch's",
    ("bernoulli", "forward"): "random values: mixprec's generator is not torch's",
    ("multinomial", "forward"): "random values: mixprec's generator is not torch's",
    ("normal", "forward"): "random values: mixprec's generator is not torch's",
    ("normal.number_mean", "forward"): "random values: mixprec's generator is not torch's",
    ("randint_like", "forward"): "random values: mixprec's generator is not torch's",
    ("randn", "forward"): "random values: mixprec's generator is not torch's",
    ("randn_like", "forward"): "random values: mixprec's generator is not torch's",
    ("rand_like", "forward"): "random values: mixprec's generator is not torch's",
    ("randint", "forward"): "random values: mixprec's generator is not torch's",
    ("empty", "forward"): "uninitialised memory: the values are unspecified",
    ("empty_like", "forward"): "uninitialised memory: the values are unspecified",
    ("new_empty", "forward"): "uninitialised memory: the values are unspecified",
    ("new_empty_strided", "forward"): "uninitialised memory: the values are unspecified",
    ("empty_strided", "forward"): "uninitialised memory: the values are unspecified",
    ("empty_permuted", "forward"): "uninitialised memory: the values are unspecified",
    # torch's ctc_loss backward returns the gradient with respect to the logits behind a log_softmax, not the
    # derivative of its own forward in log_probs (torch.autograd.gradcheck fails on it; mixprec's gradient
    # matches finite differences).
    ("nn.functional.ctc_loss", "grad"): "torch's gradient is not the derivative of its forward",
    # cholesky_inverse and cholesky_solve read one triangle of the factor; torch's gradient in the factor is
    # -A^-1 (G + G^T) A^-1 L (and its solve form), not restricted to that triangle: it is non-zero in entries the
    # forward never reads. mixprec's is zero there and equals torch's in the triangle read (tests/test_linalg.py).
    ("cholesky_inverse", "grad"): "torch's gradient is non-zero in the triangle its forward does not read",
    ("cholesky_solve", "grad"): "torch's gradient in the factor is non-zero in the triangle its forward does not read",
    # A column of eigenvectors is unique only up to a complex factor of modulus 1; which one LAPACK's geev
    # returns differs between builds (the eigenvalues, and every shape and dtype, are still compared).
    ("linalg.eig", "forward"): "eigenvectors are defined up to a phase per column",
    # The sample's input is a view whose as_strided reads storage outside the view's own elements; a sample
    # converted value by value has no such storage, so the two calls read different memory.
    "as_strided.partial_views": "reads storage beyond the view's elements, which a value copy does not carry",
    # Singular vectors and eigenvectors of a symmetric matrix are defined up to a sign per column (singular
    # and eigenvalues, shapes and dtypes are still compared; the gradient samples use torch's invariant forms).
    ("svd", "forward"): "singular vectors are defined up to a sign per column",
    ("linalg.svd", "forward"): "singular vectors are defined up to a sign per column",
    ("linalg.eigh", "forward"): "eigenvectors are defined up to a sign per column",
    # torch's gradient for the input is not the derivative of its forward (torch.autograd.gradcheck fails on it):
    # it does not zero the places src overwrites. mixprec's gradient matches finite differences.
    ("as_strided_scatter", "grad"): "torch's gradient is not the derivative of its forward",
    # The random test matrix comes from mixprec's generator, not torch's, and singular vectors are defined up to a
    # sign per column; the gradient samples compare the gauge-free U V^T and S (tests/test_linalg_lowrank.py
    # compares the singular values and the reconstruction with torch's).
    ("svd_lowrank", "forward"): "random projection from mixprec's generator; singular vectors up to sign",
    ("pca_lowrank", "forward"): "random projection from mixprec's generator; singular vectors up to sign",
}

# entry id -> (rtol, atol) for float32 forward values where the two sum in a different order over many
# terms (torch.testing's defaults, 1.3e-6 and 1e-5, are for one rounding): matmul's and conv's reductions
# over large inputs, cdist's matrix-product formula (torch's use_mm_for_euclid_dist), attention's two products.
TOLERANCES = {
    "matmul": (1e-5, 5e-5),
    "__rmatmul__": (1e-5, 5e-5),
    "nn.functional.conv3d": (1e-5, 1e-4),
    "cdist": (1e-5, 5e-5),
    "nn.functional.scaled_dot_product_attention": (1e-5, 5e-5),
    # torch's float32 polygamma loses ~2e-5 relative near the poles at negative x (float64 agrees with mixprec's
    # float32 there, which SciPy evaluates in double and rounds once)
    **{f"polygamma.polygamma_n_{n}": (3e-5, 1e-5) for n in range(5)},
    "special.polygamma.special_polygamma_n_0": (3e-5, 1e-5),
    # He_n's float32 recurrence cancels for x near its roots: torch and mixprec both run it in float32 and
    # round differently (torch's compiled loop may fuse), each ~2e-5 relative from float64 on these samples
    "special.hermite_polynomial_he": (5e-5, 1e-5),
    "histogram": (1e-5, 5e-5),  # weighted counts: torch adds float32 weights one by one; mixprec sums in float64
    # torch's float32 matrix_exp of the batched sample (entries up to 9e4) is itself 5e-2 from its float64 one;
    # mixprec's works one precision up and is within 1e-9 of float64, so the two differ by torch's rounding.
    "matrix_exp": (1e-5, 0.1),
    "fft.hfft2": (1e-5, 5e-5),  # a 3-D transform over 210 points summed in another order
}

# entry id -> (which samples, why): deliberate differences that hold for some samples only; those samples
# compare structure, dtypes and shapes only.
SAMPLE_DEVIATIONS = {
    "nn.functional.scaled_dot_product_attention": (lambda s: s.kwargs.get("dropout_p", 0) > 0,
                                                   "random dropout mask: mixprec's generator is not torch's"),
    "nn.functional.alpha_dropout": (lambda s: s.kwargs.get("training", False),
                                    "random dropout mask in training: mixprec's generator is not torch's"),
    "nn.functional.rrelu": (lambda s: s.kwargs.get("training", False),
                            "random slopes in training: mixprec's generator is not torch's"),
}

# entry id or (entry id, check) -> the cause of a failure mixprec should not have (fix it, then drop the line).
KNOWN_FAILURES: dict = {}

# Entries whose torch op is a lambda that does more than call the function or method of the entry's name.
ADAPTERS = {
    "einsum": lambda tensors, equation: mp.einsum(equation, tensors),
    "where": lambda self, condition, other, **kw: mp.where(condition, self, other, **kw),
    "nn.functional.embedding": lambda weight, idx, **kw: F.embedding(idx, weight, **kw),
    "nn.functional.embedding_bag": lambda weight, idx, **kw: F.embedding_bag(idx, weight, **kw),
    "zero_": lambda x: x.clone().zero_(),
    "T": lambda x: x.T,
    "mT": lambda x: x.mT,
    "H": lambda x: x.H,
    "mH": lambda x: x.mH,
    "linalg.lstsq.grad_oriented": lambda a, b, driver: mp.linalg.lstsq(a, b, driver=driver)[:2],
    "linalg.pinv.singular": lambda a, b: mp.linalg.pinv(a @ b.mT),
    "randn": lambda *a, **kw: mp.randn(*a, **kw),
    "randn_like": lambda x, *a, **kw: mp.randn_like(x, *a, **kw),
    "rand_like": lambda x, *a, **kw: mp.randn_like(x, *a, **kw),  # torch's entry calls randn_like too
    "randint": lambda *a, **kw: mp.randint(*a, **kw),
    "special.polygamma": lambda x, n, **kw: mp.special.polygamma(n, x, **kw),
    "empty_strided": lambda *a, **kw: mp.empty_strided(*a, **kw),
    # aten's underscore ops, which mixprec registers (mp.ops.get) but does not export as mp.<name>
    "_unsafe_masked_index": mp.ops.get("_unsafe_masked_index"),
    "_unsafe_masked_index_put_accumulate": mp.ops.get("_unsafe_masked_index_put_accumulate"),
    "_chunk_cat": mp.ops.get("_chunk_cat"),
    "svd_lowrank": lambda a, b, **kw: mp.svd_lowrank(a @ b.mT, **kw),
    "pca_lowrank": lambda a, b, **kw: mp.pca_lowrank(a @ b.mT, **kw),
    "uniform": lambda x, *a, **kw: x.uniform_(*a, **kw),
    "normal.in_place": lambda x, *a, **kw: x.normal_(*a, **kw),
    "exponential": lambda x, *a, **kw: x.exponential_(*a, **kw),
    "cauchy": lambda x, *a, **kw: x.cauchy_(*a, **kw),
    "geometric": lambda x, *a, **kw: x.geometric_(*a, **kw),
    "log_normal": lambda x, *a, **kw: x.log_normal_(*a, **kw),
    "normal.number_mean": lambda std, mean, *a, **kw: mp.normal(mean, std, *a, **kw),
    "normal": lambda *a, **kw: mp.normal(*a, **kw),
    "randint_like": lambda x, *a, **kw: mp.randint_like(x, *a, **kw),
}

# Entries whose result has a dtype mixprec lacks: the method exists only to refuse with a clear error, so the
# entry counts as missing, not implemented.
LACKING_DTYPE = {"chalf": "complex32"}

NAMESPACES = {"nn.functional.": F, "linalg.": mp.linalg, "fft.": mp.fft, "special.": mp.special, "masked.": mp.masked,
              "signal.windows.": mp.signal.windows}
TORCH_DTYPES = ("float16", "bfloat16", "float32", "float64", "complex64", "complex128",
                "uint8", "int8", "int16", "int32", "int64", "bool")
FORWARD_DTYPES = ("float32", "float64", "complex64", "int64", "int32", "bool", "uint8")  # first supported wins


class Unconvertible(Exception):
    """A sample holds something mixprec has no counterpart for (a memory format, a generator, ...)."""


# --------------------------------------------------------------------------------------------- torch's side
def load_op_db():
    """torch's op_db, or None without torch. torch's testing package imports expecttest for its TestCase
    base only; where it is not installed a stand-in with unittest's TestCase lets the database load."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return None
    try:
        import expecttest  # noqa: F401
    except ImportError:
        sys.modules["expecttest"] = types.SimpleNamespace(TestCase=unittest.TestCase, ACCEPT=False)
    from torch.testing._internal.common_methods_invocations import op_db
    return op_db


def entry_id(op) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def dtype_names(op) -> list[str]:
    """The entry's CPU dtypes that mixprec has, by name."""
    return [n for n in TORCH_DTYPES if any(str(d) == f"torch.{n}" for d in op.supported_dtypes("cpu"))]


def applies(op) -> bool:
    return bool(dtype_names(op))


def mixprec_callable(op):
    """The mixprec function that implements entry ``op`` (called as torch's entry calls its op), or None."""
    if op.name in LACKING_DTYPE:
        return None
    if entry_id(op) in ADAPTERS or op.name in ADAPTERS:
        return ADAPTERS.get(entry_id(op), ADAPTERS.get(op.name))
    for prefix, module in NAMESPACES.items():
        if op.name.startswith(prefix):
            fn = getattr(module, op.name[len(prefix):], None) if op.name[len(prefix):] in dir(module) else None
            return fn
    if "." in op.name:
        return None  # special., masked., sparse., torch.ops: namespaces mixprec does not have
    method_only = getattr(op.op, "__name__", "") == "<lambda>" or op.name.startswith("__")
    if not method_only and callable(getattr(mp, op.name, None)) and not isinstance(getattr(mp, op.name), type):
        return getattr(mp, op.name)
    if hasattr(mp.Tensor, op.name):
        name = op.name
        return lambda x, *args, **kwargs: getattr(x, name)(*args, **kwargs)
    return None


def to_mp(obj, torch):
    """A sample's argument with every torch object replaced by mixprec's (tensors keep values, dtype and
    requires_grad; a leaf stays a leaf)."""
    if isinstance(obj, torch.Tensor):
        t = obj.detach().resolve_conj().resolve_neg()
        dt = str(t.dtype).removeprefix("torch.")
        if dt not in TORCH_DTYPES:
            raise Unconvertible(f"dtype {t.dtype}")
        arr = t.float().numpy() if dt == "bfloat16" else t.numpy()
        return mp.tensor(np.array(arr).astype(getattr(mp, dt)), requires_grad=obj.requires_grad)
    if isinstance(obj, torch.dtype):
        name = str(obj).removeprefix("torch.")
        if name not in TORCH_DTYPES:
            raise Unconvertible(f"dtype {obj}")
        return getattr(mp, name)
    if isinstance(obj, torch.Size):
        return tuple(obj)
    if isinstance(obj, torch.device):
        return str(obj)
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_mp(o, torch) for o in obj)
    if isinstance(obj, dict):
        return {k: to_mp(v, torch) for k, v in obj.items()}
    if obj is None or isinstance(obj, (bool, int, float, complex, str, slice, type(Ellipsis))):
        return obj
    raise Unconvertible(type(obj).__name__)


def _tolerance(dtype_name):
    return {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5),
            "complex64": (1.3e-6, 1e-5), "float64": (1e-7, 1e-7), "complex128": (1e-7, 1e-7)}.get(dtype_name, (0, 0))


def compare(got, want, torch, values=True, what="output", tol=None) -> list[str]:
    """What differs between mixprec's result ``got`` and torch's ``want``: structure, dtype, shape, values."""
    problems = []
    if isinstance(want, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(got) != len(want):
            return [f"{what}: torch gives a {type(want).__name__} of {len(want)}, mixprec {_describe(got)}"]
        for i, (g, w) in enumerate(zip(got, want)):
            problems += compare(g, w, torch, values, f"{what}[{i}]", tol)
        return problems
    if isinstance(want, torch.Tensor):
        if not isinstance(got, mp.Tensor):
            return [f"{what}: torch gives a tensor, mixprec {_describe(got)}"]
        wd = str(want.dtype).removeprefix("torch.")
        if got.dtype.name != wd:
            problems.append(f"{what}: dtype {got.dtype.name}, torch {wd}")
        if tuple(got.shape) != tuple(want.shape):
            return problems + [f"{what}: shape {tuple(got.shape)}, torch {tuple(want.shape)}"]
        if values and not problems:
            w = want.detach().resolve_conj().resolve_neg()
            w = (w.float() if wd == "bfloat16" else w).numpy()
            g = got.detach().numpy().astype(w.dtype)
            rtol, atol = tol if tol and wd in ("float32", "complex64") else _tolerance(wd)
            if not np.allclose(g, w, rtol=rtol, atol=atol, equal_nan=True):
                err = np.abs(g.astype(np.complex128) - w) if w.size else np.zeros(0)
                worst = np.nanmax(err) if np.isfinite(err).any() else float("nan")
                problems.append(f"{what}: values differ (largest difference {worst:.3g}, rtol={rtol}, atol={atol})")
        return problems
    if isinstance(want, (bool, int, float, complex)) or want is None:
        if type(got) is not type(want) and not (isinstance(got, (int, float)) and isinstance(want, (int, float))
                                                 and not isinstance(got, bool) and not isinstance(want, bool)):
            return [f"{what}: torch gives {type(want).__name__} {want!r}, mixprec {_describe(got)}"]
        if values and want is not None and not np.isclose(got, want, rtol=1e-6, atol=1e-6, equal_nan=True):
            return [f"{what}: {got!r}, torch {want!r}"]
        return []
    if isinstance(want, torch.dtype):
        return [] if got == to_mp(want, torch) else [f"{what}: {got!r}, torch {want}"]
    return [] if got == want else [f"{what}: {got!r}, torch {want!r}"]


def _describe(x):
    if isinstance(x, mp.Tensor):
        return f"a tensor {tuple(x.shape)} {x.dtype.name}"
    if isinstance(x, (list, tuple)):
        return f"a {type(x).__name__} of {len(x)}"
    return f"{type(x).__name__} {x!r}"


def _first_error(exc):
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]


def _tensors(obj, torch):
    """The tensors of a nested sample argument, depth first."""
    if isinstance(obj, torch.Tensor) or isinstance(obj, mp.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for o in obj for t in _tensors(o, torch)]
    if isinstance(obj, dict):
        return [t for o in obj.values() for t in _tensors(o, torch)]
    return []


# --------------------------------------------------------------------------------------------- the checks
def check_forward(op, fn, sample, torch):
    """Problems (a list of strings) of one sample's forward, or None when the sample cannot be run."""
    try:
        args = to_mp((sample.input, *sample.args), torch)
        kwargs = to_mp(sample.kwargs, torch)
    except Unconvertible:
        return None
    try:
        want = op(sample.input, *sample.args, **sample.kwargs)
    except Exception:
        return None  # torch itself refuses it (some samples are for other devices or builds)
    try:
        got = fn(*args, **kwargs)
    except Exception as exc:
        return [f"mixprec raises {_first_error(exc)}"]
    return compare(got, want, torch, values=not _deviates(op, sample, "forward"), tol=TOLERANCES.get(entry_id(op)))


def _deviates(op, sample, check):
    """Whether DEVIATIONS or SAMPLE_DEVIATIONS exempt this sample's values from the check."""
    key = entry_id(op)
    which = SAMPLE_DEVIATIONS.get(key, (None,))[0]
    return (key, check) in DEVIATIONS or (op.name, check) in DEVIATIONS or bool(which and which(sample))


def check_grad(op, fn, sample, torch, seed=0):
    """Problems of one float64 sample's vector-Jacobian product, or None when it cannot be run."""
    if _deviates(op, sample, "grad"):
        return None
    try:
        args = to_mp((sample.input, *sample.args), torch)
        kwargs = to_mp(sample.kwargs, torch)
    except Unconvertible:
        return None
    t_in = [t for t in _tensors((sample.input, sample.args, sample.kwargs), torch) if t.requires_grad]
    m_in = [t for t in _tensors((args[0], args[1:], kwargs), torch) if t.requires_grad]
    if not t_in or len(t_in) != len(m_in):
        return None
    try:
        want = sample.output_process_fn_grad(op(sample.input, *sample.args, **sample.kwargs))
        t_out = [t for t in _tensors(want, torch) if t.requires_grad]
        if not t_out:
            return None
        gen = torch.Generator().manual_seed(seed)
        cots = [torch.randn(t.shape, dtype=t.dtype, generator=gen) for t in t_out]
        t_grads = torch.autograd.grad(t_out, t_in, cots, allow_unused=True)
    except Exception:
        return None
    try:
        out = fn(*args, **kwargs)
    except Exception as exc:
        return [f"mixprec raises {_first_error(exc)}"]
    try:
        got = sample.output_process_fn_grad(out)
    except Exception:
        return None  # the sample's output_process_fn_grad is written for torch tensors
    m_out = [t for t in _tensors(got, torch) if isinstance(t, mp.Tensor) and t.requires_grad]
    if len(m_out) != len(t_out):
        return [f"{len(m_out)} differentiable outputs, torch {len(t_out)}"]
    try:
        m_grads = mp.autograd.grad(m_out, m_in, [to_mp(c, torch) for c in cots], allow_unused=True)
    except Exception as exc:
        return [f"mixprec's backward raises {_first_error(exc)}"]
    problems = []
    for i, (g, w, x) in enumerate(zip(m_grads, t_grads, t_in)):
        w = torch.zeros_like(x) if w is None or w._is_zerotensor() else w  # (torch's lazy zero gradients)
        g = mp.zeros(tuple(x.shape), dtype=to_mp(x.dtype, torch)) if g is None else g
        problems += compare(g, w, torch, what=f"grad of input {i}")
    return problems


def samples(op, dtype_name, torch, requires_grad=False, limit=None):
    """The entry's first ``limit`` samples in that dtype (torch seeded, so the same each run)."""
    torch.manual_seed(0)
    out = []
    try:
        for s in op.sample_inputs("cpu", getattr(torch, dtype_name), requires_grad=requires_grad):
            out.append(s)
            if limit is not None and len(out) >= limit:
                break
    except Exception:
        pass
    return out


def check_entry(op, torch, limit=None, grad_limit=None, first_failure=False):
    """{'forward': [(sample index, sample, problems)], 'grad': [...], 'run': {'forward': n, 'grad': n},
    'skipped': n} for one entry (a sample is skipped when it cannot be converted or torch refuses it).
    first_failure: stop each check at its first failing sample."""
    fn = mixprec_callable(op)
    key = entry_id(op)
    report = {"forward": [], "grad": [], "run": {"forward": 0, "grad": 0}, "skipped": 0}
    if DEVIATIONS.get(key) or DEVIATIONS.get(op.name):
        return report
    names = dtype_names(op)
    forward_dtype = next((d for d in FORWARD_DTYPES if d in names), names[0])
    for i, s in enumerate(samples(op, forward_dtype, torch, limit=limit)):
        problems = check_forward(op, fn, s, torch)
        if problems is None:
            report["skipped"] += 1
        else:
            report["run"]["forward"] += 1
        if problems:
            report["forward"].append((i, f"{forward_dtype} {_summary(s)}", problems))
            if first_failure:
                break
    grad_dtypes = {str(d) for d in op.supported_backward_dtypes("cpu")} if op.supports_autograd else set()
    if "torch.float64" in grad_dtypes and (key, "grad") not in DEVIATIONS and (op.name, "grad") not in DEVIATIONS:
        for i, s in enumerate(samples(op, "float64", torch, requires_grad=True, limit=grad_limit)):
            problems = check_grad(op, fn, s, torch)
            if problems is None:
                report["skipped"] += 1
            else:
                report["run"]["grad"] += 1
            if problems:
                report["grad"].append((i, f"float64 {_summary(s)}", problems))
                if first_failure:
                    break
    return report


def _summary(sample):
    def d(x):
        if hasattr(x, "shape") and hasattr(x, "dtype"):
            return f"T{tuple(x.shape)}"
        if isinstance(x, (list, tuple)):
            return "[" + ", ".join(d(o) for o in x) + "]"
        return repr(x)
    parts = [d(sample.input)] + [d(a) for a in sample.args] + [f"{k}={d(v)}" for k, v in sample.kwargs.items()]
    return "(" + ", ".join(parts) + ")"


def known(key, check):
    """The reason KNOWN_FAILURES gives for a check of entry ``key`` failing, or None."""
    return KNOWN_FAILURES.get(key) or KNOWN_FAILURES.get((key, check))


def group(name) -> str:
    """The namespace an entry belongs to, for the listing of what is missing."""
    if name.startswith("nn.functional."):
        return "torch.nn.functional"
    if "." in name and not name.startswith("_"):
        return "torch." + name.split(".")[0]
    return "torch / Tensor"


# --------------------------------------------------------------------------------------------- the sweep
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=None, help="at most this many samples per entry and check")
    parser.add_argument("--only", help="comma-separated entry ids")
    parser.add_argument("--missing", action="store_true", help="list the entries mixprec does not implement")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each failing sample")
    args = parser.parse_args(argv)
    op_db = load_op_db()
    if op_db is None:
        print("torch is not installed: nothing to compare against", file=sys.stderr)
        return 2
    import torch
    start = time.perf_counter()
    apply = [op for op in op_db if applies(op)]
    done = [op for op in apply if mixprec_callable(op) is not None]
    if args.only:
        wanted = set(args.only.split(","))
        done = [op for op in done if entry_id(op) in wanted or op.name in wanted]
    passing, listed, failing, unrun, deviating = [], [], [], [], []
    counts = {"forward": 0, "grad": 0}
    for op in done:
        r = check_entry(op, torch, args.samples, args.samples)
        key = entry_id(op)
        bad = [c for c in ("forward", "grad") if r[c]]
        for c in counts:
            counts[c] += r["run"][c]
        if DEVIATIONS.get(key) or DEVIATIONS.get(op.name):
            deviating.append(key)
        elif not r["run"]["forward"]:
            unrun.append(key)
        elif not bad:
            passing.append(key)
        elif all(known(key, c) for c in bad):
            listed.append(key)
        else:
            failing.append(key)
        if bad and args.verbose:
            print(f"\n{key}: {r['run']} samples run, {r['skipped']} skipped")
            for c in bad:
                for i, s, problems in r[c][:3]:
                    print(f"  {c} sample {i} {s[:120]}:\n    " + "\n    ".join(problems[:3]))
    print(f"op_db entries: {len(op_db)}; applicable (a CPU dtype mixprec has): {len(apply)}")
    print(f"implemented by mixprec: {len([op for op in apply if mixprec_callable(op) is not None])}")
    print(f"checked: {len(done)} ({counts['forward']} forward samples, {counts['grad']} gradient samples)")
    print(f"pass every sample: {len(passing)}; fail as KNOWN_FAILURES lists: {len(listed)}; "
          f"fail, not listed: {len(failing)}; left out whole (DEVIATIONS): {len(deviating)}; "
          f"no sample could run: {len(unrun)}")
    if unrun:
        print("no sample could run: " + ", ".join(unrun))
    if failing:
        print("failing, not listed: " + ", ".join(failing))
    if args.missing:
        missing = defaultdict(list)
        for op in apply:
            if mixprec_callable(op) is None:
                missing[group(op.name)].append(entry_id(op))
        for g, names in sorted(missing.items()):
            print(f"\nnot implemented, {g} ({len(names)}):\n    " + ", ".join(names))
    print(f"\n({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
