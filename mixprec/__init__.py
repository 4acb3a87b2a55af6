"""mixprec: a small mixed-precision training engine on NumPy and CuPy.

    import mixprec as mp
    x = mp.randn(4, 3, requires_grad=True)
    (x @ x.T).sum().backward()
"""
import warnings as _warnings

# Overflow to inf and 0/0 -> NaN are expected in low precision: that is what loss
# scaling detects and handles, and torch is silent about them too. Silence NumPy's
# floating-point RuntimeWarnings raised inside mixprec's own code only (no per-call
# cost; a user's own NumPy code still warns).
_warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"mixprec(\.|$)")

from . import ops  # noqa: E402,F401  (registers every op before anything binds to them)
from .backend.availability import DeviceUnavailableError, device_count, is_cuda_available  # noqa: F401
from .backend.devices import Device, device, get_default_device, set_default_device  # noqa: F401
from .dtypes import (bfloat16, bool_, cdouble, cfloat, complex64, complex128, double, float, float16,  # noqa: F401
                     finfo, float32, float64, half, iinfo, int8, int16, int32, int64, long, result_type, short, uint8,
                     float8_e4m3fn, float8_e5m2, float8_e8m0fnu)
from .tensor import Tensor, tensor  # noqa: F401
from .creation import (arange, as_tensor, empty, empty_like, eye, from_dlpack, from_numpy, full,  # noqa: F401
                       full_like, linspace, ones, ones_like, zeros, zeros_like)
from .random import manual_seed, rand, rand_like, randint, randn, randn_like, randperm  # noqa: F401
from .autograd import (enable_grad, inference_mode, is_anomaly_check_nan_enabled, is_anomaly_enabled,  # noqa: F401
                       is_grad_enabled, is_inference_mode_enabled, no_grad, set_grad_enabled)
from .ops.value_tests import allclose, equal  # noqa: F401  (Python bools, not ops)
from .ops.conversions import resolve_conj, resolve_neg  # noqa: F401  (no lazy bits: the tensor itself)
from . import autograd, amp, nn, optim  # noqa: F401
from .amp import autocast  # noqa: F401  (mp.autocast, torch.autocast's twin)
from .amp import (clear_autocast_cache, get_autocast_dtype, is_autocast_available,  # noqa: F401  (torch.*'s)
                  is_autocast_cache_enabled, is_autocast_enabled, set_autocast_cache_enabled, set_autocast_dtype,
                  set_autocast_enabled)
from .amp import GradScaler  # noqa: F401  (mp.GradScaler, as torch.amp.GradScaler)
from . import cuda, cpu, testing  # noqa: F401  (torch.cuda / torch.cpu names; mp.testing)
from . import accelerator  # noqa: F401  (torch.accelerator's device-agnostic calls)
from .cuda import OutOfMemoryError  # noqa: F401  (torch.OutOfMemoryError)
from . import observers, profiler  # noqa: F401  (mp.observers: who watches op calls; mp.profiler)
from .autograd import profiler as _autograd_profiler  # noqa: E402  (mp.autograd.profiler, over mp.profiler)
del _autograd_profiler
from .serialization import CheckpointError, load, save  # noqa: F401  (checkpoints, no pickle)
from .random import get_rng_state, initial_seed, seed, set_rng_state  # noqa: F401
from . import random  # noqa: F401
from . import distributed  # noqa: F401  (MPI / NCCL data parallelism; imports no MPI until used)
from . import fft, linalg  # noqa: F401,E402  (mp.fft and mp.linalg: torch.fft's and torch.linalg's functions)
from . import special  # noqa: F401,E402  (mp.special: torch.special's functions)
from . import masked  # noqa: F401,E402  (mp.masked: torch.masked's reductions with a mask)
from . import library  # noqa: F401,E402  (mp.library: custom ops, torch.library's API)
from .ops.arrange import broadcast_shapes  # noqa: F401,E402  (a shape function, no op)
from .creation import (empty_permuted, empty_strided, logspace, scalar_tensor, tril_indices,  # noqa: F401,E402
                       triu_indices, unravel_index)
from . import signal  # noqa: F401,E402  (mp.signal.windows: torch.signal.windows' window functions)

bool = bool_  # mp.bool, like torch.bool


def _export_ops():
    """mp.<name> for every registered op with a plain name (operators stay methods)."""
    from .ops.registry import _REGISTRY, public
    for name, op in _REGISTRY.items():
        if name.isidentifier() and not name.startswith("_") and name not in globals():
            globals()[name] = public(op)


_export_ops()
_scaled_mm = ops.registry.public(ops.get("_scaled_mm"))  # (torch's name has the underscore too)
__version__ = "0.1.0"


def __getattr__(name):
    """mp.<name> for ops registered after import (a user's own ops): looked up in the registry."""
    from .ops.registry import _REGISTRY, public
    op = _REGISTRY.get(name)
    if op is None or name.startswith("_"):
        raise AttributeError(f"module 'mixprec' has no attribute {name!r}")
    globals()[name] = fn = public(op)
    return fn
