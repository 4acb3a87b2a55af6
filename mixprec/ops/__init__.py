"""Every op mixprec has, registered once.

registry.py says how an op is defined, dispatch.py what happens on every call,
autocast.py the autocast step of that call, policies.py the autocast policy of
every op. New ops go in a module of this package and are imported below; that
is all it takes for mp.<name> and Tensor methods to see them, and an entry in
policies.py gives one an autocast policy.
"""
from .registry import CastPolicy, Op, as_policy, get, names, ops, policy, register  # noqa: F401
from . import elementwise, bitwise, reduce, shape, matmul, activation  # noqa: F401,E402  (registration)
from . import nn_layers, pooling, padding, sampling  # noqa: F401,E402  (layers; pools; pad; grid_sample)
from . import math_ops, conv, norm_ops, losses  # noqa: F401,E402  (math, convolutions, norms, losses)
from . import attention, einsum  # noqa: F401,E402  (transformer ops)
from . import rnn, ctc  # noqa: F401,E402  (recurrent cells, lstm_layer, ctc_loss)
from . import complex_ops  # noqa: F401,E402  (complex numbers: real/imag/conj/angle/polar/views)
from . import fft  # noqa: F401,E402  (mp.fft and stft)
from . import linalg_lu_cholesky  # noqa: F401,E402  (mp.linalg, part 1: LU, Cholesky, solves, inverses)
from . import quantile  # noqa: F401,E402  (quantile, nanquantile)
from . import linalg_qr_eig_svd  # noqa: F401,E402  (mp.linalg, part 2: QR, eigenvalues, SVD)
from . import inplace  # noqa: F401,E402  (in-place methods and views under autograd; binds Tensor.add_ etc.)
from . import nn_activations  # noqa: F401,E402  (leaky_relu, elu, hardtanh, ... glu, rrelu)
from . import feature_dropout, nn_rearrange  # noqa: F401,E402  (channel and alpha dropout; one_hot, unfold...)
from . import nn_norms_losses  # noqa: F401,E402  (instance/local response norms, two losses)
from . import embedding_bag  # noqa: F401,E402  (embedding_bag)
from . import interpolate  # noqa: F401,E402  (interpolate and its upsample spellings)
from . import samplers  # noqa: F401,E402  (normal, bernoulli, multinomial, randint_like; uniform_ and the other fills)

from . import policies as _policies, registry as _registry  # noqa: E402
_policies.check(_registry._REGISTRY)  # every entry of the policy table names a registered op
