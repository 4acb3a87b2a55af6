"""alpha * (a @ b) + beta * c in one cuBLAS call: torch's addmm arithmetic for half precision on a GPU.

CuPy's float16 matmul returns the product already rounded to float16; adding
a bias to that rounds a second time. torch instead copies the bias into the
result and asks cuBLAS for ``alpha * a @ b + beta * result``: float32
accumulation and epilogue, one rounding. This module makes that call
(cublasGemmEx, or cublasGemmStridedBatchedEx for a batch) through CuPy's own
cuBLAS binding, for float16 and bfloat16 operands. The CPU path needs none of
this: NumPy widens to float32 and rounds once (ops/linalg.py).

cuBLAS is column-major. A row-major C = A @ B is the column-major
C^T = B^T @ A^T, so the call passes B first; a row-major operand is its own
transpose seen column-major (OP_N), and a transposed view of a contiguous
matrix, like ``weight.T`` in linear, is passed as OP_T without a copy.
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as _dt
from ..backend import cupy_module

# cudaDataType and cublasComputeType_t values (library_types.h, cublas_api.h).
_CUDA_TYPES = {_dt.float16: 2, _dt.bfloat16: 14}
_COMPUTE_32F = 68
_GEMM_DEFAULT_TENSOR_OP = 99
_OP_N, _OP_T = 0, 1


def supports(a, b) -> bool:
    """Whether gemm_plus takes these operands: CuPy arrays of one half-precision dtype, a a batch of matrices
    (bfloat16 GEMMs need compute capability 8.0)."""
    if isinstance(a, np.ndarray) or a.dtype != b.dtype or a.dtype not in _CUDA_TYPES or a.ndim < 2 or b.ndim < 1:
        return False
    return a.dtype == _dt.float16 or _bfloat16_gemms(a.device.id)


_bf16_ok: dict = {}


def _bfloat16_gemms(device_id: int) -> bool:
    ok = _bf16_ok.get(device_id)
    if ok is None:
        with cupy_module().cuda.Device(device_id) as device:
            ok = _bf16_ok[device_id] = int(device.compute_capability) >= 80
    return ok


def _layout(x):
    """(array, op, leading dimension) of a batch of matrices as cuBLAS takes it, copying only a layout
    cuBLAS cannot read (neither row- nor column-major in the last two dims)."""
    rows, cols = x.shape[-2:]
    item = x.itemsize
    if x.strides[-1] == item and (x.strides[-2] == cols * item or rows == 1):
        return x, _OP_N, max(cols, 1)
    if x.strides[-2] == item and (x.strides[-1] == rows * item or cols == 1):
        return x, _OP_T, max(rows, 1)
    return cupy_module().ascontiguousarray(x), _OP_N, max(cols, 1)


def _batch_stride(x, batch: tuple):
    """One element stride that steps through x's batch dims in order (0 when broadcast), or None."""
    strides = [s // x.itemsize for s, n in zip(x.strides[:len(batch)], batch) if n != 1]
    sizes = [n for n in batch if n != 1]
    if not strides:
        return 0
    if all(s == 0 for s in strides):
        return 0
    for i in range(len(strides) - 1):
        if strides[i] != strides[i + 1] * sizes[i + 1]:
            return None
    return strides[-1]


def gemm_plus(a, b, c, alpha=1.0, beta=1.0):
    """alpha * (a @ b) + beta * c, rounded once to a's dtype; c broadcasts to the product (ignored, even NaN,
    when beta is 0). a: (..., m, k); b: (..., k, n), or (k,) for a matrix-vector product."""
    cp = cupy_module()
    vector = b.ndim == 1
    if vector:
        b = b[:, None]
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    out = cp.empty(batch + (m, n), dtype=a.dtype)
    if beta != 0:
        out[...] = c[..., None] if vector and c.ndim >= 1 and c.shape[-1] == m else c
    if out.size and k:
        _call(cp, cp.broadcast_to(a, batch + (m, k)), cp.broadcast_to(b, batch + (k, n)), out, alpha, beta)
    elif out.size:  # an empty sum: the product is 0
        out[...] = (out.astype(np.float32) * np.float32(beta)).astype(out.dtype) if beta != 0 else 0
    return out[..., 0] if vector else out


def _call(cp, a, b, out, alpha, beta):
    batch = out.shape[:-2]
    count = math.prod(batch)
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
    kind = _CUDA_TYPES[out.dtype]
    scalars = np.array([alpha, beta], dtype=np.float32)  # read by cuBLAS on the host, during the call
    alpha_ptr, beta_ptr = scalars.ctypes.data, scalars.ctypes.data + 4
    cublas = cp.cuda.cublas
    handle = cp.cuda.device.get_cublas_handle()
    # row-major out = a @ b is column-major out^T = b^T @ a^T: b goes first
    if count == 1:
        cublas.gemmEx(handle, op_b, op_a, n, m, k, alpha_ptr, b.data.ptr, kind, ldb, a.data.ptr, kind, lda,
                      beta_ptr, out.data.ptr, kind, n, _COMPUTE_32F, _GEMM_DEFAULT_TENSOR_OP)
    else:
        cublas.gemmStridedBatchedEx(handle, op_b, op_a, n, m, k, alpha_ptr, b.data.ptr, kind, ldb, stride_b,
                                    a.data.ptr, kind, lda, stride_a, beta_ptr, out.data.ptr, kind, n, m * n,
                                    count, _COMPUTE_32F, _GEMM_DEFAULT_TENSOR_OP)
