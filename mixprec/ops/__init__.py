"""Every op mixprec has, registered once.

registry.py says how an op is defined, dispatch.py what happens on every call,
autocast.py the autocast step of that call, policies.py the autocast policy of
every op. New ops go in a module of this package and are imported below; that
is all it takes for mp.<name> and Tensor methods to see them, and an entry in
policies.py gives one an autocast policy. ``mp.ops.<namespace>.<name>`` finds an op
by torch's spelling: ``mp.ops.aten.sin`` a built-in, ``mp.ops.mylib.foo`` the op
mp.library registered as "mylib::foo".
"""
from .registry import CastPolicy, Op, as_policy, get, names, ops, policy, register  # noqa: F401
from . import elementwise, bitwise, reduce, shape, matmul, activation  # noqa: F401,E402  (registration)
from . import nn_layers, pooling, padding, sampling  # noqa: F401,E402  (layers; pools; pad; grid_sample)
from . import math_ops, conv, norm_ops, losses  # noqa: F401,E402  (math, convolutions, norms, losses)
from . import attention, einsum  # noqa: F401,E402  (transformer ops)
from . import rnn, ctc  # noqa: F401,E402  (recurrent cells, lstm_layer, ctc_loss)
from . import complex_ops  # noqa: F401,E402  (complex numbers: real/imag/conj/angle/polar/views)
from . import fft, fft_hermitian_shifts  # noqa: F401,E402  (mp.fft, stft and istft)
from . import linalg_lu_cholesky  # noqa: F401,E402  (mp.linalg, part 1: LU, Cholesky, solves, inverses)
from . import quantile  # noqa: F401,E402  (quantile, nanquantile)
from . import statistics  # noqa: F401,E402  (var_mean, std_mean, nansum, nanmean, aminmax, cummax, logcumsumexp)
from . import sorting  # noqa: F401,E402  (sort, argsort, topk, kthvalue, median, nanmedian, mode)
from . import searching  # noqa: F401,E402  (unique, searchsorted, bucketize, isin, nonzero, argwhere)
from . import differences, histograms  # noqa: F401,E402  (diff, gradient, trapezoid; histc, histogram(dd), bincount)
from . import linalg_qr_eig_svd  # noqa: F401,E402  (mp.linalg, part 2: QR, eigenvalues, SVD)
from . import linalg_norms_products, linalg_lu_ldl  # noqa: F401,E402  (mp.linalg, parts 3-4: norms, products, LU, LDL)
from . import linalg_lowrank  # noqa: F401,E402  (svd_lowrank, pca_lowrank: randomized)
from . import special  # noqa: F401,E402  (torch.special's functions; mp.special)
from . import arrange  # noqa: F401,E402  (rearranging, repeating, splitting, joining: composites)
from . import rounding, pointwise, binary_math  # noqa: F401,E402  (floor/round...; sgn, nan_to_num...; hypot, lerp...)
from . import value_tests, conversions  # noqa: F401,E402  (isclose, allclose, equal...; byte, short, conj_physical...)
from . import inplace  # noqa: F401,E402  (in-place methods and views under autograd; binds Tensor.add_ etc.)
from . import scatter  # noqa: F401,E402  (masks, flat indices, scatters, scattered reductions; after inplace: binds masked_fill_ etc.)
from . import copies  # noqa: F401,E402  (the <view>_copy ops, fill)
from . import nn_activations  # noqa: F401,E402  (leaky_relu, elu, hardtanh, ... glu, rrelu)
from . import feature_dropout, nn_rearrange  # noqa: F401,E402  (channel and alpha dropout; one_hot, unfold...)
from . import nn_norms_losses  # noqa: F401,E402  (instance/local response norms, two losses)
from . import embedding_bag  # noqa: F401,E402  (embedding_bag)
from . import interpolate  # noqa: F401,E402  (interpolate and its upsample spellings)
from . import samplers  # noqa: F401,E402  (normal, bernoulli, multinomial, randint_like; uniform_ and the other fills)

from . import policies as _policies, registry as _registry  # noqa: E402
_policies.check(_registry._REGISTRY)  # every entry of the policy table names a registered op


class OpNamespace:
    """``mp.ops.<namespace>``: its ops as attributes ("aten": the built-ins; others: mp.library's custom ops)."""

    def __init__(self, name):
        self.name = name

    def __getattr__(self, op):
        found = _registry._REGISTRY.get(op if self.name == "aten" else f"{self.name}::{op}")
        if found is None or op.startswith("__"):
            raise AttributeError(f"'_OpNamespace' 'mp.ops.{self.name}' object has no attribute {op!r}")
        return found

    def __repr__(self):
        return f"mp.ops.{self.name}"


def __getattr__(name):
    """mp.ops.aten, and mp.ops.<ns> for each namespace that has a registered op."""
    if name == "aten" or any(n.startswith(name + "::") for n in _registry._REGISTRY):
        return OpNamespace(name)
    raise AttributeError(f"module 'mixprec.ops' has no attribute {name!r}")
from . import scaled_mm  # noqa: F401,E402  (_scaled_mm: the float8 matrix product)
