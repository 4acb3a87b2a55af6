"""mp.nn.functional: the nn-flavoured ops (relu, linear, softmax, ...), straight from the registry."""
from ..ops import registry as _reg


def _functional_ops():
    return {name: op for name, op in _reg._REGISTRY.items() if getattr(op, "functional", False)}


def __getattr__(name):
    op = _functional_ops().get(name)
    if op is None:
        raise AttributeError(f"mixprec.nn.functional has no function {name!r}")
    fn = _reg.public(op)
    globals()[name] = fn
    return fn


def __dir__():
    return sorted(set(globals()) | set(_functional_ops()))
