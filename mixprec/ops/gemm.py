"""Matrix products on arrays, the way a GPU's GEMM computes them: float32 accumulation, one rounding.

    product(a, b, out_dtype)        a @ b; half inputs accumulate in float32 and are rounded once to
                                    out_dtype (their own dtype by default; float32 keeps the product unrounded)
    addmm(c, a, b, alpha, beta)     alpha * (a @ b) + beta * c in one GEMM, rounded once (torch's addmm)
    on_gpu(a, b)                    whether these operands take the cuBLAS path below
    wanted_only, in_places          the convention of a backward op that computes several gradients of
                                    a product at once (_mm_backward, _linear_backward, _conv_backward)

On the CPU a half product widens both operands to float32 and uses NumPy's
float32 BLAS: the arithmetic of a GPU GEMM with a float32 compute type.

On a GPU every float product of matrices is one cuBLAS call (cublasGemmEx, or
cublasGemmStridedBatchedEx for a batch) that mixprec makes itself, through
ctypes on the cuBLAS library CuPy loaded, with CuPy's handle on the current
stream. Three reasons not to use CuPy's matmul: it returns a half product
already rounded, so a bias added after rounds twice (torch adds it inside the
GEMM); it cannot hand a half product over unrounded, so a gradient or
convolution that sums products would have to widen its operands to float32
and lose the tensor cores; and CuPy refuses cuBLAS calls inside a CUDA-graph
capture, which a direct call may make (cuBLAS itself supports capture).

cuBLAS is column-major. A row-major C = A @ B is the column-major
C^T = B^T @ A^T, so the call passes B first; a row-major operand is its own
transpose seen column-major (OP_N), and a transposed view of a contiguous
matrix, like ``weight.T`` in linear, is passed as OP_T without a copy.
"""
from __future__ import annotations

import ctypes
import math

import numpy as np

from .. import dtypes as _dt
from ..backend import array_module, cupy_module
from ..backend.cuda_libraries import cuda_library

_P, _I, _L = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
_CUBLAS = {  # the cuBLAS functions called here, with their C argument types (cublas_api.h)
    "cublasSetStream_v2": (_P, _P),
    "cublasSetMathMode": (_P, _I),
    "cublasGetMathMode": (_P, ctypes.POINTER(_I)),
    "cublasGemmEx": (_P, _I, _I, _I, _I, _I, _P, _P, _I, _I, _P, _I, _I, _P, _P, _I, _I, _I, _I),
    "cublasGemmStridedBatchedEx": (_P, _I, _I, _I, _I, _I, _P, _P, _I, _I, _L, _P, _I, _I, _L, _P, _P, _I, _I, _L,
                                   _I, _I, _I),
}
# cudaDataType, cublasComputeType_t and cublasOperation_t values (library_types.h, cublas_api.h).
_CUDA_TYPES = {_dt.float16: 2, _dt.bfloat16: 14, np.dtype(np.float32): 0, np.dtype(np.float64): 1}
_COMPUTE = {_dt.float16: 68, _dt.bfloat16: 68, np.dtype(np.float32): 68, np.dtype(np.float64): 70}  # 32F, 64F
_GEMM_DEFAULT_TENSOR_OP = 99
_OP_N, _OP_T = 0, 1
# cublasMath_t's flag that keeps split-K partial sums in float32. Without it cuBLAS may add a half GEMM's partial
# sums in half precision (torch allows that by default): on an H200 that puts a bfloat16 product 3 ulps off,
# and a near-cancelling element thousands.
_FLOAT32_REDUCTION = 16


def on_gpu(a, b) -> bool:
    """CuPy operands of one float dtype that cuBLAS multiplies (bfloat16 needs compute capability 8.0), at
    least one of them a matrix."""
    if isinstance(a, np.ndarray) or a.dtype != b.dtype or a.dtype not in _CUDA_TYPES or (a.ndim < 2 and b.ndim < 2):
        return False
    return a.dtype != _dt.bfloat16 or _bfloat16_gemms(a.device.id)


def product(a, b, out_dtype=None):
    """a @ b with float32 accumulation for half inputs, rounded once to out_dtype (default a's dtype)."""
    out_dtype = np.dtype(out_dtype or a.dtype)
    if on_gpu(a, b):
        return _gemm(a, b, None, 1.0, 0.0, out_dtype)
    if a.dtype in _dt.LOW_PRECISION:
        return (a.astype(np.float32) @ b.astype(np.float32)).astype(out_dtype, copy=False)
    return (a @ b).astype(out_dtype, copy=False)


def addmm(c, a, b, alpha=1.0, beta=1.0):
    """alpha * (a @ b) + beta * c on a GPU (on_gpu(a, b)): c broadcasts to the product and is read inside the
    GEMM, before its one rounding (ignored, even NaN, when beta is 0)."""
    return _gemm(a, b, c, alpha, beta, a.dtype)


_bf16_ok: dict = {}


def _bfloat16_gemms(device_id: int) -> bool:
    ok = _bf16_ok.get(device_id)
    if ok is None:
        with cupy_module().cuda.Device(device_id) as device:
            ok = _bf16_ok[device_id] = int(device.compute_capability) >= 80
    return ok


def _gemm(a, b, c, alpha, beta, out_dtype):
    cp = array_module(a)
    if a.ndim > 2 and b.ndim == 2 and a.flags.c_contiguous and (c is None or c.ndim <= 1):
        # a stack of rows times one matrix (linear's input @ weight.T): one GEMM over all the rows
        flat = _gemm(a.reshape(-1, a.shape[-1]), b, c, alpha, beta, out_dtype)
        return flat.reshape(a.shape[:-1] + (b.shape[-1],))
    vector_a, vector_b = a.ndim == 1, b.ndim == 1
    if vector_a:
        a = a[None, :]
    if vector_b:
        b = b[:, None]
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"matmul: inner dimensions differ ({a.shape[-1]} and {b.shape[-2]})")
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    out = cp.empty(batch + (m, n), dtype=out_dtype)
    if beta != 0:
        out[...] = c if not (vector_b and c.ndim and c.shape[-1] == m) else c[..., None]
    if out.size and k:
        _call(cp, cp.broadcast_to(a, batch + (m, k)), cp.broadcast_to(b, batch + (k, n)), out, alpha, beta)
    elif out.size:  # an empty sum: the product is 0, and beta * c is rounded once
        wide = np.float64 if out_dtype == np.float64 else np.float32
        out[...] = (out.astype(wide) * wide(beta)).astype(out_dtype) if beta != 0 else 0
    if vector_b:
        out = out[..., 0]
    return out[..., 0, :] if vector_a else out


def _layout(x):
    """(array, op, leading dimension) of a batch of matrices as cuBLAS reads it, copying only a layout it
    cannot read (neither row- nor column-major in the last two dims)."""
    rows, cols = x.shape[-2:]
    item = x.itemsize
    if x.strides[-1] == item and (x.strides[-2] == cols * item or rows == 1):
        return x, _OP_N, max(cols, 1)
    if x.strides[-2] == item and (x.strides[-1] == rows * item or cols == 1):
        return x, _OP_T, max(rows, 1)
    return array_module(x).ascontiguousarray(x), _OP_N, max(cols, 1)


def _batch_stride(x, batch: tuple):
    """One element stride that steps through x's batch dims in order (0 when broadcast), or None."""
    steps = [(s // x.itemsize, n) for s, n in zip(x.strides[:len(batch)], batch) if n != 1]
    if all(s == 0 for s, _ in steps):
        return 0
    if any(s < 0 for s, _ in steps):  # a reversed batch (flip): cuBLAS documents no negative strides
        return None
    for (outer, _), (inner, size) in zip(steps, steps[1:]):
        if outer != inner * size:
            return None
    return steps[-1][0]


def _call(cp, a, b, out, alpha, beta):
    batch = out.shape[:-2]
    a, op_a, lda = _layout(a)
    b, op_b, ldb = _layout(b)
    stride_a, stride_b = _batch_stride(a, batch), _batch_stride(b, batch)
    if stride_a is None:
        a, op_a, lda = cp.ascontiguousarray(a), _OP_N, a.shape[-1]
        stride_a = _batch_stride(a, batch)
    if stride_b is None:
        b, op_b, ldb = cp.ascontiguousarray(b), _OP_N, b.shape[-1]
        stride_b = _batch_stride(b, batch)
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    kind, out_kind, compute = _CUDA_TYPES[a.dtype], _CUDA_TYPES[out.dtype], _COMPUTE[a.dtype]
    scalar = np.float64 if compute == 70 else np.float32
    scalars = np.array([alpha, beta], dtype=scalar)  # read by cuBLAS on the host, during the call
    alpha_ptr, beta_ptr = scalars.ctypes.data, scalars.ctypes.data + scalars.itemsize
    handle = cp.cuda.device.get_cublas_handle()  # (first: it loads the library that cuda_library finds)
    cublas = cuda_library("cublas", _CUBLAS)
    cublas.check("cublasSetStream_v2", handle, cp.cuda.get_current_stream().ptr)
    count = math.prod(batch)
    mode = ctypes.c_int()  # CuPy's handle, in the host pointer mode CuPy keeps it in; its math mode is restored
    cublas.check("cublasGetMathMode", handle, ctypes.byref(mode))
    cublas.check("cublasSetMathMode", handle, mode.value | _FLOAT32_REDUCTION)  # float32 accumulation, all of it
    try:  # row-major out = a @ b is column-major out^T = b^T @ a^T: b goes first
        if count == 1:
            cublas.check("cublasGemmEx", handle, op_b, op_a, n, m, k, alpha_ptr, b.data.ptr, kind, ldb, a.data.ptr,
                         kind, lda, beta_ptr, out.data.ptr, out_kind, n, compute, _GEMM_DEFAULT_TENSOR_OP)
        else:
            cublas.check("cublasGemmStridedBatchedEx", handle, op_b, op_a, n, m, k, alpha_ptr, b.data.ptr, kind,
                         ldb, stride_b, a.data.ptr, kind, lda, stride_a, beta_ptr, out.data.ptr, out_kind, n, m * n,
                         count, compute, _GEMM_DEFAULT_TENSOR_OP)
    finally:
        cublas.check("cublasSetMathMode", handle, mode.value)


# An op that computes several gradients at once (_conv_backward, _linear_backward) takes ``wanted``, one bool per
# gradient, and returns only those: these two helpers are the two halves of that convention.
def wanted_only(wanted, parts):
    """The parts (functions of no arguments) that ``wanted`` asks for, called, as a tuple."""
    return tuple(part() for want, part in zip(wanted, parts) if want)


def in_places(wanted, values):
    """``values`` (one per True in ``wanted``) put back in their places, None elsewhere."""
    given = iter(values)
    return tuple(next(given) if want else None for want in wanted)
