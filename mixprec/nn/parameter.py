"""Parameter: a Tensor that a Module registers as learnable when it is assigned as an attribute."""
from __future__ import annotations

from .. import backend as _be
from .. import dtypes as _dt
from ..tensor import Tensor, tensor
from ..creation import empty


class Parameter(Tensor):
    """A leaf Tensor that requires grad (by default) and that Modules collect in parameters().

    ``Parameter(t)`` shares ``t``'s memory, as torch.nn.Parameter does; it is a
    new leaf even when ``t`` was computed by an op.
    """

    def __init__(self, data=None, requires_grad: bool = True):
        if data is None:
            array = empty(0)._array
        elif isinstance(data, Tensor):
            array = data._array
        elif _be.is_array(data):
            _dt.as_dtype(data.dtype)
            array = data
        else:
            array = tensor(data)._array
        if requires_grad and not _dt.is_floating(array.dtype):
            raise RuntimeError(f"only floating-point parameters can require gradients, got dtype "
                               f"{array.dtype.name}; pass requires_grad=False for an integer parameter")
        self._init(array, requires_grad=bool(requires_grad))

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()
