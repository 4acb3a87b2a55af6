"""How mixprec prints things: a tensor's repr; for the AMP tools (mp.amp.trace, mp.profiler,
mp.amp.inspect) dtype short names, autocast rules, times and tables, so the three tools read alike; and the
core's longer diagnostics (the in-place version error, a banned op's hint, a kernel that fails to compile,
the forward call's stack that anomaly mode keeps)."""
from __future__ import annotations

import os
import re
import traceback

import numpy as np

SHORT_DTYPES = {"float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64", "int64": "i64",
                "int32": "i32", "bool": "bool"}
DTYPE_LEGEND = "f16 float16, bf16 bfloat16, f32 float32, f64 float64, i64 int64"


def tensor_repr(t) -> str:
    """``tensor([...], dtype=..., device=..., grad_fn=<...>)``, as torch prints a tensor (4 digits)."""
    arr = t.numpy()
    if arr.dtype.kind == "V" or arr.dtype.name.startswith("float8"):  # bfloat16 and float8: printed as float32
        arr = arr.astype(np.float32)
    body = np.array2string(arr, separator=", ", precision=4, prefix="tensor(")
    extra = [f"dtype={t.dtype.name}"] if t.dtype.name not in ("float32", "int64", "complex64") else []
    if t.device.type != "cpu":
        extra.append(f"device='{t.device}'")
    if t.grad_fn is not None:
        extra.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t.requires_grad:
        extra.append("requires_grad=True")
    return f"tensor({body}{''.join(', ' + e for e in extra)})"


def short(dtype) -> str:
    """"bf16" for bfloat16 (any dtype's name when it has no short one; "-" for None)."""
    return "-" if dtype is None else SHORT_DTYPES.get(dtype.name, dtype.name)


def dtypes_text(dtypes) -> str:
    """"f32, bf16" for a sequence of dtypes."""
    return ", ".join(map(short, dtypes))


def rule_text(rule) -> str:
    """An autocast rule: the policy's name, or "cast to <dtype>" for a fixed dtype ("-" for none)."""
    if rule is None:
        return "-"
    return f"cast to {rule.name}" if isinstance(rule, np.dtype) else rule.value


def policy_text(rule, lower) -> str:
    """What autocast applied: "lower_precision_fp [bf16]", "fp32 [f16]", "cast to float16 [f16]", or "-"."""
    return "-" if rule is None else f"{rule_text(rule)} [{short(lower)}]"


def time_text(us: float) -> str:
    """A duration given in microseconds, in the unit that reads best (as torch's profiler tables)."""
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def text_table(head, rows, right=()) -> str:
    """Columns padded to their widest cell, a dashed rule under the header; ``right``: column indexes
    aligned right (numbers)."""
    widths = [max([len(h)] + [len(r[k]) for r in rows]) for k, h in enumerate(head)]

    def line(cells):
        return "  ".join(c.rjust(w) if k in right else c.ljust(w)
                         for k, (c, w) in enumerate(zip(cells, widths))).rstrip()
    return "\n".join([line(head), line(["-" * w for w in widths])] + [line(r) for r in rows])


def markdown_table(head, rows, right=()) -> str:
    """The same table in GitHub markdown (``|`` inside cells escaped)."""
    def cells(r):
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |"
    rule = "|" + "|".join("---:" if k in right else "---" for k in range(len(head))) + "|"
    return "\n".join([cells(head), rule] + [cells(r) for r in rows])


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + "s" * (n != 1)


# ---------------------------------------------------------------- the core's longer diagnostics
def version_error(node, is_output, what, now, expected) -> str:
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


# the error of an op that autocast's policy bans, by op name (ops/autocast.target_dtypes; others get a generic one)
BANNED_HINTS = {
    "binary_cross_entropy": (
        "binary_cross_entropy is unsafe to autocast on CUDA: its gradient can overflow float16 near 0 and 1. "
        "Many models apply a sigmoid right before it; combine the two with "
        "mp.nn.functional.binary_cross_entropy_with_logits (or nn.BCEWithLogitsLoss), which is safe to "
        "autocast. To keep binary_cross_entropy, run it under mp.autocast('cuda', enabled=False) on float32 "
        "inputs."),
}


def compile_failure(filename, exc) -> str:
    """Why CuPy could not compile a kernel source, and what to install when headers are missing."""
    log = str(exc)
    message = f"CuPy could not compile mixprec's kernel {filename}: {log.strip()[:2000]}"
    if re.search(r"cannot open source file|vector_types\.h|cuda_fp16|cuda_runtime|header", log, re.I):
        message += ("\nCuPy needs the CUDA headers to compile any kernel (CuPy 14, and CuPy 13 with CUDA >= 12.2, "
                    "look for them even though mixprec's kernels include none). Install them with "
                    "pip install \"cupy-cuda12x[ctk]\" (\"cupy-cuda13x[ctk]\" for CUDA 13), or set CUDA_PATH to a "
                    "CUDA toolkit.")
    return message


def caller_stack() -> str:
    """The stack of the code that called into mixprec (anomaly mode keeps it on the graph node)."""
    frames = traceback.extract_stack()
    while frames and frames[-1].filename.startswith(_PACKAGE):
        frames.pop()
    return "".join(traceback.format_list(frames))


_PACKAGE = os.path.dirname(__file__) + os.sep  # mixprec/
