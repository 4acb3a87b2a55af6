"""mp.nn.functional: the nn-flavoured ops (relu, linear, softmax, ...), straight from the registry."""
from ..ops import registry as _reg


def _functional_ops():
    return {name: op for name, op in _reg._REGISTRY.items() if getattr(op, "functional", False)}


# torch.nn.functional names whose op is registered by aten's name (the plain name is taken by another op:
# Tensor.unfold is a view, F.unfold is im2col)
_RENAMED = {"unfold": "im2col", "fold": "col2im"}


def __getattr__(name):
    op = _functional_ops().get(_RENAMED.get(name, name))
    if op is None:
        raise AttributeError(f"mixprec.nn.functional has no function {name!r}")
    fn = _reg.public(op)
    globals()[name] = fn
    return fn


def __dir__():
    return sorted(set(globals()) | set(_functional_ops()) | set(_RENAMED))
