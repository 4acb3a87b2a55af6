"""DLPack: zero-copy exchange of arrays with other libraries (NumPy, PyTorch, JAX, CuPy), bfloat16 included.

NumPy's DLPack refuses ml_dtypes' bfloat16 in both directions (it knows only
int/uint/float/complex codes). A bfloat16 array is a run of 16-bit words, so on
the CPU mixprec exchanges its uint16 view and rewrites the dtype code inside
the DLPack capsule between kDLUInt and kDLBfloat: still zero-copy.
"""
from __future__ import annotations

import ctypes

import numpy as np

from .. import backend
from ..dtypes import IS_FLOAT8, bfloat16 as BFLOAT16
from .availability import DeviceUnavailableError, cuda_unavailable_reason

_KDL_CPU, _KDL_CUDA_HOST = 1, 3
_KDL_UINT, _KDL_BFLOAT = 1, 4


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensorHead(ctypes.Structure):
    """The leading fields of DLPack's DLTensor, up to its dtype."""
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("dtype", _DLDataType)]


_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype, _capsule_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype, _capsule_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]


def _capsule_dtype(capsule) -> _DLDataType:
    """The (writable) dtype field of the DLTensor inside a DLPack capsule."""
    name = _capsule_name(capsule)
    # DLManagedTensor starts with the DLTensor; DLManagedTensorVersioned puts
    # version (8 bytes), manager_ctx, deleter and flags (8 each) before it.
    offset = {b"dltensor": 0, b"dltensor_versioned": 32}[name]
    return _DLTensorHead.from_address(_capsule_pointer(capsule, name) + offset).dtype


class _CapsuleOwner:
    """Hands an already made capsule to a consumer's from_dlpack."""

    def __init__(self, capsule, device):
        self.capsule, self.device = capsule, device

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return self.device


def to_dlpack(a, *args, **kwargs):
    """A DLPack capsule for array ``a`` (what Tensor.__dlpack__ returns)."""
    if a.dtype in IS_FLOAT8:
        raise TypeError(f"__dlpack__: mixprec does not export {a.dtype.name} tensors through DLPack (NumPy and "
                        "CuPy have no DLPack code for float8); export the bits instead: t.numpy().view(numpy.uint8)")
    if isinstance(a, np.ndarray) and a.dtype == BFLOAT16:
        capsule = a.view(np.uint16).__dlpack__(*args, **kwargs)  # keeps the view (and so ``a``) alive
        _capsule_dtype(capsule).code = _KDL_BFLOAT
        return capsule
    return a.__dlpack__(*args, **kwargs)


def from_dlpack(obj):
    """Import a DLPack producer as a NumPy or CuPy array, zero-copy."""
    if not hasattr(obj, "__dlpack__"):
        raise TypeError(f"from_dlpack expects an object with __dlpack__ (an array or tensor), "
                        f"got {type(obj).__name__}")
    dev_type, dev_id = obj.__dlpack_device__() if hasattr(obj, "__dlpack_device__") else (_KDL_CPU, 0)
    if isinstance(obj, np.ndarray):
        return obj.view()  # NumPy itself cannot export bfloat16; a view is the zero-copy import
    if int(dev_type) in (_KDL_CPU, _KDL_CUDA_HOST):
        try:  # a versioned capsule: NumPy makes legacy ones read-only
            capsule = obj.__dlpack__(max_version=(1, 0))
        except TypeError:  # a producer older than DLPack 1.0
            capsule = obj.__dlpack__()
        dtype = _capsule_dtype(capsule)
        if dtype.code == _KDL_BFLOAT and dtype.bits == 16:
            dtype.code = _KDL_UINT
            return np.from_dlpack(_CapsuleOwner(capsule, (dev_type, dev_id))).view(BFLOAT16)
        return np.from_dlpack(_CapsuleOwner(capsule, (dev_type, dev_id)))
    if backend._cupy is None:
        raise DeviceUnavailableError(f"cannot import a CUDA DLPack tensor: {cuda_unavailable_reason()}")
    return backend._cupy.from_dlpack(obj)
