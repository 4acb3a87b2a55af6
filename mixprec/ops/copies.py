"""The ``<view>_copy`` ops (expand_copy, view_copy, unbind_copy, ...: the view op's result in new memory, as
torch's functionalization passes use them) and fill (a new tensor of input's shape holding one value).

Each ``<view>_copy`` is made by one rule from its view, so their forward, gradient and tangent are the view's.
"""
from __future__ import annotations

from .inplace import _overwrite
from .registry import register
from .scatter import _value_of


def _copy_of(view, name):
    """Register ``name``: ``view(input, ...)`` with every result cloned out of input's memory."""
    def forward(ctx, input, *args, **kwargs):
        out = view(input, *args, **kwargs)
        return tuple(o.clone() for o in out) if isinstance(out, (tuple, list)) else out.clone()
    forward.__name__ = name
    forward.__doc__ = f"{name[:-5]}() of input, in new memory (not a view)."
    return register(name, composite=True)(forward)


def _method(name):
    return lambda input, *args, **kwargs: getattr(input, name)(*args, **kwargs)


COPIES = {name + "_copy": _copy_of(_method(name), name + "_copy") for name in (
    "expand", "diagonal", "as_strided", "narrow", "view", "permute", "split_with_sizes", "unbind", "unfold",
    "squeeze", "unsqueeze", "transpose", "t")}
COPIES["alias_copy"] = _copy_of(lambda input: input.view(input.shape), "alias_copy")


@register("fill", composite=True, promote=())
def fill(ctx, input, value):
    """A new tensor of input's shape and dtype with every element ``value`` (a number, or a 0-d tensor whose
    gradient is the sum of the output's; input's is zero)."""
    return _overwrite(input, _value_of("fill", input, value)).clone()
