"""Fault campaign: every op in the case table (tests/op_cases/) under hostile inputs.

Each case is rerun on variants of its own inputs, derived here, so an op that gets a case is
subject to all of them with no further work:

  empty      a 0-size dim: the first dim of every array input, the last dim of every one, and the
             first dim of one input at a time
  nan, inf   one element of one floating input set to nan, inf or -inf
  dtype      one floating input as int64, as bool or as float32; one integer/bool input as float64
  edit       (cases with gradients) each integer/bool input edited in place between forward and backward
  alias      every floating input passed as a strided view of a larger tensor (nan in the gaps): the same
             outputs and gradients as with contiguous inputs, no gradient into the gaps, and no output
             that shares memory with an input unless it is a view of it (a silent alias)
  device     (GPU only, its own test) one input on the GPU, the others on the CPU

The oracle is torch when the case's function runs under torch unchanged (its ``mp`` and ``F``
rebound to torch and torch.nn.functional, an op passed as it is looked up by name) and then
reproduces the case's own NumPy reference on the clean inputs; otherwise it is that reference.
Attention runs on torch's math backend, the definition its documentation gives (scores plus a
0/-inf mask, softmax, times V): its fused CPU kernel differs from it on non-finite scores, and
differently by CPU (on AVX-512 a row whose only visible key is nan comes out 0, on AVX2 nan).

A variant holds when
  * both give a result: the same shapes and, with torch, dtypes; the same values (non-finite where
    the oracle's are: nan and +-inf count alike, which one a formula gives depends on its
    association; finite ones within 1e-9, 1e-5 with float32 involved: a float32 input or output, or
    a float32 step of torch's definition, FLOAT32_INSIDE); and, with torch, the same gradient of a
    fixed projection of the outputs for every floating input (a finite gradient where
    torch's is nan is a laundered nan: GradScaler would take that step);
  * both refuse, and mixprec's error is clear;
  * mixprec refuses a non-empty input clearly (where torch computes, that is allowed: a clear error
    beats a coercion), or computes what only torch's backward or the NumPy reference cannot.
It fails when mixprec computes another value than torch, refuses an empty input torch handles,
computes what torch's forward refuses (a silent coercion), or raises an unclear error. An edit
holds when backward raises torch's "modified by an in-place operation" error, or, when no
backward reads the tensor, gives the gradient of the forward that ran.

Without torch (CI installs none) only the error rule and the edits are checked: the NumPy references
are written for clean inputs, and on nan, inf or empty ones they often differ from torch (NumPy's
sign(nan) is nan, torch's is 0), so they cannot judge values there. With torch installed, cases it
cannot run are still judged by their references.

A clear error is a TypeError, ValueError, RuntimeError, IndexError or NotImplementedError raised
by a ``raise`` statement in mixprec's own code (not by NumPy, CuPy or Python inside a mixprec
line), not chained to another exception the traceback would show, whose message names the op:
the case's op, an op running when it was raised, or any op written as ``<op>:`` (an error raised
outside every op, by a Tensor method the case called, names that method).

Stateful calls (the end of this file) are judged on what a failed call leaves behind: each case runs a
call that must fail, against a small training setup (a model, Adam with state, a scheduler, a checkpoint
on disk), and holds when the error is clear (as above, naming the call instead of an op), or is the
user's own error passing through, and the parameters, the optimizer's and scheduler's state and the
checkpoint file are exactly as before, so that the next training step gives what it gives without the
failed call.

Deliberate differences from torch are listed in DEVIATIONS with the reason. ``PYTHONPATH=tests:.
python tests/test_fault_campaign.py`` prints how many hostile variants run and how many hold, per op.
"""
from __future__ import annotations

import linecache
import os
import re
import sys
import types
import warnings
import zlib
from dataclasses import dataclass, field

import numpy as np
import pytest

import mixprec as mp
from mixprec import observers
from op_cases import CASES

try:
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
except ImportError:  # the NumPy references are the oracle for every case
    torch = None

MIXPREC_DIR = os.path.dirname(os.path.abspath(mp.__file__))
CLEAR_ERRORS = (TypeError, ValueError, RuntimeError, IndexError, NotImplementedError)

# (op, variant kind or name without its input number) -> why mixprec deliberately differs from torch there.
# Each entry is a decision, not a way to silence a failure.
_NORM_DTYPES = ("mixed dtypes promote to the wider one (a half input with float32 parameters is the common case, "
                "e.g. under CPU autocast; torch accepts that pair and refuses the others)")
_MARGIN_NAN = "a nan stays nan (torch's kernel compares z > 0 and so turns a nan margin into 0)"
_INT_MATH = ("integer and bool inputs compute in float32, as exp and sigmoid do (torch has no integer kernel for "
             "it); tests/test_ops.py::test_integer_inputs_of_float_math_compute_in_float32 holds this choice")
_SDPA_EMPTY_MASK = ("an attn_mask that does not broadcast to the scores (..., L, S) is refused even when the output "
                    "is empty; torch skips every check then and accepts any mask")
_CTC_GRADIENT = ("the gradient with respect to log_probs is the derivative of the loss (mixprec/ops/ctc.py); torch's "
                 "adds exp(log_probs) (pytorch issues 52241, 181534), so the two differ wherever that term does not "
                 "vanish, and torch's nan/inf at a non-finite log-probability that no path uses comes from it")
DEVIATIONS = {
    ("gelu", "dtype"): _INT_MATH,
    ("softplus", "dtype"): _INT_MATH,
    ("layer_norm", "dtype"): _NORM_DTYPES,
    ("group_norm", "dtype"): _NORM_DTYPES,
    ("batch_norm", "dtype"): _NORM_DTYPES,
    ("instance_norm", "dtype"): _NORM_DTYPES,
    ("instance_norm", "empty-first-dim-of-input0"): "an empty batch gives an empty result, with or without weight "
                                                    "(torch's fails inside with an IndexError from select() when "
                                                    "weight is given, and returns the empty result without it)",
    ("huber_loss", "float32-input"): "the result has the promoted dtype, as mse_loss and l1_loss (torch's huber "
                                     "keeps the input's)",
    ("cdist", "nan"): "a nan difference makes the inf-distance nan, as in pdist and norm (torch's cdist kernel "
                      "drops it from its max)",
    ("soft_margin_loss", "inf"): "computed stably: at x = -inf the loss is inf and its gradient the limit -1; "
                                 "torch's log1p(exp(z)) gives inf / inf = nan",
    ("poisson_nll_loss", "inf"): "Stirling's term is not evaluated where it does not count (target <= 1), so a "
                                 "target of -inf gets the gradient -input; torch evaluates it and masks: nan",
    ("multi_margin_loss", "nan"): _MARGIN_NAN,
    ("multilabel_margin_loss", "nan"): _MARGIN_NAN,
    ("multi_margin_loss", "empty-first-dims"): "an empty batch gives nan for 'mean' (torch: uninitialised memory)",
    ("multilabel_margin_loss", "empty-first-dims"): "an empty batch gives nan for 'mean' (torch: uninitialised "
                                                    "memory)",
    ("renorm", "nan"): "a slice holding a nan gets a nan gradient through its norm (torch's fused backward "
                       "passes the gradient unscaled: the nan norm is not over maxnorm)",
    ("addmv", "empty-first-dim-of-input"): "an empty matrix gives an empty result, broadcast as the shapes say "
                                           "(torch returns input unbroadcast, shape (1,))",
    # group fca (elementwise/complex/shape/misc ops, FFTs)
    ("silu", "dtype"): _INT_MATH,
    **{("polar", f"{v}-in-input0"): "the gradient of abs * e^(i angle) w.r.t. abs is e^(i angle), finite at a "
                                    "non-finite abs as mul's is; torch documents polar as undefined for a nan or "
                                    "negative abs (its rule real(conj(g) sgn(result)) gives nan, and the wrong sign "
                                    "at a negative abs)" for v in ("nan", "inf", "-inf")},
    **{(op, v): "an empty batch gives an empty result, as numpy.fft does (torch's MKL CPU backend refuses a batch "
                "of 0 with a DFTI configuration error, an artefact of that library)"
       for op, v in (("fft_fft", "empty-first-dims"), ("fft_rfft", "empty-first-dims"),
                     ("fft_rfft", "empty-last-dims"), ("fft_irfft", "empty-first-dims"),
                     ("fft_hfft", "empty-first-dims"), ("fft_hfft2", "empty-first-dims"),
                     ("fft_ihfft2", "empty-first-dims"))},
    # group fcc (attention, ctc)
    ("scaled_dot_product_attention", "empty-first-dim-of-input2"):
        "value's batch dims must broadcast with query's and key's (refused for 2 vs 0, 0 for 1 vs 0); torch returns "
        "zeros shaped by the query's batch, values with no value rows to come from",
    ("scaled_dot_product_attention", "empty-first-dims"): _SDPA_EMPTY_MASK,
    ("scaled_dot_product_attention", "empty-last-dims"): _SDPA_EMPTY_MASK,
    **{("ctc_loss", kind): _CTC_GRADIENT for kind in ("nan", "inf", "float32-input")},
    # sorting and selection (sorting.py)
    ("topk", "int64-input0"): "between equal values the earlier index comes first (a stable sort); torch's order of "
                              "ties is that of its unstable std::nth_element/std::sort, which no rule states",
    # two-input elementwise math (binary_math.py)
    ("ldexp", "bool-input1"): "a bool exponent counts as 0 or 1, as a bool input does (torch has no kernel for a "
                              "bool exponent)",
    ("ldexp", "int64-input1"): "the gradient in input is 2**exponent, the derivative; torch's, for an integer "
                               "exponent, is computed in integer arithmetic: 0 for a negative exponent",
    # linear algebra (linalg_lu_cholesky.py, linalg_qr_eig_svd.py)
    ("ormqr", "nan-in-input1"): "the result is linear in each tau_i, so a non-finite tau_i keeps its own exact, "
                                "finite gradient (every other tau's is nan, as in torch, whose backward formula "
                                "makes that one nan too)",
    ("ormqr", "inf-in-input1"): "as for a nan tau: the result is linear in each tau_i",
    ("ormqr", "-inf-in-input1"): "as for a nan tau: the result is linear in each tau_i",
    ("linalg_solve", "nan-in-input0"): "a NaN in A makes the whole solution NaN, as torch's LAPACK does (every "
                                       "entry of A^-1 depends on every entry of A); the NumPy reference, which "
                                       "judges the batched cases, keeps some entries finite",
    ("linalg_lstsq", "nan-in-input1"): "a NaN in B makes the solution NaN, as an inf does in torch; torch's gelsy "
                                       "call fails an internal assert there ('please report a bug to PyTorch')",
    **{("linalg_lstsq", f"{v}-in-input1"): "the solution is NaN as torch's; the residuals are those of that solution "
                                           "(NaN), where torch reports 0 for a column without the inf, a number its "
                                           "NaN solution does not have" for v in ("inf", "-inf")},
    ("linalg_ldl_factor_ex", "nan-in-input0"): "a NaN pivot ends its column's elimination with info = k, as the "
                                               "reference LAPACK's sytf2 (SciPy's dsytrf) does; torch's MKL goes on "
                                               "with info 0, so other entries become NaN",
    **{("norm", f"{v}-in-input0"): "the nuclear norm's gradient at a matrix holding inf is NaN, as its norm is; "
                                   "torch differentiates the factors LAPACK returns for that matrix, arbitrary "
                                   "finite numbers" for v in ("inf", "-inf")},
    ("cholesky_inverse", "float32-input"): "the gradient is that of the function computed, which reads only L's "
                                           "triangle; torch's backward multiplies by the whole input, so its "
                                           "gradient depends on the entries the forward ignores (the case's L has "
                                           "3s there; torch differs in float64 too)",
    ("linalg_inv", "nan-in-input0"): "a NaN in A makes the whole inverse NaN, as torch's LAPACK does; the NumPy "
                                     "reference, which judges the batched case, keeps some entries finite",
    # Non-finite factors: the output is finite in torch and here alike; torch's closed-form backward multiplies by
    # the whole factor, so the inf entry gets 0 * inf = nan, where mixprec's gradient is the chain rule of the
    # substitution it ran (gradcheck-exact on finite input)
    **{(op, f"{v}-in-input{i}"): "the gradient of the substitution actually run (torch: 0 * inf = nan from its "
                                 "closed-form backward)"
       for op, i in (("lu_solve", 1), ("linalg_lu_solve", 0), ("cholesky_solve", 1), ("cholesky_inverse", 0))
       for v in ("inf", "-inf")},
    ("cholesky_inverse", "nan-in-input0"): "a NaN in L reaches every entry of the inverse that depends on it; "
                                           "torch's potri skips exact zeros and leaves some of them finite",
    # QR of a matrix holding inf/NaN is LAPACK-implementation-defined: NumPy's LAPACK and torch's MKL disagree on
    # which entries become non-finite; mixprec's Q and R are non-finite as NumPy's are (never all finite)
    **{(op, f"{v}-in-input0"): "QR of a non-finite matrix: which entries become nan is LAPACK's choice (NumPy's "
                               "here, MKL's in torch); Q and R are never all finite"
       for op in ("linalg_qr", "qr", "geqrf") for v in ("nan", "inf", "-inf")},
    # activations (nn_activations.py)
    **{(op, "nan"): "a NaN's gradient is what torch's vectorized CPU kernel gives (NaN for elu and hardswish, 0 for "
                    "the clamps and shrinks); torch's scalar path, which a tensor smaller than one SIMD vector (this "
                    "case's) and the tail after the last full vector take, passes the gradient on instead"
       for op in ("_elu", "_hardtanh", "_hardswish")},
    **{(op, kind): "the slope is 1/6 in the input's dtype; torch's backward multiplies by the float32 constant "
                   "1.0f / 6 even in float64 (3e-8 off), which shows where a non-finite input makes this a variant"
       for op in ("hardsigmoid", "_hardsigmoid") for kind in ("nan", "inf")},
    # special functions (special.py)
    **{(op, "inf-in-input0"): "the value at +inf is the limit 0 (SciPy's); torch's Cephes zeta gives NaN there, "
                              "and so polygamma(n >= 2, inf) and the gradient of polygamma(1, x), whose own value "
                              "at inf torch gives as 0"
       for op in ("polygamma", "special_zeta")},
    ("special_i1e", "nan-in-input0"): "a NaN input gets a NaN gradient; torch's backward counts a NaN as a tiny "
                                      "input (|x| > eps is false for it) and gives the gradient at 0, 0.5",
    # embedding_bag.py
    ("embedding_bag", "nan-in-input0"): "mode 'max' gives a NaN row's bag NaN, as max and amax do; torch's kernel "
                                        "compares with >, so a NaN is kept only when it comes first in its bag",
    # histograms.py
    ("bincount", "empty"): "an empty input gives zeros in the weights' dtype, as a non-empty one does, and its "
                           "weights must still have its shape; torch returns int64 zeros for an empty input, "
                           "skipping both",
    # rearrangements (nn_rearrange.py)
    ("pixel_unshuffle", "empty"): "an empty input gives the shape the op defines, (*, C r^2, H / r, W / r), as "
                                  "pixel_shuffle's does in torch too; torch's pixel_unshuffle returns an empty input "
                                  "unchanged",
    # scatters (scatter.py)
    **{("as_strided_scatter", kind): "the gradient in input is the output's where input shows through, 0 where src "
                                     "is written; torch's backward gives the complement (its own gradcheck fails "
                                     "on this case), which shows wherever a non-finite input makes this a variant"
       for kind in ("nan", "inf")},
}

# (case, variant) where torch's definition computes a float32 step inside a float64 result: the float math of an
# integer tensor runs in torch's default dtype, float32 (its type promotion rules), and mixprec follows it. Such a
# step is judged at float32's tolerance: the last bit of a float32 kernel differs between libraries and CPUs.
FLOAT32_INSIDE = {
    ("poisson_nll_loss-rates-full-none", "int64-input1"):
        "Stirling's term of an int64 target (target * log(target) - target + 0.5 * log(2 pi target)) is float32; "
        "NumPy 2.4.6's SIMD (AVX2, AVX-512) float32 log gives log(7) = 1.9459102, one ulp above torch's 1.9459101",
    **{(case, f"{v}-in-input{i}"): "_scaled_mm's product is a float32 GEMM by definition (torch's accumulates in "
                                   "float32); the case returns it as float64"
       for case, inputs in (("_scaled_mm-tensorwise", 4), ("_scaled_mm-rowwise-bias-e5m2", 5))
       for i in range(inputs) for v in ("nan", "inf", "-inf")},
}

# Ops whose NumPy reference goes through LAPACK's iterative SVD/eig, which loops forever on an inf: with inf or nan
# inputs the reference is not run (mixprec's svd/eig refuse such input before LAPACK sees it)
# ops whose result depends on the memory layout of their input, or shares it, by definition (no alias variant)
LAYOUT_IS_THE_POINT = {
    "as_strided": "addresses its input's storage by strides and offset, so a padded storage gives other elements",
    "as_strided_copy": "as_strided's copy: it addresses its input's storage, so a padded storage gives other elements",
    "_overwrite": "the value an in-place write leaves: a broadcast view of the value, written into the target at once",
}
REFERENCE_NEVER_RETURNS = {"linalg_svd", "linalg_svdvals", "svd", "linalg_pinv", "pinverse", "linalg_matrix_rank",
                           "linalg_lstsq", "linalg_matrix_norm", "linalg_cond", "linalg_eig", "linalg_eigvals"}

# (op, variant) where torch itself crashes (a segmentation fault): the NumPy reference judges them
TORCH_CRASHES = {("pdist", "empty-first-dims"),
                 ("embedding_bag", "empty-first-dim-of-input2"),  # torch 2.13's embedding_bag: empty offsets
                 # torch 2.13's grid_sampler_2d backward, border/reflection padding, a non-finite grid
                 *((op, f"{v}-in-input1") for op in ("grid_sample", "grid_sampler") for v in ("nan", "inf", "-inf"))}

# ----------------------------------------------------------------- variants
def variants(values):
    """(kind, name, values) for every hostile variant of one case's inputs (clean inputs: case.inputs())."""
    arrays = [i for i, v in enumerate(values) if isinstance(v, np.ndarray)]
    floats = [i for i in arrays if values[i].dtype.kind == "f"]
    integers = [i for i in arrays if values[i].dtype.kind in "biu"]

    def swap(i, v):
        return [v if j == i else x for j, x in enumerate(values)]

    def each(fn):
        return [fn(v) if isinstance(v, np.ndarray) and v.ndim else v for v in values]
    if any(values[i].ndim for i in arrays):
        yield "empty", "empty-first-dims", each(lambda v: v[:0])
        yield "empty", "empty-last-dims", each(lambda v: v[..., :0])
        sized = [i for i in arrays if values[i].ndim]
        if len(sized) > 1:
            for i in sized:
                yield "empty", f"empty-first-dim-of-input{i}", swap(i, values[i][:0])
    for i in floats:
        if values[i].size:
            for name, x in (("nan", np.nan), ("inf", np.inf), ("-inf", -np.inf)):
                v = values[i].copy()
                v.flat[0] = x
                yield name.lstrip("-"), f"{name}-in-input{i}", swap(i, v)
    for i in floats:
        with np.errstate(invalid="ignore"):  # (inf cast to int64)
            # (np.asarray: arithmetic on a 0-d array gives a NumPy scalar, and the variant is a 0-d tensor)
            yield "dtype", f"int64-input{i}", swap(i, np.asarray(np.round(values[i] * 2)).astype(np.int64))
        yield "dtype", f"bool-input{i}", swap(i, np.asarray(values[i] > 0))
        yield "dtype", f"float32-input{i}", swap(i, values[i].astype(np.float32))
    for i in integers:
        yield "dtype", f"float64-input{i}", swap(i, values[i].astype(np.float64))


# ----------------------------------------------------------------- running one side
@dataclass
class Outcome:
    outputs: list = field(default_factory=list)   # (array, dtype name) per tensor output
    grads: list = field(default_factory=list)     # per floating input: array or None (no gradient)
    error: BaseException | None = None
    where: str = ""                               # "forward" or "backward" for an error
    running: tuple = ()                           # mixprec ops running when the error was raised


class _Running:
    """Observer: the op calls now running, so an error can be traced to the op that raised it."""

    def __init__(self):
        self.stack = []

    def enter(self, call):
        self.stack.append(call.op.name)

    def exit(self, call):
        self.stack.pop()


def _projection(case_id, shape):
    return np.random.default_rng(zlib.crc32(case_id.encode())).standard_normal(shape)


def _differentiated(case):
    """Which inputs of the case are differentiated: its floating arrays (they stay so in every variant)."""
    return [isinstance(v, np.ndarray) and v.dtype.kind == "f" for v in case.inputs()]


def run_mixprec(case, values, grads=True, devices=None):
    out = Outcome()
    wanted = _differentiated(case)
    devices = devices or ["cpu"] * len(values)
    inputs = [mp.tensor(v, device=d, requires_grad=w and v.dtype.kind == "f") if isinstance(v, np.ndarray) else v
              for v, w, d in zip(values, wanted, devices)]
    running = _Running()
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"), observers.observe(running):
            warnings.simplefilter("ignore")
            out.where = "forward"
            result = case.fn(*inputs)
            tensors = [r for r in (result if isinstance(result, (tuple, list)) else [result])
                       if isinstance(r, mp.Tensor)]
            out.outputs = [(r.detach().numpy(), r.dtype.name) for r in tensors]
            wrt = [t for t in inputs if isinstance(t, mp.Tensor) and t.requires_grad]
            diff = [r for r in tensors if r.requires_grad]
            if grads and wrt and diff:
                out.where = "backward"
                loss = sum((mp.tensor(_projection(case.id, r.shape)) * r).sum() for r in diff)
                got = mp.autograd.grad(loss, wrt, allow_unused=True)
                out.grads = [None if g is None else g.numpy() for g in got]
    except Exception as exc:  # noqa: BLE001 (what was raised is what is judged)
        out.error, out.running = exc, tuple(running.stack)
    return out


class _TorchAsMixprec:
    """What ``mp`` means in a case run under torch: a name from torch, else torch.linalg or torch.special."""

    def __getattr__(self, name):
        for module in (torch, torch.linalg, torch.special):
            if hasattr(module, name):
                return getattr(module, name)
        raise AttributeError(f"torch has no {name!r}")


def torch_version(fn):
    """The case's function with torch in place of mixprec, or None when it cannot be made."""
    if isinstance(fn, types.FunctionType) and fn.__module__.startswith("op_cases"):
        rebound = dict(fn.__globals__, mp=_TorchAsMixprec(), F=torch.nn.functional)
        return types.FunctionType(fn.__code__, rebound, fn.__name__, fn.__defaults__, fn.__closure__)
    name = getattr(fn, "__name__", "")  # an op passed as it is (mp.exp, F.cosine_similarity)
    if getattr(mp.nn.functional, name, None) is fn and hasattr(torch.nn.functional, name):
        return getattr(torch.nn.functional, name)
    return getattr(_TorchAsMixprec(), name, None)


def run_torch(case, values, fn, grads=True):
    out = Outcome()
    wanted = _differentiated(case)
    try:
        inputs = [torch.tensor(v, requires_grad=w and v.dtype.kind == "f") if isinstance(v, np.ndarray) else v
                  for v, w in zip(values, wanted)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out.where = "forward"
            result = fn(*inputs)
            tensors = [r for r in (result if isinstance(result, (tuple, list)) else [result])
                       if isinstance(r, torch.Tensor)]
            out.outputs = [(r.detach().numpy(), str(r.dtype).replace("torch.", "")) for r in tensors]
            wrt = [t for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad]
            diff = [r for r in tensors if r.requires_grad]
            if grads and wrt and diff:
                out.where = "backward"
                loss = sum((torch.tensor(_projection(case.id, tuple(r.shape))) * r).sum() for r in diff)
                got = torch.autograd.grad(loss, wrt, allow_unused=True)
                out.grads = [None if g is None else g.numpy() for g in got]
    except Exception as exc:  # noqa: BLE001
        out.error = exc
    return out


def run_reference(case, values):
    out = Outcome()
    if case.op in REFERENCE_NEVER_RETURNS and any(isinstance(v, np.ndarray) and v.dtype.kind in "fc"
                                                  and not np.isfinite(v).all() for v in values):
        out.error = RuntimeError("not run: NumPy's SVD/eig never returns on an inf")
        return out
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            result = case.ref(*values)
        out.outputs = [(np.asarray(r), np.asarray(r).dtype.name)
                       for r in (result if isinstance(result, (tuple, list)) else [result])]
    except Exception as exc:  # noqa: BLE001
        out.error = exc
    return out


# ----------------------------------------------------------------- judging
_OP_NAMES = None


def unclear(case, outcome):
    """Why mixprec's error is not a clear one (see the module docstring), or None when it is."""
    global _OP_NAMES
    exc = outcome.error
    text = f"{type(exc).__name__}: {exc}"
    if not isinstance(exc, CLEAR_ERRORS):
        return f"raised {text}; raise a TypeError/ValueError/RuntimeError/IndexError naming the op instead"
    tb = exc.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    filename, line = tb.tb_frame.f_code.co_filename, tb.tb_lineno
    source = linecache.getline(filename, line).strip()
    here = f"{os.path.relpath(filename)}:{line}"
    if not os.path.abspath(filename).startswith(MIXPREC_DIR):
        return f"raised {text} from {here}, outside mixprec: check the input in mixprec and raise a clear error"
    if not source.startswith("raise"):
        return (f"raised {text} inside `{source}` ({here}), a library error passing through: check the input "
                "first and raise a clear error")
    if exc.__cause__ is not None or (exc.__context__ is not None and not exc.__suppress_context__):
        inner = exc.__cause__ or exc.__context__
        return (f"raised {text} at {here} chained to {type(inner).__name__}: {inner}; raise it `from None` "
                "so no library traceback shows")
    if _OP_NAMES is None:
        _OP_NAMES = set(mp.ops.names())
    message = str(exc)
    if not outcome.running or case.op in message or any(n in message for n in outcome.running):
        return None  # (raised outside every op: by a Tensor method the case called, which names itself)
    if any(re.search(rf"(^|\W){re.escape(n)}(\(\))?:", message) for n in _OP_NAMES):
        return None
    return f"raised {text} at {here}: the message does not name the op ({case.op!r})"


def _describe(outcome):
    if outcome.error is not None:
        return f"{type(outcome.error).__name__} ({outcome.where}): {str(outcome.error)[:200]}"
    return ", ".join(f"{d}{a.shape}" for a, d in outcome.outputs) or "nothing"


def _compare(what, got, want, rtol):
    """None when the arrays agree, else what differs. They agree when they are non-finite at the same
    places (nan and +-inf count alike: which one comes out depends on how a formula is associated) and the
    finite values are within rtol of each other or of the largest finite magnitude."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return f"{what}: shape {got.shape}, expected {want.shape}"
    g, w = got.astype(np.float64), want.astype(np.float64)
    finite = np.isfinite(w)
    scale = max(np.abs(w[finite]).max() if finite.any() else 0.0, 1.0)  # (terms of size ~1 went in)
    with np.errstate(invalid="ignore"):
        close = np.isclose(g, w, rtol=rtol, atol=rtol * scale)
    bad = ~np.where(finite, close, ~np.isfinite(g))
    if bad.any():
        at = tuple(int(i) for i in np.argwhere(bad)[0])
        return f"{what}: {got[at]} at {at}, expected {want[at]} ({int(bad.sum())} of {bad.size} differ)"
    return None


def _rtol(case, name, values, outcome):
    """Relative tolerance: float64 math agrees to rounding, math with a float32 input, output or step (see
    FLOAT32_INSIDE) to float32's."""
    low = any(isinstance(v, np.ndarray) and v.dtype == np.float32 for v in values)
    low = low or (case.id, name) in FLOAT32_INSIDE
    return 1e-5 if low or any(d == "float32" for _, d in outcome.outputs) else 1e-9


def judge(case, kind, name, values, mixprec, oracle, by_torch):
    """None when the variant holds, else what is wrong and what to fix."""
    m_forward = mixprec.error is None or mixprec.where == "backward"
    o_forward = oracle.error is None or oracle.where == "backward"
    if mixprec.error is not None:
        why = unclear(case, mixprec)
        if why is not None:
            return why
    if torch is None:
        return None  # values need torch: the NumPy references are written for clean inputs (see the docstring)
    if not m_forward:
        if not o_forward or not by_torch:
            return None  # both refuse (clearly), or only the NumPy reference computes it
        if kind == "empty":
            return (f"refuses an empty input that torch handles: mixprec {_describe(mixprec)}; torch gives "
                    f"{_describe(oracle)}. Handle 0-size inputs as torch does (shape; reductions of nothing)")
        return None  # a clear error where torch computes: allowed
    if not o_forward:
        if not by_torch:
            return None  # nothing to compare with
        return (f"computes what torch refuses (a silent coercion?): mixprec gives {_describe(mixprec)}; torch "
                f"{_describe(oracle)}. Refuse it with a clear error, or list the decision in DEVIATIONS")
    if len(mixprec.outputs) != len(oracle.outputs):
        return f"{len(mixprec.outputs)} outputs, the oracle has {len(oracle.outputs)}"
    rtol = _rtol(case, name, values, oracle)
    for k, ((got, gdt), (want, wdt)) in enumerate(zip(mixprec.outputs, oracle.outputs)):
        if by_torch and gdt != wdt:
            return f"output {k} has dtype {gdt}, torch gives {wdt}"
        if by_torch or kind != "dtype":
            diff = _compare(f"output {k}", got, want, rtol)
            if diff is not None:
                return f"silent wrong value: {diff}" + (" (vs torch)" if by_torch else " (vs the NumPy reference)")
    if not by_torch or oracle.error is not None:
        return None  # no gradient to compare with (torch's backward itself failed: its limitation)
    if mixprec.error is not None:
        return f"backward fails where torch's works: {_describe(mixprec)}"
    for i, (g, w) in enumerate(zip(mixprec.grads, oracle.grads)):
        if g is None and w is None:
            continue
        g = np.zeros_like(w) if g is None else g
        w = np.zeros_like(g) if w is None else w
        if g.shape == w.shape and (np.isnan(w) & np.isfinite(g)).any():
            return (f"launders a nan: the gradient of floating input {i} is finite where torch's is nan "
                    f"(mixprec {g.ravel()[:6]}, torch {w.ravel()[:6]})")
        diff = _compare(f"gradient of floating input {i}", g, w, rtol)
        if diff is not None:
            return f"wrong gradient: {diff} (vs torch)"
    return None


# ----------------------------------------------------------------- the campaign
def oracle_for(case):
    """(torch version of the case's function or None, whether torch is its oracle)."""
    if torch is None:
        return None, False
    fn = torch_version(case.fn)
    if fn is None:
        return None, False
    values = case.inputs()
    want, got = run_reference(case, values), run_torch(case, values, fn, grads=False)
    if want.error is not None or got.error is not None or len(want.outputs) != len(got.outputs):
        return None, False
    for (g, _), (w, _) in zip(got.outputs, want.outputs):
        if _compare("", g, w, 1e-9) is not None:
            return None, False
    return fn, True


def campaign(case):
    """[(kind, variant name, failure or None)] for every hostile variant of one case."""
    if torch is None:
        return _campaign(case)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: torch's thread pool would only spin on a busy machine
    try:
        with sdpa_kernel(SDPBackend.MATH):  # attention as documented (see the module docstring)
            return _campaign(case)
    finally:
        torch.set_num_threads(threads)


def _campaign(case):
    fn, by_torch = oracle_for(case)
    results = []
    for kind, name, values in variants(case.inputs()):
        torch_judges = by_torch and (case.op, name) not in TORCH_CRASHES
        mixprec = run_mixprec(case, values, grads=torch_judges)
        oracle = run_torch(case, values, fn) if torch_judges else run_reference(case, values)
        failure = judge(case, kind, name, values, mixprec, oracle, torch_judges)
        if failure is not None and ((case.op, kind) in DEVIATIONS or (case.op, name.rstrip("0123456789"))
                                    in DEVIATIONS or (case.op, name) in DEVIATIONS):
            failure = None
        results.append((kind, name, failure))
    if case.grad:
        for k, v in enumerate(case.inputs()):
            if isinstance(v, np.ndarray) and v.dtype.kind in "biu":
                results.append(("edit", f"edit-input{k}-before-backward", edited_index_failure(case, k)))
    if case.op not in LAYOUT_IS_THE_POINT and any(isinstance(v, np.ndarray) and v.dtype.kind == "f"
                                                  for v in case.inputs()):
        results.append(("alias", "strided-views", aliasing_failure(case)))
    return results


# ----------------------------------------------------------------- inputs that are views
def aliasing_failure(case):
    """Every floating input as a strided view of a larger tensor (nan between its elements): outputs and gradients
    must equal those of contiguous inputs, the gaps get no gradient, and an output that is not a view shares no
    memory with any input. None when it holds, else what to fix."""
    values = case.inputs()

    def run(strided):
        bases, inputs = [], []
        for v in values:
            if isinstance(v, np.ndarray) and v.dtype.kind == "f":
                padded = np.full(v.shape + (2,), np.nan)
                padded[..., 0] = v
                base = mp.tensor(padded if strided else v, dtype=mp.float64, requires_grad=case.grad)
                bases.append(base)
                inputs.append(base[..., 0] if strided else base)
            else:
                inputs.append(mp.tensor(v) if isinstance(v, np.ndarray) else v)
        result = case.fn(*inputs)
        outs = [o for o in (result if isinstance(result, (tuple, list)) else [result]) if isinstance(o, mp.Tensor)]
        shared = [k for k, o in enumerate(outs) if not o._is_view() and any(
            isinstance(t, mp.Tensor) and np.shares_memory(o._array, t._array) for t in inputs)]
        grads = []
        wrt = [t for t in bases if t.requires_grad]
        live = [o for o in outs if o.requires_grad]
        if case.grad and live and wrt:
            loss = sum((mp.tensor(_projection(case.id, o.shape)) * o).sum() for o in live)
            grads = [None if g is None else g.numpy() for g in mp.autograd.grad(loss, wrt, allow_unused=True)]
        return [o.detach().numpy() for o in outs], grads, shared

    try:
        want, want_grads, _ = run(strided=False)
    except Exception:  # noqa: BLE001  (the case's clean run is other tests' business)
        return None
    try:
        got, got_grads, shared = run(strided=True)
    except Exception as exc:  # noqa: BLE001
        return f"fails on inputs that are strided views ({type(exc).__name__}: {exc}); contiguous inputs work"
    if shared:
        return (f"output {shared[0]} shares memory with an input without being a view of it (writing into one "
                "changes the other behind autograd's back); copy, or register the op view=True")
    for k, (g, w) in enumerate(zip(got, want)):
        diff = _compare(f"output {k}", g, w, 1e-12)
        if diff is not None:
            return f"a strided view as input gives another value: {diff}"
    for i, (g, w) in enumerate(zip(got_grads, want_grads)):
        if g is None or w is None:
            if (g is None) != (w is None):
                return f"the gradient of floating input {i} is missing for one layout only"
            continue
        if np.any(g[..., 1] != 0):
            return f"the gradient of floating input {i} reaches memory between the view's elements"
        diff = _compare(f"gradient of floating input {i}", g[..., 0], w, 1e-12)
        if diff is not None:
            return f"a strided view as input gives another gradient: {diff}"
    return None


# ----------------------------------------------------------------- an index tensor edited before backward
def _edited(v):
    """Other values of the same kind for an index or mask array: bools flipped, each integer moved to the next
    distinct value the case uses (so it stays in range), or by one when it uses a single value."""
    if v.dtype == np.bool_:
        return ~v
    used = np.unique(v)
    if len(used) > 1:
        return used[(np.searchsorted(used, v) + 1) % len(used)]
    return v - 1 if used[0] > 0 else v + 1


def edited_index_failure(case, k):
    """Input k (integer or bool) edited in place between forward and backward: backward must raise torch's
    "modified by an in-place operation" error, or, when no backward reads it, give the gradient of the forward
    that ran; never one computed from the edited values. None when it holds, else what to fix."""
    values = case.inputs()

    def gradients(edit):
        inputs = case.tensors(values, requires_grad=True)
        result = case.fn(*inputs)
        outs = [o for o in (result if isinstance(result, (tuple, list)) else [result])
                if isinstance(o, mp.Tensor) and o.requires_grad]
        if edit:
            inputs[k].copy_(mp.tensor(_edited(values[k])))
        if not outs:
            return []
        wrt = [t for t in inputs if isinstance(t, mp.Tensor) and t.requires_grad]
        loss = sum((mp.tensor(_projection(case.id, o.shape)) * o).sum() for o in outs)
        return [None if g is None else g.numpy() for g in mp.autograd.grad(loss, wrt, allow_unused=True)]
    want = gradients(edit=False)
    fix = ("read it in backward through ctx.inputs (never an array kept on ctx in forward), so an in-place edit "
           "is caught")
    try:
        got = gradients(edit=True)
    except RuntimeError as exc:
        if re.search("modified by an in-?place operation", str(exc)):
            return None
        return f"backward read input {k} after it was edited in place (it raised {type(exc).__name__}: {exc}); {fix}"
    except Exception as exc:  # noqa: BLE001
        return f"backward read input {k} after it was edited in place (it raised {type(exc).__name__}: {exc}); {fix}"
    for i, (g, w) in enumerate(zip(got, want)):
        if (g is None) != (w is None) or (g is not None and not np.array_equal(g, w, equal_nan=True)):
            return (f"silent wrong gradient: after input {k} was edited in place the gradient of floating input {i} "
                    f"changed (backward used the edited values); {fix}")
    return None


@pytest.mark.parametrize("case", [pytest.param(case, id=case.id) for case in CASES])
def test_hostile_inputs(case):
    found = {name: failure for kind, name, failure in campaign(case) if failure is not None}
    failures = [f"{case.id} [{name}] {failure}" for name, failure in found.items()]
    assert not failures, f"{len(failures)} hostile variants of {case.op!r} fail:\n" + "\n".join(failures)


@pytest.mark.gpu
@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES
                                  if sum(isinstance(v, np.ndarray) for v in c.inputs()) > 1])
def test_an_input_on_another_device_is_refused_clearly(case):
    """One tensor input on the GPU, the others on the CPU: a clear error naming the op (see unclear()), never a
    CuPy/NumPy traceback and never a result computed by moving data behind the caller's back."""
    values = case.inputs()
    failures = []
    for i, v in enumerate(values):
        if isinstance(v, np.ndarray):
            devices = ["cuda" if j == i else "cpu" for j in range(len(values))]
            out = run_mixprec(case, values, grads=False, devices=devices)
            why = f"computed {_describe(out)}; refuse mixed devices" if out.error is None else unclear(case, out)
            if why is not None:
                failures.append(f"{case.id} [input{i}-on-cuda] {why}")
    assert not failures, "\n".join(failures)


# ----------------------------------------------------------------- stateful calls
class _UserError(Exception):
    """An error of the user's own code (a callback), which must come out unchanged."""


def _raise_user_error(*args):
    raise _UserError("the user's callback failed")


class _Setup:
    """A model, Adam after two steps (so it has state), a StepLR and a checkpoint of all three on disk."""

    def __init__(self, path):
        mp.manual_seed(0)
        self.model = mp.nn.Sequential(mp.nn.Linear(3, 3), mp.nn.LayerNorm(3))
        self.model[1].weight = mp.nn.Parameter(mp.full((3,), 0.5))  # a reassigned parameter keeps its place
        self.opt = mp.optim.Adam(self.model.parameters(), lr=0.1)
        self.sched = mp.optim.lr_scheduler.StepLR(self.opt, step_size=1, gamma=0.5)
        self.x, self.path = mp.randn(4, 3), path
        for _ in range(2):
            self.train_step()
        mp.save(self.checkpoint(), path)

    def checkpoint(self):
        return {"model": self.model.state_dict(), "optim": self.opt.state_dict(), "sched": self.sched.state_dict()}

    def train_step(self):
        self.opt.zero_grad()
        (self.model(self.x) ** 2).sum().backward()
        self.opt.step()
        self.sched.step()

    def picture(self):
        """Everything a failed call must leave as it was, as comparable values."""
        params = [(n, p.numpy().tobytes(), p.requires_grad, type(p)) for n, p in self.model.named_parameters()]
        optim = self.opt.state_dict()
        state = sorted((i, k, np.asarray(v.numpy() if isinstance(v, mp.Tensor) else v).tobytes())
                       for i, s in optim["state"].items() for k, v in s.items())
        groups = [{k: v for k, v in g.items()} for g in optim["param_groups"]]
        ids = [id(p) for g in self.opt.param_groups for p in g["params"]]
        with open(self.path, "rb") as fh:
            on_disk = fh.read()
        return {"params": params, "param identities": ids, "optimizer state": state, "param groups": groups,
                "scheduler": self.sched.state_dict(), "checkpoint": on_disk,
                "autocast": mp.amp.is_autocast_enabled("cpu"), "profiling": observers.observing()}


def _broken_optim_state(s):
    state = s.opt.state_dict()
    state["state"][0]["exp_avg"] = np.zeros((5, 5), dtype=np.float32)
    state["state"][1]["exp_avg_sq"] = np.zeros(7, dtype=np.float32)  # late in the order: nothing applied first
    return state


def _profile_with_a_failing_handler(s):
    with mp.profiler.profile(on_trace_ready=_raise_user_error):
        s.model(s.x)


def _profile_a_schedule_with_a_failing_handler(s):
    with mp.profiler.profile(schedule=mp.profiler.schedule(wait=0, warmup=0, active=1),
                             on_trace_ready=_raise_user_error) as prof:
        s.model(s.x)
        prof.step()  # the cycle ends here: the handler raises inside step(), then again as the profiler exits


# name -> (the failing call, the error it must raise, what its message must name; None: the user's error)
STATEFUL = {
    "optimizer of one tensor": (lambda s: mp.optim.Adam(s.model[0].weight, lr=0.1), TypeError,
                                "Adam: params must be an iterable"),
    "param group as a set": (lambda s: s.opt.add_param_group({"params": {mp.nn.Parameter(mp.ones(1))}}),
                             TypeError, "Adam.add_param_group"),
    "param group repeating a parameter": (lambda s: s.opt.add_param_group({"params": [s.model[0].bias]}),
                                          ValueError, "Adam.add_param_group"),
    "hyper-parameter of the wrong type": (lambda s: mp.optim.Adam(s.model.parameters(), lr="0.1"), TypeError,
                                          "Adam: lr"),
    "step closure not callable": (lambda s: s.opt.step(closure=1.0), TypeError, "Adam.step"),
    "optimizer state of the wrong shape": (lambda s: s.opt.load_state_dict(_broken_optim_state(s)), ValueError,
                                           "Adam.load_state_dict"),
    "optimizer state of another optimizer": (
        lambda s: s.opt.load_state_dict({"state": {0: {"momentum_buffer": np.zeros((3, 3))}},
                                         "param_groups": s.opt.state_dict()["param_groups"]}),
        ValueError, "Adam.load_state_dict"),
    "module state of the wrong shape": (
        lambda s: s.model.load_state_dict({**s.model.state_dict(), "1.bias": mp.zeros(4)}), RuntimeError,
        "size mismatch for 1.bias"),
    "module state with a missing key": (
        lambda s: s.model.load_state_dict({k: v for k, v in s.model.state_dict().items() if k != "0.bias"}),
        RuntimeError, 'Missing key(s) in state_dict: "0.bias"'),
    "module state not a dict": (lambda s: s.model.load_state_dict(list(s.model.state_dict().items())), TypeError,
                                "load_state_dict"),
    "scheduler state of the wrong type": (lambda s: s.sched.load_state_dict({**s.sched.state_dict(), "gamma": "x"}),
                                          ValueError, "StepLR state_dict['gamma']"),
    "scheduler argument of the wrong type": (lambda s: mp.optim.lr_scheduler.StepLR(s.opt, 1, gamma="x"), TypeError,
                                             "StepLR: gamma"),
    "saving what a checkpoint cannot hold": (lambda s: mp.save({**s.checkpoint(), "extra": {1, 2}}, s.path),
                                             TypeError, "mp.save"),
    "saving to a text-mode file": (lambda s: mp.save(s.checkpoint(), __import__("io").StringIO()), TypeError,
                                   "mp.save"),
    "autocast left without entering": (lambda s: mp.autocast("cpu").__exit__(None, None, None), RuntimeError,
                                       "__exit__"),
    "override left without entering": (lambda s: mp.amp.override({"relu": "fp32"}).__exit__(None, None, None),
                                       RuntimeError, "override.__exit__"),
    "profiler whose on_trace_ready raises": (_profile_with_a_failing_handler, _UserError, None),
    "scheduled profiler whose on_trace_ready raises": (_profile_a_schedule_with_a_failing_handler, _UserError, None),
}


def stateful_failure(name, tmp_path):
    """Why the failing call ``name`` is not handled cleanly, or None."""
    call, expected, names = STATEFUL[name]
    setup, twin = _Setup(tmp_path / "a.mp"), _Setup(tmp_path / "b.mp")
    before = setup.picture()
    try:
        call(setup)
    except Exception as exc:  # noqa: BLE001
        error = exc
    else:
        return "did not fail"
    if not isinstance(error, expected):
        return f"raised {type(error).__name__}: {error}, expected a {expected.__name__}"
    if names is not None:
        why = unclear(_StatefulCall(names), Outcome(error=error))
        if why is not None:
            return why
    after = setup.picture()
    changed = [key for key in before if after[key] != before[key]]
    if changed:
        return f"the failed call changed {', '.join(changed)}"
    mp.load(setup.path)  # the checkpoint on disk still loads
    setup.train_step()
    twin.train_step()  # the next step gives what it gives without the failed call
    ours, theirs = setup.picture(), twin.picture()
    differ = [key for key in ("params", "optimizer state", "param groups", "scheduler") if ours[key] != theirs[key]]
    if differ:
        return f"the training step after the failed call differs from one without it in {', '.join(differ)}"
    return None


@dataclass
class _StatefulCall:
    """What unclear() reads of a case: the name its message must hold."""
    op: str


@pytest.mark.parametrize("name", list(STATEFUL))
def test_a_failed_stateful_call_leaves_training_state_intact(name, tmp_path):
    failure = stateful_failure(name, tmp_path)
    assert failure is None, f"{name}: {failure}"


def summary():
    """Per op: hostile variants tried and how many hold; then every failure."""
    tally, failures = {}, []
    for case in CASES:
        for kind, name, failure in campaign(case):
            tried, held = tally.get(case.op, (0, 0))
            tally[case.op] = (tried + 1, held + (failure is None))
            if failure is not None:
                failures.append(f"{case.id} [{name}] {failure}")
    return tally, failures


if __name__ == "__main__":
    tally, failures = summary()
    for op, (tried, held) in sorted(tally.items()):
        print(f"{op:32s} {held:4d} / {tried:4d}")
    total = sum(t for t, _ in tally.values())
    print(f"\n{sum(h for _, h in tally.values())} of {total} hostile variants hold "
          f"({len(CASES)} cases, {len(tally)} ops; "
          + ("oracle: torch where it maps, else the NumPy references)" if torch else
             "no torch: the error rule and the edits only)"))
    print("\n".join(failures), file=sys.stderr)
