"""Which ops take float8 tensors: torch's CPU kernels for them, found by trying each op in torch 2.13.

torch computes with float8 tensors almost nowhere: they are made, cast, moved and reshaped, compared for
(in)equality, tested for NaN, and multiplied in ``_scaled_mm``. Every other op raises NotImplementedError
("not implemented for 'Float8_e4m3fn'"), after promotion has refused any mix of a float8 dtype with another
(dtypes.promote). Dispatch asks :func:`check` when a call's first tensor is of a float8 dtype, so the rule
lives here and costs the other calls one set lookup.

Not followed: torch also multiplies two float8 tensors elementwise (``mul``) and as matrices (``mm``),
rounding the float32 result back to float8; mixprec refuses both (use ``_scaled_mm``, or cast first).
"""
from __future__ import annotations

from .. import dtypes as _dt
from ..backend.float8 import fill_value
from ..tensor import Tensor

# data movement (views, copies, joins, splits, indexing), writes (copy_, fill_, setitem), comparisons for
# equality, and the few value tests torch has kernels for
TAKE_FLOAT8 = frozenset((
    "_to_copy", "clone", "contiguous", "_overwrite", "_copy_slices", "fill", "index_put", "__getitem__",
    "reshape", "reshape_as", "view", "view_as", "view_copy", "flatten", "unflatten", "ravel",
    "transpose", "transpose_copy", "t_copy", "permute", "permute_copy", "movedim", "moveaxis",
    "squeeze", "squeeze_copy", "unsqueeze", "unsqueeze_copy", "expand", "expand_as", "expand_copy", "broadcast_to",
    "narrow", "narrow_copy", "select", "slice", "diagonal", "diagonal_copy", "diag", "as_strided", "as_strided_copy",
    "alias_copy", "unfold", "unfold_copy", "atleast_1d", "atleast_2d", "atleast_3d",
    "split", "split_with_sizes", "split_with_sizes_copy", "unsafe_split", "chunk", "unsafe_chunk", "tensor_split",
    "hsplit", "vsplit", "dsplit", "unbind", "unbind_copy",
    "cat", "concatenate", "stack", "hstack", "vstack", "dstack", "column_stack", "row_stack",
    "repeat", "tile", "roll", "index_select", "masked_select", "where",
    "eq", "ne", "isnan", "isinf", "isfinite", "any", "all", "abs", "_scaled_mm",
))
_NOT_FOR = {  # the formats torch has no kernel of these for
    "abs": (_dt.float8_e8m0fnu,), "index_put": (_dt.float8_e8m0fnu,),
    "isinf": (_dt.float8_e4m3fn, _dt.float8_e8m0fnu), "isfinite": (_dt.float8_e4m3fn,)}


def scalar(value, dtype):
    """A weak number beside float8 tensors, as a scalar of their ``dtype`` rounded as torch rounds (dispatch)."""
    return fill_value(value, dtype)


def check(op, dtype, args):
    """Refuse a call of ``op`` on a tensor of float8 ``dtype`` unless torch has a kernel for it: torch's
    RuntimeError when a data argument of another dtype would need promoting (torch promotes first), else its
    NotImplementedError."""
    if op.name in TAKE_FLOAT8 and dtype not in _NOT_FOR.get(op.name, ()):
        return
    for i in op.promote:
        for a in (args[i] if isinstance(args[i], (list, tuple)) else (args[i],)) if i < len(args) else ():
            if isinstance(a, Tensor):
                _dt.promote(dtype, a.dtype)  # (raises for any other dtype)
    raise NotImplementedError(
        f"{op.name}: not implemented for {dtype.name} tensors (as in torch, float8 tensors are only moved, "
        "reshaped, indexed, compared for equality and multiplied by _scaled_mm; cast to a wider dtype first, "
        "e.g. t.float())")
