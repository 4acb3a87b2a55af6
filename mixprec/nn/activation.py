"""Activation layers beyond layers.py's ReLU/GELU/SiLU/Tanh/Sigmoid: each holds its arguments and calls its
function in mp.nn.functional (ops/nn_activations.py), where the math, gradients and checks live."""
from __future__ import annotations

from . import functional as F
from .module import Module


class _Activation(Module):
    """A layer calling ``F.<_fn>(input, *args)``; ``_args`` names the attributes passed, in order."""
    _fn: str
    _args: tuple = ()

    def forward(self, input):
        return getattr(F, self._fn)(input, *(getattr(self, a) for a in self._args))

    def extra_repr(self):
        return ", ".join(f"{a}={getattr(self, a)}" for a in self._args)


def function_layer(name, fn, args=(), defaults=(), doc=""):
    """A layer (an _Activation subclass) calling F.<fn>, whose __init__ takes ``args`` (keyword or
    positional), the last ones with ``defaults``."""
    def __init__(self, *given, **named):
        Module.__init__(self)
        if len(given) > len(args):
            raise TypeError(f"{name}() takes at most {len(args)} arguments ({', '.join(args)}), got {len(given)}")
        values = dict(zip(args[len(args) - len(defaults):], defaults))
        values.update(zip(args, given))
        for k, v in named.items():
            if k not in args:
                raise TypeError(f"{name}() got an unexpected keyword argument {k!r}")
            values[k] = v
        missing = [a for a in args if a not in values]
        if missing:
            raise TypeError(f"{name}() missing required arguments: {', '.join(missing)}")
        for a in args:
            setattr(self, a, values[a])
    return type(name, (_Activation,), {"__init__": __init__, "_fn": fn, "_args": tuple(args), "__doc__": doc,
                                        "__module__": __name__})


_INPLACE = ("inplace",)
LeakyReLU = function_layer("LeakyReLU", "leaky_relu", ("negative_slope", "inplace"), (0.01, False),
                           "x where x > 0, else negative_slope * x.")
ELU = function_layer("ELU", "elu", ("alpha", "inplace"), (1.0, False), "x where x > 0, else alpha * (exp(x) - 1).")
CELU = function_layer("CELU", "celu", ("alpha", "inplace"), (1.0, False),
                      "max(0, x) + min(0, alpha * (exp(x / alpha) - 1)).")
SELU = function_layer("SELU", "selu", _INPLACE, (False,), "scale * elu(x, alpha) with the self-normalising constants.")
Hardtanh = function_layer("Hardtanh", "hardtanh", ("min_val", "max_val", "inplace"), (-1.0, 1.0, False),
                          "x clamped to [min_val, max_val].")
ReLU6 = function_layer("ReLU6", "relu6", _INPLACE, (False,), "min(max(0, x), 6).")
Hardswish = function_layer("Hardswish", "hardswish", _INPLACE, (False,), "x * relu6(x + 3) / 6.")
Hardsigmoid = function_layer("Hardsigmoid", "hardsigmoid", _INPLACE, (False,), "relu6(x + 3) / 6.")
Mish = function_layer("Mish", "mish", _INPLACE, (False,), "x * tanh(softplus(x)).")
Softsign = function_layer("Softsign", "softsign", doc="x / (1 + |x|).")
Softshrink = function_layer("Softshrink", "softshrink", ("lambd",), (0.5,),
                            "x - lambd above lambd, x + lambd below -lambd, 0 between.")
Hardshrink = function_layer("Hardshrink", "hardshrink", ("lambd",), (0.5,), "x outside [-lambd, lambd], 0 inside.")
Tanhshrink = function_layer("Tanhshrink", "tanhshrink", doc="x - tanh(x).")
Threshold = function_layer("Threshold", "threshold", ("threshold", "value", "inplace"), (False,),
                           "value where x <= threshold, else x.")
LogSigmoid = function_layer("LogSigmoid", "logsigmoid", doc="log(sigmoid(x)).")
GLU = function_layer("GLU", "glu", ("dim",), (-1,), "a * sigmoid(b), a and b the halves of the input along dim.")
Softplus = function_layer("Softplus", "softplus", ("beta", "threshold"), (1.0, 20.0),
                          "log(1 + exp(beta * x)) / beta, linear where beta * x > threshold.")


class RReLU(Module):
    """Leaky relu with a slope drawn from [lower, upper] per negative element in training, (lower + upper) / 2 in
    eval (mixprec's generator: mp.manual_seed makes it reproducible)."""

    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3, inplace: bool = False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self):
        return f"lower={self.lower}, upper={self.upper}, inplace={self.inplace}"
