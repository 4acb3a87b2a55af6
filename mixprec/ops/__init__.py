"""Every op mixprec has, registered once.

registry.py says how an op is defined, dispatch.py what happens on every call,
autocast.py the autocast step of that call. New ops go in a module of this
package and are imported below; that is all it takes for mp.<name>, Tensor
methods and the autocast policy tables to see them.
"""
from .registry import CastPolicy, Op, as_policy, get, names, ops, policy, register  # noqa: F401
from . import elementwise, reduce, shape, linalg, activation  # noqa: F401,E402  (registration)
from . import nn_layers, pooling, padding, sampling  # noqa: F401,E402  (layers; pools; pad; grid_sample)
from . import math_ops, conv, norm_ops, losses  # noqa: F401,E402  (issue 3: autocast-listed ops)
