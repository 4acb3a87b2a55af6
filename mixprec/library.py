"""mp.library: your own ops, written as functions of Tensors, made registry ops (torch.library's Python API).

    @mp.library.custom_op("mylib::numpy_sin", mutates_args=())
    def numpy_sin(x: mp.Tensor) -> mp.Tensor:
        return mp.from_numpy(np.sin(x.numpy()))

    numpy_sin.register_autograd(backward, setup_context=setup_context)
    numpy_sin.register_fake(lambda x: mp.empty_like(x))

The decorated function becomes a :class:`CustomOpDef`, entered in mixprec's op registry
(mixprec/ops/registry.py) under its qualified name "mylib::numpy_sin": every call goes through
:func:`mixprec.ops.dispatch.dispatch`, so observers (mp.profiler, mp.amp.trace, the inspector) see
it as they see a built-in, and ``mp.ops.mylib.numpy_sin`` finds it. A call:

1. binds the arguments to the op's schema (inferred from the type hints, or given) and checks the
   Tensor ones;
2. under :class:`FakeTensorMode` runs the fake impl on fake inputs and stops there;
3. picks the kernel of the inputs' device type (``register_kernel``; else the function itself);
4. inside an autocast region for that device type, applies the op's rule (``register_autocast``):
   floating inputs are cast (differentiable casts, as built-ins get) and the kernel runs with
   autocast off;
5. runs the kernel without recording a graph, bumps the version of each tensor the op mutates, and
   records one graph node whose backward is ``register_autograd``'s (the op's node as a custom
   autograd.Function's: mixprec/autograd/function.py).

Fake tensors are real Tensors that hold no data: a zero-strided view of a single zero, so they
carry shape, dtype and device and cost no memory. ``opcheck`` compares an op's fake impl with its
kernel on them.
"""
from __future__ import annotations

import collections.abc
import contextlib
import inspect
import numbers
import re
import threading
import typing
import weakref

import numpy as np

from . import dtypes as _dt
from .amp import autocast_mode as _amp
from .autograd import grad_mode as _gm
from .autograd.function import Function, FunctionOp
from .autograd.gradcheck import gradcheck as _gradcheck
from .backend import array_module as _array_module
from .backend.devices import Device, as_device, device as _device_cm, on_device as _on
from .observers import current_call
from .ops import autocast as _autocast
from .ops import dispatch as _dispatch
from .ops import registry as _registry
from .tensor import Tensor

__all__ = ["custom_op", "CustomOpDef", "register_autograd", "register_fake", "register_kernel",
           "register_autocast", "opcheck", "OpCheckError", "MetadataMismatchError", "infer_schema", "Library",
           "define", "impl", "FakeTensorMode", "fake_tensor"]

DEVICE_TYPES = ("cpu", "cuda")  # where mixprec runs kernels
# device types torch accepts for a kernel: a kernel for one mixprec never runs on is kept, never called
_TORCH_DEVICE_TYPES = DEVICE_TYPES + ("ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve", "fpga",
                                      "maia", "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia",
                                      "privateuseone")
_OPCHECK_TESTS = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_static",
                  "test_aot_dispatch_dynamic")
_DEFAULT_TESTS = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")


# ---------------------------------------------------------------- schemas
def _types_of(py, schema, lists, optional_lists, list_optional):
    """(annotation, schema type) pairs for one base type and its Optional / list variants (torch's table)."""
    found = [(py, schema), (typing.Optional[py], schema + "?")]
    seqs = (typing.Sequence, typing.List, collections.abc.Sequence, list)
    if lists:
        found += [(s[py], schema + "[]") for s in seqs]
    if optional_lists:
        found += [(s[typing.Optional[py]], schema + "?[]") for s in seqs]
    if list_optional:
        found += [(typing.Optional[s[py]], schema + "[]?") for s in seqs]
    return found


PARAM_TYPES = dict(
    _types_of(Tensor, "Tensor", True, True, False) + _types_of(int, "SymInt", True, False, True)
    + _types_of(float, "float", True, False, True) + _types_of(bool, "bool", True, False, True)
    + _types_of(str, "str", False, False, False) + _types_of(numbers.Number, "Scalar", True, False, False)
    + _types_of(np.dtype, "ScalarType", False, False, False) + _types_of(Device, "Device", False, False, False)
    + _types_of(_device_cm, "Device", False, False, False))
RETURN_TYPES = {Tensor: "Tensor", typing.List[Tensor]: "Tensor[]", list[Tensor]: "Tensor[]", int: "SymInt",
                float: "float", bool: "bool"}


def infer_schema(prototype_function, /, *, mutates_args, op_name=None) -> str:
    """The schema of a function from its type hints: ``"(Tensor x, float y) -> Tensor"`` (``"foo(...) -> ..."``
    with op_name). ``mutates_args`` names the Tensor arguments it changes in place, or is "unknown" (all)."""
    sig = inspect.signature(prototype_function)

    def error(what):
        raise ValueError(f"infer_schema(func): {what} Got func with signature {sig})")
    if type(mutates_args) is not str:
        mutates_args = tuple(mutates_args)
    elif mutates_args != "unknown":
        raise ValueError("mutates_args must either be a sequence of the names of the arguments that are mutated or "
                         "the string 'unknown'.")
    hints = _hints(prototype_function, error)
    params, seen, keyword_only = [], set(), False
    for idx, (name, p) in enumerate(sig.parameters.items()):
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            error("We do not support positional-only args, varargs, or varkwargs.")
        if p.kind == p.KEYWORD_ONLY and not keyword_only:
            params.append("*")
            keyword_only = True
        if p.annotation is p.empty:
            error(f"Parameter {name} must have a type annotation.")
        kind = PARAM_TYPES.get(hints.get(name, p.annotation))
        if kind is None:
            error(f"Parameter {name} has unsupported type {p.annotation}. The valid types are: Tensor, int, float, "
                  "bool, str, numbers, np.dtype, mp.device, Optional[...] and Sequence[...] of them.")
        if mutates_args == "unknown" and kind.startswith("Tensor") or name in mutates_args:
            if not kind.startswith("Tensor"):
                error(f"Parameter {name} is in mutable_args but only Tensors or collections of Tensors can be "
                      "mutated")
            kind = f"Tensor(a{idx}!){kind[len('Tensor'):]}"
        seen.add(name)
        default = "" if p.default is p.empty else f"={_default_text(name, p.default, error)}"
        params.append(f"{kind} {name}{default}")
    if mutates_args != "unknown" and set(mutates_args) - seen:
        error(f"{set(mutates_args) - seen} in mutates_args were not found in the custom op's signature. mutates_args "
              "should contain the names of all args that the custom op mutates, or just the string 'unknown' if you "
              "don't know.")
    ret = _return_text(hints.get("return", sig.return_annotation), error)
    return f"{op_name or ''}({', '.join(params)}) -> {ret}"


def _hints(fn, error):
    try:
        return typing.get_type_hints(fn)
    except Exception as exc:  # a string annotation naming something that does not exist
        error(f"Unsupported type annotation ({type(exc).__name__}: {exc}).")


def _default_text(name, value, error):
    if value is None or isinstance(value, (int, float, bool)):
        return str(value)
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, Device):
        return f'"{value}"'
    if isinstance(value, np.dtype):
        return value.name
    error(f"Parameter {name} has an unsupported default value type {type(value)}.")


def _return_text(annotation, error):
    if annotation is None or annotation is type(None):
        return "()"
    if annotation is inspect.Parameter.empty:
        error("No return type annotation was provided. Please add one.")
    if typing.get_origin(annotation) is not tuple:
        if annotation not in RETURN_TYPES:
            error(f"Return has unsupported type {annotation}. The valid types are: Tensor, list[Tensor], int, float, "
                  "bool and tuples of them.")
        return RETURN_TYPES[annotation]
    parts = typing.get_args(annotation)
    if any(a not in RETURN_TYPES for a in parts):
        error(f"Return has unsupported type {annotation}. The valid types are: Tensor, list[Tensor], int, float, "
              "bool and tuples of them.")
    inner = ", ".join(RETURN_TYPES[a] for a in parts)
    return f"(({inner}))" if len(parts) == 1 else f"({inner})"


class _Param(typing.NamedTuple):
    name: str
    type: str           # the schema type without its alias annotation: "Tensor", "float", "Tensor[]", ...
    default: object     # inspect.Parameter.empty when required
    keyword_only: bool
    mutable: bool


_PARAM = re.compile(r"^(?P<type>[A-Za-z]+(?:\((?P<alias>[a-z0-9]+)(?P<bang>!?)\))?(?:\[\]|\?)*)\s+(?P<name>\w+)"
                    r"(?:\s*=\s*(?P<default>.+))?$")


def parse_schema(text, who="schema"):
    """(name or "", [_Param], [return type]) of a schema string such as ``"foo(Tensor(a0!) x, *, float y=1.0)
    -> Tensor"``. RuntimeError for text that is not one."""
    m = re.fullmatch(r"\s*(?P<name>[A-Za-z_][\w.]*)?\s*\((?P<params>.*)\)\s*->\s*(?P<returns>.+?)\s*", text)
    if m is None:
        raise RuntimeError(f"{who}: {text!r} is not a schema: expected '[name](Type arg, ...) -> Type'")
    params, keyword_only = [], False
    for part in _split(m["params"]):
        if part == "*":
            keyword_only = True
            continue
        p = _PARAM.match(part)
        if p is None:
            raise RuntimeError(f"{who}: cannot parse the argument {part!r} of {text!r}: expected 'Type name[=default]'")
        kind = re.sub(r"\(.*?\)", "", p["type"])
        default = inspect.Parameter.empty if p["default"] is None else _parse_default(p["default"].strip(), kind)
        params.append(_Param(p["name"], kind, default, keyword_only, bool(p["bang"])))
    returns = m["returns"].strip()
    if returns.startswith("("):
        returns = [r for r in _split(returns[1:-1]) if r]
    else:
        returns = [returns]
    return m["name"] or "", params, [re.sub(r"\(.*?\)", "", r).strip() for r in returns]


def _split(text):
    """Split at the commas outside brackets and quotes."""
    parts, depth, quote, start = [], 0, False, 0
    for i, c in enumerate(text):
        if c == '"':
            quote = not quote
        elif not quote and c in "([":
            depth += 1
        elif not quote and c in ")]":
            depth -= 1
        elif not quote and depth == 0 and c == ",":
            parts.append(text[start:i].strip())
            start = i + 1
    last = text[start:].strip()
    return parts + [last] if last else parts


def _parse_default(text, kind):
    if text == "None":
        return None
    if text in ("True", "False"):
        return text == "True"
    if text.startswith('"'):
        return text[1:-1]
    if kind == "ScalarType":
        return _dt.as_dtype(text)
    try:
        return int(text)
    except ValueError:
        return float(text)


# ---------------------------------------------------------------- fake tensors
_FAKE = threading.local()


class FakeTensorMode:
    """Inside, custom ops run their fake impl (``register_fake``) on fake tensors instead of their kernels:
    shapes, dtypes and devices propagate, no data is computed. Built-in ops run as usual (on fake inputs
    they read zeros). Thread-local; nests."""

    def __enter__(self):
        _FAKE.depth = getattr(_FAKE, "depth", 0) + 1
        return self

    def __exit__(self, *exc):
        _FAKE.depth -= 1
        return False


def _in_fake_mode():
    return getattr(_FAKE, "depth", 0) > 0


_FAKES = weakref.WeakValueDictionary()  # id -> fake tensor: the tensors fake_tensor made


def fake_tensor(t: Tensor) -> Tensor:
    """A tensor with ``t``'s shape, dtype and device and no data: every element is one shared zero (``t``
    itself when it is fake already)."""
    if _FAKES.get(id(t)) is t:
        return t
    xp = _array_module(t._array)
    with _on(t.device):
        zero = xp.zeros((), dtype=t._array.dtype)
        fake = Tensor._wrap(xp.broadcast_to(zero, t._array.shape))
    _FAKES[id(fake)] = fake
    return fake


def _map_tensors(value, fn):
    if isinstance(value, Tensor):
        return fn(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_map_tensors(v, fn) for v in value)
    return value


def _tensors(values):
    for v in values:
        if isinstance(v, Tensor):
            yield v
        elif isinstance(v, (list, tuple)):
            yield from (x for x in v if isinstance(x, Tensor))


# ---------------------------------------------------------------- the op
class CustomOpDef(FunctionOp):
    """A custom op: callable as the function it was made from, and entered in the registry (see the module
    docstring). Made by :func:`custom_op` or ``Library.define``, never directly."""

    custom = True           # dispatch hands the call to :meth:`call` (forward on Tensors)
    differentiable = True
    functional = False
    methods = rmethods = ()
    tangent = None

    def __init__(self, namespace, name, schema, fn, signature):
        self._namespace, self._name = namespace, name
        self._qualname = f"{namespace}::{name}"
        _, self._params, self._returns = parse_schema(schema, self._qualname)
        self._schema = schema
        self._signature = signature
        self._positional = [p for p in self._params if not p.keyword_only]
        self._keyword_only = [p.name for p in self._params if p.keyword_only]
        self._mutated = frozenset(p.name for p in self._params if p.mutable)
        self._tensor_returns = all(r == "Tensor" for r in self._returns) and self._returns != ["()"]
        self._kernels = {}          # device type -> kernel; None: the default kernel (every device type)
        self._autograd_kernel = fn is not None  # custom_op's ops have one (torch's: it fails without a formula)
        if fn is not None:
            self._kernels[None] = fn
        self._disabled = set()
        self._composite = False     # CompositeImplicitAutograd: the kernel's own ops carry autograd
        self._fake = None
        self._backward = self._setup_context = None
        super().__init__(_generated_function(self))
        self.name = self._qualname
        self.forward = fn if fn is not None else self.cls.forward
        self.backward = None        # (what the registry's listings read; the rule is self._backward)
        self.promote = tuple(i for i, p in enumerate(self._positional) if p.type.startswith("Tensor")
                             and not p.mutable)
        self.arg_names = tuple(p.name for p in self._positional)
        self.inplace = bool(self._positional) and self._positional[0].mutable  # (the inspector copies input 0)
        self.policy = {"cuda": None, "cpu": None}  # a rule comes from register_autocast
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__name__ = name

    # ---- registration (torch's CustomOpDef methods) ----
    def register_kernel(self, device_types, fn=None, /):
        """Register ``fn`` as this op's kernel for ``device_types`` ("cpu", "cuda", a list; None: all). A decorator
        without ``fn``."""
        types_ = _device_types(device_types, f"{self._qualname}: register_kernel")

        def inner(fn):
            _check_callable(fn, "register_kernel")
            for t in types_:
                self._kernels[t] = fn
            return fn
        return inner if fn is None else inner(fn)

    def register_fake(self, fn, /):
        """Register ``fn`` as this op's fake impl: same signature, computes outputs of the right shape, dtype and
        device from fake inputs (mixprec ops only; no reading of data)."""
        _check_callable(fn, "register_fake")
        self._fake = fn
        return fn

    def register_autograd(self, backward, /, *, setup_context=None):
        """``backward(ctx, *grads)`` returns one gradient per positional input; ``setup_context(ctx, inputs,
        output)`` (``(ctx, inputs, keyword_only_inputs, output)`` for an op with keyword-only arguments) saves
        what it needs, as a torch-2 style autograd.Function does."""
        if self._mutated:
            raise RuntimeError(f"Cannot register autograd formula for non-functional operator {self!r} with schema "
                               f"{self._qualname}{self._schema}. Please create a functional operator and register "
                               "an autograd formula for that.")
        _check_callable(backward, "register_autograd")
        if setup_context is not None:
            _check_callable(setup_context, "register_autograd(setup_context=)")
        self._backward, self._setup_context = backward, setup_context
        self.backward = backward

    def register_autocast(self, device_type, cast_inputs):
        """Inside an autocast region for ``device_type``, cast floating inputs to ``cast_inputs``; the kernel then
        runs with autocast off."""
        register_autocast(self, device_type, cast_inputs)

    @contextlib.contextmanager
    def set_kernel_enabled(self, device_type, enabled=True):
        """Disable (or re-enable) the kernel registered for ``device_type``; restored when the block ends."""
        was = device_type not in self._disabled
        (self._disabled.discard if enabled else self._disabled.add)(device_type)
        try:
            yield
        finally:
            (self._disabled.discard if was else self._disabled.add)(device_type)

    @property
    def default(self):
        """The op itself (torch's overload ``mp.ops.mylib.foo.default``: a custom op has one)."""
        return self

    def _destroy(self):
        """Take the op out of the registry, with its autocast rules."""
        if _registry._REGISTRY.get(self._qualname) is self:
            _registry.unregister(self._qualname)
        for key in [k for k in _autocast.REGISTERED if k[0] is self]:
            del _autocast.REGISTERED[key]

    # ---- a call ----
    def call(self, args, kwargs):
        """One call (steps in the module docstring); dispatch hands it over, observers already told."""
        values = self._bind(args, kwargs)
        if _in_fake_mode():
            return self._run_fake(values)
        tensors = list(_tensors(values))
        device_type = tensors[0].device.type if tensors else self._factory_device(values)
        kernel = self._kernel(device_type)  # (looked up first: a missing kernel fails before any cast)
        regions = _autocast.active_regions()
        cast = bool(regions) and device_type in regions and _autocast.rule_for(self, device_type) is not None
        if cast:
            values = self._cast(values, device_type)
        grad = _gm.is_grad_enabled() and any(t._requires_grad for t in tensors)
        with _autocast.suspended() if cast else contextlib.nullcontext():
            if self._composite or not (grad and self._tensor_returns and not self._mutated):
                return self._run_kernel(kernel, values, grad_mode=self._composite)
            layout = _Layout(values)  # (the node's forward: _run_kernel with the kernel of the values' device)
            return super().call([layout, *layout.flatten(values)], {})

    def _bind(self, args, kwargs):
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as exc:  # (RuntimeError, as torch's argument parser raises)
            raise RuntimeError(f"{self._qualname}(): {exc}. Declaration: {self._qualname}{self._schema}") from None
        bound.apply_defaults()
        values = []
        for p in self._params:
            v = bound.arguments[p.name]
            if p.type in ("Tensor", "Tensor?") and not (isinstance(v, Tensor) or (v is None and p.type == "Tensor?")):
                raise RuntimeError(f"{self._qualname}() Expected a value of type 'Tensor' for argument '{p.name}' but "
                                   f"instead found type '{type(v).__name__}'. Declaration: "
                                   f"{self._qualname}{self._schema}")
            if p.type.startswith("Device") and v is not None:
                v = as_device(v)
            values.append(v)
        return values

    def _split(self, values):
        n = len(self._positional)
        return values[:n], dict(zip(self._keyword_only, values[n:]))

    def _factory_device(self, values):
        for p, v in zip(self._params, values):
            if p.type.startswith("Device") and v is not None:
                return v.type
        return "cpu"

    def _kernel(self, device_type):
        for key in (device_type, None):
            if key in self._kernels and key not in self._disabled:
                return self._kernels[key]
        registered = ", ".join(k or "every device type" for k in self._kernels) or "none"
        raise NotImplementedError(f"Could not run '{self._qualname}' with arguments from the '{device_type.upper()}' "
                                  f"backend: it has no kernel for {device_type!r} (kernels registered for: "
                                  f"{registered}); add one with register_kernel")

    def _cast(self, values, device_type):
        """Autocast's casts of the floating inputs (not of those the op mutates), seen by observers as the
        casts of this call."""
        call = current_call()
        data = []  # (value index, list index or None, tensor), as autocast.cast_inputs takes them
        for i, (p, v) in enumerate(zip(self._params, values)):
            if isinstance(v, Tensor) and not p.mutable:
                data.append((i, None, v))
            elif isinstance(v, (list, tuple)) and not p.mutable:
                data.extend((i, j, t) for j, t in enumerate(v) if isinstance(t, Tensor))
        if call is not None and call.op is self:
            call.casting = True
        new, decision = _autocast.cast_inputs(self, tuple(values), data, device_type)
        if call is not None and call.op is self:
            call.casting, call.autocast, call.run_args = False, decision, new
        return list(new)

    def _run_kernel(self, kernel, values, grad_mode=False):
        """The kernel on ``values`` (no graph recorded, unless a composite's own ops record it), then the
        version bumps of what it mutated and the checks of what it returned."""
        args, kwargs = self._split(values)
        with contextlib.nullcontext() if grad_mode else _gm.no_grad():
            out = kernel(*args, **kwargs)
        for p, v in zip(self._params, values):
            if p.mutable:
                for t in _tensors((v,)):
                    t._bump_version()
        self._check_output(out, values)
        return out

    def _check_output(self, out, values):
        outs = out if isinstance(out, tuple) else (out,)
        if self._returns == ["()"]:
            if out is not None:
                raise RuntimeError(f"{self._qualname}: its schema returns nothing (-> ()), but the kernel returned a "
                                   f"{type(out).__name__}")
            return
        for i, r in enumerate(self._returns):
            o = outs[i] if i < len(outs) else None
            if r == "Tensor" and not isinstance(o, Tensor):
                raise RuntimeError(f"{self._qualname}: output {i} should be a Tensor (schema: -> "
                                   f"{', '.join(self._returns)}), but the kernel returned a {type(o).__name__}")
        inputs = list(_tensors(values))
        for o in _tensors(outs):
            if any(o is t or _shares_memory(o, t) for t in inputs):
                raise RuntimeError(f"{self._qualname}: The output of this custom operator (1) must not also be an "
                                   "input to this custom operator and (2) may not alias any inputs to this custom "
                                   "operator or other returns. Return a new tensor (x.clone()) instead.")

    def _run_fake(self, values):
        if self._fake is None:
            raise RuntimeError(f"There was no fake impl registered for {self!r}. Please use "
                               f"`{self._name}.register_fake` to add an fake impl.")
        values = _map_tensors(values, fake_tensor)
        args, kwargs = self._split(values)
        with _gm.no_grad():
            out = self._fake(*args, **kwargs)
        inputs = list(_tensors(values))  # an output that is (a view of) an input stays one: opcheck compares that
        return _map_tensors(out, lambda o: o if any(_shares_memory(o, t) for t in inputs) else fake_tensor(o))

    def run_backward(self, node, grads):
        if self._backward is None:
            raise RuntimeError(f"Trying to backward through {self._qualname} but no autograd formula was registered. "
                               "Please use register_autograd to add one.")
        return super().run_backward(node, grads)

    def __call__(self, *args, **kwargs):
        return _dispatch.dispatch(self, args, kwargs)

    def __repr__(self):
        return f"<CustomOpDef({self._qualname})>"


def _shares_memory(a, b):
    x, y = a._array, b._array
    return x.size > 0 and y.size > 0 and _array_module(x).may_share_memory(x, y)


class _Layout:
    """How a call's values are laid out as the graph node's arguments: a list of Tensors becomes one argument
    per Tensor (the graph links each to its own gradient). The layout itself goes first, so that the node's
    forward and setup_context can put the values back together."""

    def __init__(self, values):
        self.sizes = [len(v) if isinstance(v, (list, tuple)) and any(isinstance(x, Tensor) for x in v) else None
                      for v in values]

    def flatten(self, values):
        flat = []
        for v, n in zip(values, self.sizes):
            if n is None:
                flat.append(v)
            else:
                flat.extend(v)
        return flat

    def unflatten(self, flat):
        values, i = [], 0
        for n in self.sizes:
            values.append(flat[i] if n is None else list(flat[i:i + n]))
            i += 1 if n is None else n
        return values


def _generated_function(op):
    """The autograd.Function a custom op's graph node runs: forward is the kernel, setup_context and backward
    are register_autograd's. Its arguments are a _Layout and the flattened values."""
    n = len(op._positional)

    class Generated(Function):
        @staticmethod
        def forward(layout, *flat):
            values = layout.unflatten(flat)
            return op._run_kernel(op._kernel(next(_tensors(values)).device.type), values)

        @staticmethod
        def setup_context(ctx, inputs, output):
            layout = inputs[0]
            ctx._layout = layout
            args, kwargs = op._split(layout.unflatten(inputs[1:]))
            ctx.needs_input_grad = tuple(any(t._requires_grad for t in _tensors((a,))) for a in args)
            if op._setup_context is None:
                return
            if op._keyword_only:
                op._setup_context(ctx, tuple(args), kwargs, output)
            else:
                op._setup_context(ctx, tuple(args), output)

        @staticmethod
        def backward(ctx, *grads):
            result = op._backward(ctx, *grads)
            result = tuple(result) if isinstance(result, (tuple, list)) else (result,)
            if len(result) != n:
                raise RuntimeError(f"{op._qualname}: the backward registered with register_autograd returned "
                                   f"{len(result)} gradient(s); expected {n}, one for each positional input "
                                   f"({', '.join(p.name for p in op._positional)}; None for those without one)")
            flat = [None]  # (the layout's)
            for i, size in enumerate(ctx._layout.sizes):
                g = result[i] if i < n else None
                if size is None:
                    flat.append(g)
                elif g is None:
                    flat.extend([None] * size)
                elif len(g) != size:
                    raise RuntimeError(f"{op._qualname}: backward returned {len(g)} gradients for the list input "
                                       f"{op._positional[i].name}, which holds {size} tensors")
                else:
                    flat.extend(g)
            return tuple(flat)
    Generated.__name__ = Generated.__qualname__ = f"{op._namespace}_{op._name}Backward"
    return Generated


def _check_callable(fn, who):
    if not callable(fn):
        raise TypeError(f"{who}: expected a function, got {type(fn).__name__}")


def _device_types(device_types, who):
    """A tuple of device types (None: (None,), the default for every device type)."""
    if device_types is None:
        return (None,)
    given = (device_types,) if isinstance(device_types, str) else tuple(device_types)
    for t in given:
        if not isinstance(t, str) or t not in _TORCH_DEVICE_TYPES:
            raise RuntimeError(f"{who}: expected a device type such as 'cpu' or 'cuda' (or a list of them), got "
                               f"{t!r}")
    return given


def _parse_name(qualname, who="custom_op"):
    if not isinstance(qualname, str) or qualname.count("::") != 1:
        raise ValueError(f"{who}: the name must be 'namespace::name' (e.g. 'mylib::my_linear'), got {qualname!r}")
    ns, name = qualname.split("::")
    if not (ns.isidentifier() and name.isidentifier()):
        raise RuntimeError(f"{who}: {qualname!r} is not a valid op name: namespace and name must be identifiers")
    if ns == "aten":
        raise RuntimeError(f"{who}: the namespace 'aten' holds mixprec's built-in ops; use your project's name")
    return ns, name


# ---------------------------------------------------------------- custom_op and the register functions
_UNSET = object()


def custom_op(name, fn=None, /, *, mutates_args=_UNSET, device_types=None, schema=None):
    """Make ``fn`` (a function of Tensors with type hints) the custom op ``name`` ("namespace::name"); a decorator
    without ``fn``.

    >>> import numpy as np
    >>> import mixprec as mp
    >>> @mp.library.custom_op("docs::numpy_sin", mutates_args=())
    ... def numpy_sin(x: mp.Tensor) -> mp.Tensor:
    ...     return mp.from_numpy(np.sin(x.numpy()))
    >>> def backward(ctx, grad):
    ...     return grad * ctx.x.cos()
    >>> def setup_context(ctx, inputs, output):
    ...     ctx.x, = inputs
    >>> numpy_sin.register_autograd(backward, setup_context=setup_context)
    >>> x = mp.tensor([0.0, 1.0], requires_grad=True)
    >>> numpy_sin(x).sum().backward()
    >>> x.grad                                  # cos(x)
    tensor([1.    , 0.5403])
    >>> mp.ops.docs.numpy_sin is numpy_sin      # a registry op, found by namespace
    True

    ``mutates_args``: the names of the arguments it changes in place (required; "unknown": all Tensor ones);
    ``device_types``: the device types ``fn`` is the kernel for (default: all); ``schema``: the schema instead of
    the one inferred from the hints. Defining a name again replaces the earlier op."""
    if mutates_args is _UNSET:
        raise TypeError("custom_op() missing 1 required keyword-only argument: 'mutates_args'")

    def inner(fn):
        ns, opname = _parse_name(name)
        _check_callable(fn, "custom_op")
        if schema is None:
            text = infer_schema(fn, mutates_args=mutates_args)
        else:
            text = schema
            declared = {p.name for p in parse_schema(schema, name)[1] if p.mutable}
            wanted = declared if mutates_args == "unknown" else set(mutates_args)
            if declared != wanted:
                raise ValueError(f"Attempted to create a custom op with `mutates_args={mutates_args}` and "
                                 f"`schema={schema}`. The schema suggests that the op mutates {declared} which is "
                                 "different from what was provided to us in `mutates_args`. Please make these "
                                 "consistent.")
        op = CustomOpDef(ns, opname, text, fn, inspect.signature(fn))
        if device_types is not None:  # a kernel for those device types only
            op._kernels.clear()
            op.register_kernel(device_types, fn)
        _enter(op, replace=True)
        return op
    return inner if fn is None else inner(fn)


def _enter(op, replace):
    old = _registry._REGISTRY.get(op._qualname)
    if old is not None:
        if not replace or not isinstance(old, CustomOpDef):
            raise RuntimeError(f"Tried to register an operator ({op._qualname}) with the same name and overload name "
                               "multiple times.")
        old._destroy()
    _registry._REGISTRY[op._qualname] = op


def _resolve(op, who):
    """The op a register_* / opcheck call names: a CustomOpDef, a registry op, "ns::name" or a built-in's name."""
    if isinstance(op, (CustomOpDef, _registry.Op)):
        return op
    if not isinstance(op, str):
        raise TypeError(f"{who}: expected an op (a custom op, mp.ops.<ns>.<name>) or its name, got "
                        f"{type(op).__name__}")
    name = op.split("::", 1)[1] if op.startswith("aten::") else op
    name = name[:-len(".default")] if name.endswith(".default") else name
    found = _registry._REGISTRY.get(name)
    if found is None:
        ns = op.split("::")[0] if "::" in op else "aten"
        raise AttributeError(f"{who}: '_OpNamespace' 'mp.ops.{ns}' object has no attribute "
                             f"'{name.split('::')[-1]}' (no op named {op!r})")
    return found


def _custom(op, who):
    op = _resolve(op, who)
    if not isinstance(op, CustomOpDef):
        raise RuntimeError(f"{who}: {op.name!r} is a built-in op: its kernels, gradient and shape rules are its "
                           "definition in mixprec/ops/; define your own op with mp.library.custom_op")
    return op


def register_kernel(op, device_types, func=None, /, *, lib=None):
    """Register ``func`` as the kernel of custom op ``op`` for ``device_types``; a decorator without ``func``."""
    target = _custom(op, "register_kernel")

    def inner(fn):
        before = dict(target._kernels)
        target.register_kernel(device_types, fn)
        _keep(lib, lambda: (target._kernels.clear(), target._kernels.update(before)))
        return fn
    return inner if func is None else inner(func)


def register_fake(op, func=None, /, *, lib=None, _stacklevel=1):
    """Register ``func`` as the fake impl of custom op ``op``; a decorator without ``func``."""
    target = _custom(op, "register_fake")

    def inner(fn):
        before = target._fake
        target.register_fake(fn)
        _keep(lib, lambda: setattr(target, "_fake", before))
        return fn
    return inner if func is None else inner(func)


def register_autograd(op, backward, /, *, setup_context=None, lib=None):
    """Register the backward (and setup_context) of custom op ``op`` (see CustomOpDef.register_autograd)."""
    target = _custom(op, "register_autograd")
    before = (target._backward, target._setup_context)
    target.register_autograd(backward, setup_context=setup_context)
    _keep(lib, lambda: _set_autograd(target, *before))


def _set_autograd(op, backward, setup_context):
    op._backward, op._setup_context, op.backward = backward, setup_context, backward


def register_autocast(op, device_type, cast_inputs, /, *, lib=None):
    """Inside an autocast region for ``device_type`` ("cpu" or "cuda"), cast ``op``'s floating inputs to
    ``cast_inputs`` (float16, bfloat16 or float32; float64 never) and run it with autocast off. Any op: a custom
    one or a built-in (the rule then wins over the op's entry in mixprec/ops/policies.py)."""
    target = _resolve(op, "register_autocast")
    if device_type not in DEVICE_TYPES:
        raise ValueError(f"Device type '{device_type}' does not support autocast (expected 'cpu' or 'cuda').")
    key = (target, device_type)
    before = _autocast.REGISTERED.get(key, _UNSET)
    _amp.register_autocast(target if isinstance(target, _registry.Op) else target.name, device_type, cast_inputs)
    _keep(lib, lambda: _autocast.REGISTERED.pop(key, None) if before is _UNSET else
          _autocast.REGISTERED.__setitem__(key, before))


def _keep(lib, undo):
    if lib is not None:
        if not isinstance(lib, Library):
            raise TypeError(f"lib= must be an mp.library.Library, got {type(lib).__name__}")
        lib._undo.append(undo)


# ---------------------------------------------------------------- Library
_DEF_NAMESPACES = set()
_KINDS = ("DEF", "IMPL", "FRAGMENT")
# dispatch keys Library.impl understands: a device's kernel, the default kernel, the fake impl
_KEYS = {"CPU": "cpu", "CUDA": "cuda", "CompositeExplicitAutograd": None, "CompositeImplicitAutograd": None,
         "Meta": "fake"}


class Library:
    """A namespace's registrations: ``Library("mylib", "DEF")`` (owns the namespace), ``"FRAGMENT"`` (adds to it)
    or ``"IMPL"`` (kernels for ops defined elsewhere). What it registered goes with ``_destroy()``."""

    def __init__(self, ns, kind, dispatch_key=""):
        if kind not in _KINDS:
            raise ValueError(f"Unsupported kind: {kind!r} (expected one of {', '.join(_KINDS)})")
        if not isinstance(ns, str) or not (ns.isidentifier() or ns == "_"):
            raise ValueError(f"Library: the namespace must be an identifier, got {ns!r}")
        if kind == "DEF" and ns in _DEF_NAMESPACES:
            raise RuntimeError(f"Only a single Library(..., 'DEF') can register the namespace {ns}; use "
                               f"Library({ns!r}, 'FRAGMENT') to add to it")
        if kind == "DEF" and ns == "aten":
            raise RuntimeError("the namespace 'aten' holds mixprec's built-in ops; it cannot be defined again")
        self.ns, self.kind, self.dispatch_key = ns, kind, dispatch_key
        self._undo = []
        if kind == "DEF":
            _DEF_NAMESPACES.add(ns)
            self._undo.append(lambda: _DEF_NAMESPACES.discard(ns))

    def define(self, schema, alias_analysis="", *, tags=()):
        """Define op ``ns::name`` from a schema with a name, e.g. ``"sum(Tensor self) -> Tensor"``; returns the
        name. It has no kernel until ``impl`` gives it one."""
        if self.kind == "IMPL":
            raise RuntimeError(f"Library({self.ns!r}, 'IMPL') registers kernels only; define ops in a 'DEF' or "
                               "'FRAGMENT' library")
        name, params, _ = parse_schema(schema, f"Library({self.ns!r}).define")
        if not name:
            raise RuntimeError(f"Library.define: the schema needs the op's name, e.g. 'foo{schema.strip()}'")
        name = name.split(".")[0]
        _parse_name(f"{self.ns}::{name}", "Library.define")
        text = schema[schema.index("("):]
        signature = inspect.Signature([inspect.Parameter(p.name, inspect.Parameter.KEYWORD_ONLY if p.keyword_only
                                                         else inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                         default=p.default) for p in params])
        op = CustomOpDef(self.ns, name, text, None, signature)
        _enter(op, replace=False)
        self._undo.append(op._destroy)
        return name

    def impl(self, op_name, fn, dispatch_key="", *, with_keyset=False):
        """Register ``fn`` for op ``op_name`` of this namespace under ``dispatch_key``: "CPU", "CUDA",
        "CompositeExplicitAutograd" (every device type; gradients from register_autograd),
        "CompositeImplicitAutograd" (the default: every device type, gradients through the ops ``fn`` calls)
        or "Meta" (the fake impl)."""
        if with_keyset:
            raise NotImplementedError("Library.impl(with_keyset=True): mixprec has no dispatch key sets")
        if self.ns == "aten":
            raise NotImplementedError("Library('aten', ...).impl: mixprec's built-in ops cannot be given new kernels; "
                                      "define your own op (Library.define or mp.library.custom_op)")
        name = getattr(op_name, "_name", op_name)
        name = name.split(".")[0].split("::")[-1]
        op = _custom(f"{self.ns}::{name}", "Library.impl")
        key = dispatch_key or self.dispatch_key or "CompositeImplicitAutograd"
        if key not in _KEYS:
            raise NotImplementedError(f"Library.impl: dispatch key {key!r} is not one mixprec has; use one of "
                                      f"{', '.join(_KEYS)}")
        _check_callable(fn, "Library.impl")
        before = (dict(op._kernels), op._fake, op._composite)
        if _KEYS[key] == "fake":
            op._fake = fn
        else:
            op._kernels[_KEYS[key]] = fn
            op._composite = key == "CompositeImplicitAutograd"
        self._undo.append(lambda: (op._kernels.clear(), op._kernels.update(before[0]),
                                   setattr(op, "_fake", before[1]), setattr(op, "_composite", before[2])))

    def fallback(self, fn, dispatch_key="", *, with_keyset=False):
        raise NotImplementedError("Library.fallback: mixprec has no dispatch keys to fall back on; an op's "
                                  "autocast rule is mp.library.register_autocast's")

    def _destroy(self):
        """Undo everything this library registered, newest first."""
        while self._undo:
            self._undo.pop()()

    def __repr__(self):
        return f"Library(kind={self.kind}, ns={self.ns}, dispatch_key={self.dispatch_key})"


def define(qualname, schema, *, lib=None, tags=()):
    """Define op ``qualname`` ("ns::name") with ``schema`` (no name: ``"(Tensor x) -> Tensor"``), no kernel yet."""
    ns, name = _parse_name(qualname, "define")
    lib = lib if lib is not None else Library(ns, "FRAGMENT")
    lib.define(name + schema, tags=tags)


def impl(qualname, types, func=None, *, lib=None):
    """Register ``func`` as the kernel of ``qualname`` for device types ``types`` ("cpu", "cuda", a list, or a
    dispatch key such as "CompositeImplicitAutograd"); a decorator without ``func``."""
    def inner(fn):
        if isinstance(types, str) and types in _KEYS:
            ns, name = _parse_name(qualname, "impl")
            (lib or Library(ns, "FRAGMENT")).impl(name, fn, types)
        else:
            register_kernel(qualname, types, fn, lib=lib)
        return fn
    return inner if func is None else inner(func)


# ---------------------------------------------------------------- opcheck
class OpCheckError(Exception):
    """One of opcheck's tests failed."""


class MetadataMismatchError(RuntimeError):
    """An op's fake impl disagrees with its kernel about an output's shape, dtype, device or aliasing."""


def opcheck(op, args, kwargs=None, *, test_utils=_DEFAULT_TESTS, raise_exception=True, atol=None, rtol=None):
    """Check that ``op`` is registered correctly, on example ``args``/``kwargs`` (the user's tensors are never
    touched: every test runs on copies):

    - test_schema: only the arguments the schema marks mutable change, and no output aliases an input;
    - test_autograd_registration: with inputs that require grad, the op has a gradient rule;
    - test_faketensor: the fake impl's outputs have the kernel's shapes, dtypes, devices and aliasing;
    - test_aot_dispatch_dynamic / _static (mixprec has no compiler): a second run gives the same outputs,
      and the gradients agree with finite differences (gradcheck on float64 copies).

    Returns {test: "SUCCESS" or the exception}; with raise_exception, the first failure raises OpCheckError.
    """
    op = _resolve(op, "opcheck")
    kwargs = {} if kwargs is None else kwargs
    tests = (test_utils,) if isinstance(test_utils, str) else tuple(test_utils)
    if not set(tests) <= set(_OPCHECK_TESTS):
        raise ValueError(f"opcheck(op, ..., test_utils={test_utils}), expected test_utils to be subset of "
                         f"{_OPCHECK_TESTS} but it was not")
    if (atol is None) != (rtol is None):
        raise ValueError("opcheck: pass both atol and rtol, or neither")
    results = {}
    for test in tests:
        try:
            _TESTS[test.replace("_static", "_dynamic")](op, args, kwargs, atol, rtol)
        except Exception as exc:
            if raise_exception:
                raise OpCheckError(f"opcheck(op, ...): {test} failed with {exc}") from exc
            results[test] = exc
        else:
            results[test] = "SUCCESS"
    return results


def _copy(value):
    def one(t):
        c = t.detach().clone()
        return c.requires_grad_(True) if t.requires_grad else c
    return _map_tensors(value, one)


def _copies(args, kwargs):
    return _copy(tuple(args)), {k: _copy(v) for k, v in kwargs.items()}


def _arg_names(op, args, kwargs):
    """(name, value, mutable) for each argument of a call."""
    if isinstance(op, CustomOpDef):
        values = op._bind(args, kwargs)
        return [(p.name, v, p.mutable) for p, v in zip(op._params, values)]
    names = list(op.arg_names) + [f"arg{i}" for i in range(len(op.arg_names), len(args))]
    return [(n, v, op.inplace and i == 0) for i, (n, v) in enumerate(zip(names, args))] + \
        [(k, v, False) for k, v in kwargs.items()]


def _host_copy(t):
    return np.array(t.detach().numpy(), copy=True)


def _test_schema(op, args, kwargs, atol, rtol):
    args, kwargs = _copies(args, kwargs)
    before = [(n, [(t, _host_copy(t)) for t in _tensors((v,))], m) for n, v, m in _arg_names(op, args, kwargs)]
    out = op(*args, **kwargs)
    for name, tensors, mutable in before:
        if not mutable and any(not np.array_equal(_host_copy(t), a, equal_nan=True) for t, a in tensors):
            raise RuntimeError(f"Argument {name} is not defined as mutable but was mutated")
    if not getattr(op, "view", False) and not op.inplace:
        inputs = list(_tensors(args)) + list(_tensors(kwargs.values()))
        for o in _tensors(out if isinstance(out, (tuple, list)) else (out,)):
            if any(o is t or _shares_memory(o, t) for t in inputs):
                raise RuntimeError(f"{op.name}: an output aliases an input, which its schema does not allow")


def _test_autograd_registration(op, args, kwargs, atol, rtol):
    if not any(t.requires_grad for t in _tensors(list(args) + list(kwargs.values()))):
        return
    if isinstance(op, CustomOpDef):
        has = op._autograd_kernel or op._composite or op._backward is not None
        if not has:
            raise RuntimeError(f"{op.name}: its inputs require grad, but it has no autograd registration: its "
                               "kernels are registered for device types only. Register a backward with "
                               "register_autograd, or a CompositeImplicitAutograd kernel")
    elif op.differentiable and not op.composite and op.backward is None:
        raise RuntimeError(f"{op.name}: its inputs require grad, but it has no backward")


def _test_faketensor(op, args, kwargs, atol, rtol):
    real_args, real_kwargs = _copies(args, kwargs)
    with _gm.no_grad():
        real = op(*real_args, **real_kwargs)
        fake_args, fake_kwargs = _map_tensors(tuple(args), fake_tensor), {k: _map_tensors(v, fake_tensor)
                                                                         for k, v in kwargs.items()}
        with FakeTensorMode():
            fake = op(*fake_args, **fake_kwargs)
    reals, fakes = _outputs(real), _outputs(fake)
    what = f"When comparing the output of {op.name} on FakeTensor and concrete Tensors, found"
    if len(reals) != len(fakes):
        raise MetadataMismatchError(f"{what} {len(fakes)} outputs and {len(reals)}")
    for r, f in zip(reals, fakes):
        if isinstance(r, Tensor) != isinstance(f, Tensor):
            raise MetadataMismatchError(f"{what} a {type(f).__name__} and a {type(r).__name__}")
        if not isinstance(r, Tensor):
            continue
        for field, a, b in (("Shapes", f.shape, r.shape), ("Dtypes", f.dtype, r.dtype),
                            ("Devices", f.device, r.device)):
            if a != b:
                raise MetadataMismatchError(f"{what} mismatched tensor metadata: {field} {b} and {a} are not equal!")
        real_alias = any(_shares_memory(r, t) for t in _tensors(list(real_args) + list(real_kwargs.values())))
        fake_alias = any(_shares_memory(f, t) for t in _tensors(list(fake_args) + list(fake_kwargs.values())))
        if real_alias != fake_alias:
            raise MetadataMismatchError(f"{what} mismatch in outputs_alias_inputs check {fake_alias} != {real_alias}")


def _outputs(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _test_aot_dispatch_dynamic(op, args, kwargs, atol, rtol):
    first = op(*_copy(tuple(args)), **_copy(kwargs))
    second = op(*_copy(tuple(args)), **_copy(kwargs))
    for k, (a, b) in enumerate(zip(_outputs(first), _outputs(second))):
        if isinstance(a, Tensor) and not np.allclose(_host_copy(a), _host_copy(b), rtol=rtol or 0, atol=atol or 0,
                                                     equal_nan=True):
            raise RuntimeError(f"{op.name}: two runs on the same inputs disagree on output {k}")
    positions = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad
                 and a.is_floating_point()]
    if not positions or not (_gm.is_grad_enabled()):
        return
    doubles = [a.detach().double().requires_grad_(True) if i in positions else _copy(a) for i, a in enumerate(args)]

    def run(*diff):
        full = list(doubles)
        for i, d in zip(positions, diff):
            full[i] = d
        return op(*full, **_copy(kwargs))
    _gradcheck(run, tuple(doubles[i] for i in positions), atol=atol or 1e-5, rtol=rtol or 1e-3)


_TESTS = {"test_schema": _test_schema, "test_autograd_registration": _test_autograd_registration,
          "test_faketensor": _test_faketensor, "test_aot_dispatch_dynamic": _test_aot_dispatch_dynamic}
