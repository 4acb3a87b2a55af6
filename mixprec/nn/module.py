"""Module: the base class of every layer and model, and the containers Sequential, ModuleList, ModuleDict.

A Module finds its parts by attribute assignment: assigning a Parameter
registers a parameter, assigning a Module registers a child, and
``register_buffer`` registers a tensor that is state but not learnable
(BatchNorm's running statistics). Names follow PyTorch's, so a state_dict key
reads ``"0.weight"`` or ``"encoder.layers.1.bias"``.
"""
from __future__ import annotations

import warnings
from collections import OrderedDict, namedtuple
from collections.abc import Iterable, Mapping

import numpy as np

from .. import backend as _be
from ..backend import devices
from .. import dtypes as _dt
from ..autograd.function import Function
from ..autograd.grad_mode import is_grad_enabled, no_grad
from ..hooks import RemovableHandle
from ..optim.optimizer import zero_grads
from ..tensor import Tensor
from .parameter import Parameter
from ..autograd.graph import add_hook

IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])
_HOOK_KINDS = ("forward_pre", "forward", "state_dict_pre", "state_dict_post", "load_state_dict_pre",
               "load_state_dict_post")


class Module:
    """Base class for layers and models: subclass it, create parts in __init__, write forward()."""

    # buffers whose dtype is part of their meaning: to(dtype), half() and bfloat16() move them but never cast them
    # (the FP8 scaling state, mixprec/amp/fp8/autocast.py, stays float32 as Transformer Engine's FP8 metadata does)
    _fixed_dtype_buffers = frozenset()

    def __init__(self):
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_buffers", {})
        object.__setattr__(self, "_non_persistent_buffers", set())
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "_hooks", {kind: OrderedDict() for kind in _HOOK_KINDS})

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must implement forward()")

    def __call__(self, *args, **kwargs):
        hooks = self.__dict__.get("_hooks")
        backward_hooks = _BackwardHookCall.of(self)  # full backward (pre-)hooks: see the end of this file
        if backward_hooks is None and (hooks is None or not (hooks["forward_pre"] or hooks["forward"])):
            return self.forward(*args, **kwargs)
        return self._call_with_hooks(hooks or _NO_HOOKS, backward_hooks, args, kwargs)

    # ---------------------------------------------------------------- hooks (torch's contracts)
    def register_forward_pre_hook(self, hook, *, prepend: bool = False, with_kwargs: bool = False):
        """Run hook(module, args) before every forward; it returns None or new args (a value that
        is not a tuple becomes a 1-tuple). with_kwargs=True: hook(module, args, kwargs) returns None
        or (new_args, new_kwargs). Hooks run in registration order; prepend=True puts this one first.
        Returns a RemovableHandle."""
        return self._add_hook("forward_pre", (hook, bool(with_kwargs)), prepend)

    def register_forward_hook(self, hook, *, prepend: bool = False, with_kwargs: bool = False,
                              always_call: bool = False):
        """Run hook(module, args, output) after every forward (args as the pre-hooks left them); it
        returns None or a replacement output. with_kwargs=True: hook(module, args, kwargs, output).
        always_call=True: also run it when forward (or a hook) raised, with output None, before the
        error propagates. Returns a RemovableHandle."""
        return self._add_hook("forward", (hook, bool(with_kwargs), bool(always_call)), prepend)

    def register_state_dict_pre_hook(self, hook):
        """Run hook(module, prefix, keep_vars) before state_dict() collects anything."""
        return self._add_hook("state_dict_pre", hook)

    def register_state_dict_post_hook(self, hook):
        """Run hook(module, state_dict, prefix, local_metadata) -> None after state_dict() collected
        everything; it may change state_dict in place (local_metadata is an empty dict here)."""
        return self._add_hook("state_dict_post", hook)

    def register_load_state_dict_pre_hook(self, hook):
        """Run hook(module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
        error_msgs) -> None before load_state_dict() checks anything; keys or messages it appends to
        the three lists count as load errors."""
        return self._add_hook("load_state_dict_pre", hook)

    def register_load_state_dict_post_hook(self, hook):
        """Run hook(module, incompatible_keys) -> None after load_state_dict() loaded. mixprec checks
        the whole load before copying anything, so these run only after a successful load."""
        return self._add_hook("load_state_dict_post", hook)

    def _add_hook(self, kind, entry, prepend=False):
        hooks = self._hooks[kind]
        handle = RemovableHandle(hooks)
        hooks[handle.id] = entry
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        return handle

    def _call_with_hooks(self, hooks, backward_hooks, args, kwargs):
        """forward between its hooks, with torch.nn.Module.__call__'s semantics."""
        result, always_called = None, set()
        try:
            for hook, with_kwargs in list(hooks["forward_pre"].values()):
                if with_kwargs:
                    changed = hook(self, args, kwargs)
                    if changed is not None:
                        if not (isinstance(changed, tuple) and len(changed) == 2):
                            raise RuntimeError("forward pre-hook must return None or a tuple of (new_args, "
                                               f"new_kwargs), but got {changed}.")
                        args, kwargs = changed
                else:
                    changed = hook(self, args)
                    if changed is not None:
                        args = changed if isinstance(changed, tuple) else (changed,)
            if backward_hooks is not None:
                args = backward_hooks.setup_inputs(args)
            result = self.forward(*args, **kwargs)
            for hook_id, (hook, with_kwargs, always_call) in list(hooks["forward"].items()):
                if always_call:
                    always_called.add(hook_id)
                changed = hook(self, args, kwargs, result) if with_kwargs else hook(self, args, result)
                if changed is not None:
                    result = changed
            return result if backward_hooks is None else backward_hooks.setup_outputs(result)
        except Exception:
            for hook_id, (hook, with_kwargs, always_call) in list(hooks["forward"].items()):
                if not always_call or hook_id in always_called:
                    continue
                try:
                    changed = hook(self, args, kwargs, result) if with_kwargs else hook(self, args, result)
                    if changed is not None:
                        result = changed
                except Exception as exc:
                    warnings.warn("module forward hook with ``always_call=True`` raised an exception that was "
                                  f"silenced as another error was raised in forward: {exc}", stacklevel=2)
            raise

    def _walk(self, head=""):
        """("enter", module, key prefix) then, after its children, ("leave", module, key prefix) for every
        module of the tree, shared ones once per path: the order torch's recursive state_dict and
        load_state_dict visit modules and call their hooks in."""
        yield "enter", self, head
        for name, child in self._modules.items():
            if child is not None:
                yield from child._walk(head + name + ".")
        yield "leave", self, head

    def _run_hooks(self, kind, *args):
        for hook in list(self.__dict__.get("_hooks", {}).get(kind, {}).values()):
            if hook(self, *args) is not None and kind.endswith("post"):
                raise RuntimeError(f"{kind.replace('_', ' ')} hooks must return None (they may change their "
                                   "arguments in place)")

    # ---------------------------------------------------------------- registration
    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")
        if params is None:
            if isinstance(value, (Parameter, Module)):
                raise AttributeError(f"cannot assign {type(value).__name__} {name!r} before Module.__init__() "
                                     f"ran; call super().__init__() first in {type(self).__name__}.__init__")
            object.__setattr__(self, name, value)
            return
        if isinstance(value, (Parameter, Module)):
            # Replacing a parameter (a child) keeps its place in the order, as in torch: an optimizer's
            # checkpoint matches parameters by their position in parameters().
            store = params if isinstance(value, Parameter) else d["_modules"]
            if name not in store:
                self._forget(name)
            store[name] = value
        elif name in params:
            if value is not None:
                raise TypeError(f"cannot assign {type(value).__name__} as parameter {name!r} "
                                "(an mp.nn.Parameter or None is expected)")
            params[name] = None
        elif name in d["_modules"]:
            if value is not None:
                raise TypeError(f"cannot assign {type(value).__name__} as child module {name!r} "
                                "(an mp.nn.Module or None is expected)")
            d["_modules"][name] = None
        elif name in d["_buffers"]:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign {type(value).__name__} as buffer {name!r} "
                                "(a Tensor or None is expected)")
            d["_buffers"][name] = value
        else:
            object.__setattr__(self, name, value)

    def _forget(self, name):
        d = self.__dict__
        d.pop(name, None)
        for store in ("_parameters", "_buffers", "_modules"):
            d[store].pop(name, None)
        d["_non_persistent_buffers"].discard(name)

    def __getattr__(self, name):  # only called when normal lookup fails
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            if store in d and name in d[store]:
                return d[store][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            if name in d.get(store, ()):
                del d[store][name]
                d["_non_persistent_buffers"].discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers) | set(self._modules))

    @staticmethod
    def _check_name(kind, name):
        if not isinstance(name, str):
            raise TypeError(f"{kind} name must be a string, got {type(name).__name__}")
        if not name or "." in name:
            raise KeyError(f"{kind} name must be non-empty and contain no '.', got {name!r}")

    def register_parameter(self, name: str, param: Parameter | None):
        """Add a parameter (or a None placeholder, as Linear(bias=False) does for bias)."""
        self._check_name("parameter", name)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot register {type(param).__name__} as parameter {name!r} "
                            "(an mp.nn.Parameter or None is expected; wrap tensors in mp.nn.Parameter)")
        if name in self.__dict__ or name in self._buffers or name in self._modules:
            raise KeyError(f"attribute {name!r} already exists")
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True):
        """Add state that is saved in state_dict (unless persistent=False) but not learned."""
        self._check_name("buffer", name)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot register {type(tensor).__name__} as buffer {name!r} (a Tensor or None "
                            "is expected)")
        if name in self.__dict__ or name in self._parameters or name in self._modules:
            raise KeyError(f"attribute {name!r} already exists")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers.discard(name)
        else:
            self._non_persistent_buffers.add(name)

    def add_module(self, name: str, module: Module | None):
        self._check_name("module", name)
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        if name in self.__dict__ or name in self._parameters or name in self._buffers:
            raise KeyError(f"attribute {name!r} already exists")
        self._modules[name] = module

    register_module = add_module

    # ---------------------------------------------------------------- traversal
    def named_modules(self, memo=None, prefix: str = "", remove_duplicate: bool = True):
        """(name, module) for this module and every descendant, depth first; each module once."""
        memo = set() if memo is None else memo
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, child in self._modules.items():
            if child is not None:
                yield from child.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, child in self._modules.items():
            if child is not None and id(child) not in seen:
                seen.add(id(child))
                yield name, child

    def children(self):
        for _, c in self.named_children():
            yield c

    def _named_members(self, store, prefix, recurse, remove_duplicate=True):
        if not isinstance(prefix, str):
            raise TypeError(f"{type(self).__name__}.named{store}: prefix must be a str, got {type(prefix).__name__}")
        seen = set()
        modules = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for mod_prefix, module in modules:
            for name, value in getattr(module, store).items():
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                seen.add(id(value))
                yield mod_prefix + ("." if mod_prefix else "") + name, value

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        """(name, Parameter) pairs; a parameter shared by two layers is listed once."""
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def apply(self, fn):
        """Call fn(module) on every child (recursively), then on self; returns self."""
        if not callable(fn):
            raise TypeError(f"{type(self).__name__}.apply: fn must be a function of a module, got "
                            f"{type(fn).__name__}")
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    # ---------------------------------------------------------------- modes
    def train(self, mode: bool = True):
        """Training mode (Dropout drops, BatchNorm uses batch statistics) for this module and its children."""
        if not isinstance(mode, bool):
            raise ValueError(f"training mode must be a bool, got {mode!r}")
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self):
        """Evaluation mode: train(False)."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True):
        """Clear every parameter's gradient: drop it (default) or fill it with zeros."""
        zero_grads(self.parameters(), set_to_none)

    # ---------------------------------------------------------------- dtype and device
    def to(self, *args, **kwargs):
        """Move parameters and buffers to a device and/or cast the floating ones to a dtype.

        to(device), to(dtype), to(device, dtype) or to(tensor). Parameters keep
        their identity (an optimizer built on them stays valid); integer buffers
        such as num_batches_tracked, and the buffers a module names in
        _fixed_dtype_buffers, keep their dtype.
        """
        device = kwargs.pop("device", None)
        dtype = kwargs.pop("dtype", None)
        kwargs.pop("non_blocking", None)
        if kwargs:
            raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
        for a in args:
            if isinstance(a, Tensor):
                device, dtype = a.device, a.dtype
            elif isinstance(a, devices.Device) or (isinstance(a, str) and a.partition(":")[0] in ("cpu", "cuda")):
                device = a
            else:
                dtype = a
        if dtype is not None:
            dtype = _dt.as_dtype(dtype)
            if not _dt.is_floating(dtype):
                raise TypeError(f"Module.to only casts to floating-point dtypes, got {dtype.name}")
        device = devices.as_device(device) if device is not None else None

        def convert(array, cast=True):
            if device is not None:
                array = devices.to_device(array, device)
            if cast and dtype is not None and _dt.is_floating(array.dtype) and array.dtype != dtype:
                with devices.on_device(devices.device_of_array(array)):
                    array = array.astype(dtype)
            return array
        return self._apply(convert)

    def _apply(self, convert):
        for m in self.modules():
            for p in m._parameters.values():
                if p is None:
                    continue
                new = convert(p._array)
                if new is not p._array:
                    p._array = new
                    p._bump_version()
                if p.grad is not None:
                    g = convert(p.grad._array)
                    p._grad = Tensor._wrap(g) if g is not p.grad._array else p.grad
            for name, b in m._buffers.items():
                if b is not None:
                    new = convert(b._array, name not in m._fixed_dtype_buffers)
                    if new is not b._array:
                        m._buffers[name] = Tensor._wrap(new)
        return self

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to("cuda" if device is None else f"cuda:{device}")

    def float(self):
        return self.to(_dt.float32)

    def double(self):
        return self.to(_dt.float64)

    def half(self):
        return self.to(_dt.float16)

    def bfloat16(self):
        return self.to(_dt.bfloat16)

    # ---------------------------------------------------------------- state
    def _state_entries(self, prefix=""):
        """Every (key, tensor) a state_dict holds: parameters, then persistent buffers, module by module."""
        for event, module, head in self._walk(prefix + "." if prefix else ""):
            if event == "enter":
                yield from module._own_state(head)

    def _own_state(self, head):
        for name, p in self._parameters.items():
            if p is not None:
                yield head + name, p
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers:
                yield head + name, b

    def state_dict(self, destination=None, prefix: str = "", keep_vars: bool = False) -> dict:
        """An ordered dict key -> tensor of everything needed to restore this module.

        The tensors share memory with the module (detached unless keep_vars), as
        in PyTorch: save or copy them if the module will keep changing.
        """
        if not isinstance(prefix, str):
            raise TypeError(f"{type(self).__name__}.state_dict: prefix must be a str, got {type(prefix).__name__}")
        out = OrderedDict() if destination is None else destination
        for event, module, head in self._walk(prefix + "." if prefix else ""):
            if event == "enter":
                module._run_hooks("state_dict_pre", head, keep_vars)
                for key, t in module._own_state(head):
                    out[key] = t if keep_vars else t.detach()
            else:
                module._run_hooks("state_dict_post", out, head, {})
        return out

    def load_state_dict(self, state_dict, strict: bool = True) -> IncompatibleKeys:
        """Copy values from ``state_dict`` (mp tensors, NumPy/CuPy arrays or numbers) into this module.

        Everything is checked before anything is copied, so a failed load leaves
        the module unchanged (buffers a pre-hook registered are taken back). With
        strict=True (default) missing and unexpected keys are errors; shape
        mismatches always are. Floating values may be cast to another floating
        dtype (a float16 checkpoint into a float32 model); a floating value for an
        integer buffer, or the reverse, is an error.
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"load_state_dict expects a dict of key -> tensor, got {type(state_dict).__name__}")
        kept = [(m, dict(m._buffers), m.__dict__.get("_fixed_dtype_buffers")) for m in self.modules()]
        try:
            ready, missing, unexpected = self._checked_load(OrderedDict(state_dict), strict)
        except BaseException:   # a pre-hook may have added buffers (a checkpoint's FP8 state): take them back
            for m, buffers, fixed in kept:
                m._buffers.clear()
                m._buffers.update(buffers)
                if fixed is None:
                    m.__dict__.pop("_fixed_dtype_buffers", None)
                else:
                    object.__setattr__(m, "_fixed_dtype_buffers", fixed)
            raise
        with no_grad():
            for target, value in ready:
                target._assign("load_state_dict", devices.to_device(value, target.device))
        result = IncompatibleKeys(missing, unexpected)
        for event, module, _ in self._walk():
            if event == "leave":
                module._run_hooks("load_state_dict_post", result)
        return result

    def _checked_load(self, state_dict, strict):
        """load_state_dict's checks, after its pre-hooks: ([(target, value)] to copy, missing keys, unexpected keys),
        or a RuntimeError listing every problem."""
        hook_missing, hook_unexpected, hook_errors = [], [], []
        for event, module, head in self._walk():  # torch's arguments: the keys under head; strict=True
            if event == "enter" and module.__dict__.get("_hooks", {}).get("load_state_dict_pre"):
                local = state_dict if not head else {k: v for k, v in state_dict.items() if k.startswith(head)}
                module._run_hooks("load_state_dict_pre", local, head, {}, True, hook_missing, hook_unexpected,
                                  hook_errors)
        expected = OrderedDict(self._state_entries())
        missing = [k for k in expected if k not in state_dict] + hook_missing
        unexpected = [k for k in state_dict if k not in expected] + hook_unexpected
        problems, ready = [], []
        for key, target in expected.items():
            if key not in state_dict:
                continue
            value = _as_array(key, state_dict[key])
            if value is None:
                problems.append(f"value for {key} is a {type(state_dict[key]).__name__}, expected a Tensor, an "
                                "array or a number")
            elif not _is_real(value.dtype):
                problems.append(f"value for {key} has dtype {value.dtype}, expected a real number type (bool, int "
                                "or floating)")
            elif tuple(value.shape) != tuple(target.shape):
                problems.append(f"size mismatch for {key}: copying a param with shape {tuple(value.shape)} from "
                                f"checkpoint, the shape in current model is {tuple(target.shape)}.")
            elif _is_float(value.dtype) != _dt.is_floating(target.dtype):
                problems.append(f"dtype mismatch for {key}: the checkpoint holds {value.dtype.name}, the model "
                                f"has {target.dtype.name} (floating and integer values do not mix)")
            else:
                ready.append((target, value))
        errors = []
        if strict and missing:
            errors.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ".")
        if strict and unexpected:
            errors.append("Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ".")
        errors.extend(problems + hook_errors)
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(errors))
        return ready, missing, unexpected

    # ---------------------------------------------------------------- backward hooks
    _backward_hooks = None       # {id: hook(module, grad_input, grad_output)}
    _backward_pre_hooks = None   # {id: hook(module, grad_output)}

    def register_full_backward_hook(self, hook, prepend: bool = False):
        """Call ``hook(module, grad_input, grad_output)`` when the gradients of this module's inputs are computed.

        grad_output holds the gradients of the tensors forward returned, grad_input
        one entry per positional argument of forward (None for non-tensors and for
        inputs that get no gradient). Returning a tuple replaces grad_input. If no
        input requires grad, the hook runs as soon as grad_output is known. Returns
        a handle with .remove().
        """
        return self._add_backward_hook("_backward_hooks", hook, prepend, "register_full_backward_hook")

    def register_full_backward_pre_hook(self, hook, prepend: bool = False):
        """Call ``hook(module, grad_output)`` when the gradients of this module's outputs are known, before
        any input gradient is computed; returning a tuple replaces grad_output."""
        return self._add_backward_hook("_backward_pre_hooks", hook, prepend, "register_full_backward_pre_hook")

    def _add_backward_hook(self, store, hook, prepend, what):
        hooks, handle = add_hook(self.__dict__.get(store), hook, what, prepend)
        object.__setattr__(self, store, hooks)
        return handle

    # ---------------------------------------------------------------- printing
    def extra_repr(self) -> str:
        """The text inside this module's parentheses in repr (a layer's settings)."""
        return ""

    def __repr__(self):
        lines = []
        for name, child in self._modules.items():
            body = repr(child).replace("\n", "\n  ")
            lines.append(f"  ({name}): {body}")
        extra = self.extra_repr()
        if not lines:
            return f"{type(self).__name__}({extra})"
        head = f"{type(self).__name__}(" + (f"\n  {extra}" if extra else "")
        return head + "\n" + "\n".join(lines) + "\n)"


def _is_float(dtype) -> bool:
    return dtype.kind == "f" or dtype == _dt.bfloat16


def _is_real(dtype) -> bool:
    """What can be written into a tensor: bool, ints and floats (not complex, strings or objects)."""
    return dtype.kind in "biuf" or dtype == _dt.bfloat16


def _as_array(key, value):
    """The array inside a state_dict value, or None when it is not one."""
    if isinstance(value, Tensor):
        return value._array
    if _be.is_array(value):
        return value
    if isinstance(value, (bool, int, float, np.generic)):
        return np.asarray(value)
    return None


# ---------------------------------------------------------------- containers
class Sequential(Module):
    """Runs its children in order, each one's output feeding the next. Children are named '0', '1', ..."""

    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], (dict, OrderedDict)):
            for name, m in modules[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(modules):
                self.add_module(str(i), m)

    def forward(self, input):
        for m in self._modules.values():
            input = m(input)
        return input

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return Sequential(OrderedDict(list(self._modules.items())[idx]))
        return list(self._modules.values())[_index(idx, len(self))]

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self


class ModuleList(Module):
    """A list of modules whose parameters the parent sees (a plain Python list would hide them)."""

    def __init__(self, modules=None):
        super().__init__()
        for m in modules or ():
            self.append(m)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ModuleList(list(self._modules.values())[idx])
        return self._modules[str(_index(idx, len(self)))]

    def __setitem__(self, idx, module):
        self.add_module(str(_index(idx, len(self))), module)

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleList has no forward(); iterate over it in your module's forward()")


class ModuleDict(Module):
    """A dict of named modules whose parameters the parent sees."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is None:
            return
        items = modules.items() if isinstance(modules, Mapping) else modules
        if isinstance(modules, (str, bytes)) or not isinstance(items, Iterable):
            raise TypeError(f"ModuleDict expects a dict of name -> Module or (name, Module) pairs, got "
                            f"{type(modules).__name__}")
        for i, item in enumerate(items):
            if not (isinstance(item, (tuple, list)) and len(item) == 2):
                raise TypeError(f"ModuleDict: entry {i} must be a (name, Module) pair, got {type(item).__name__}")
            self.add_module(*item)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __contains__(self, key):
        return key in self._modules

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleDict has no forward(); index it in your module's forward()")


def _index(idx, n):
    if not isinstance(idx, (int, np.integer)) or isinstance(idx, bool):
        raise TypeError(f"indices must be integers or slices, got {type(idx).__name__}")
    if not -n <= idx < n:
        raise IndexError(f"index {idx} is out of range for a container of {n} modules")
    return int(idx) % n


# ---------------------------------------------------------------- full backward hooks of a module call
_NO_HOOKS = {"forward_pre": {}, "forward": {}}  # a module whose only hooks are backward hooks


class _BackwardHookCall:
    """One call of a module that has full backward (pre-)hooks.

    The tensors going in and coming out pass through an identity Function, so
    the backward graph has one node where the gradients of all outputs meet
    (its pre-hook runs the backward pre-hooks and records grad_output) and one
    where the gradients of all inputs meet (its pre-hook runs the full backward
    hooks, which may replace grad_input).
    """

    @classmethod
    def of(cls, module):
        if not (module._backward_hooks or module._backward_pre_hooks):
            return None
        return cls(module) if is_grad_enabled() else None

    def __init__(self, module):
        self.module = module
        self.n_args = 0
        self.input_positions = []
        self.grad_output = None

    def setup_inputs(self, args):
        self.n_args = len(args)
        self.input_positions = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
        if not self.input_positions:
            return args
        wrapped = _BackwardHookFunction.apply(*(args[i] for i in self.input_positions))
        wrapped[0].grad_fn.register_prehook(self._on_grad_input)
        args = list(args)
        for i, t in zip(self.input_positions, wrapped):
            args[i] = t
        return tuple(args)

    def setup_outputs(self, result):
        single = isinstance(result, Tensor)
        items = [result] if single else list(result) if isinstance(result, (tuple, list)) else []
        self.output_positions = [i for i, o in enumerate(items) if isinstance(o, Tensor)]
        flowing = [i for i in self.output_positions if items[i].requires_grad]
        if not flowing:
            return result
        self.flowing = flowing
        wrapped = _BackwardHookFunction.apply(*(items[i] for i in flowing))
        wrapped[0].grad_fn.register_prehook(self._on_grad_output)
        for i, t in zip(flowing, wrapped):
            items[i] = t
        return items[0] if single else type(result)(items)

    def _on_grad_output(self, grads):
        by_position = dict(zip(self.flowing, grads))
        grad_output = tuple(by_position.get(i) for i in self.output_positions)
        for hook in list((self.module._backward_pre_hooks or {}).values()):
            new = hook(self.module, grad_output)
            if new is not None:
                grad_output = _checked(new, len(grad_output), "backward pre-hook", "grad_output")
        self.grad_output = grad_output
        if not self.input_positions:  # nothing flows to the inputs: the full hooks run now
            self._run_hooks(tuple([None] * self.n_args))
        return tuple(grad_output[self.output_positions.index(i)] for i in self.flowing)

    def _on_grad_input(self, grads):
        grad_input = [None] * self.n_args
        for i, g in zip(self.input_positions, grads):
            grad_input[i] = g
        new = self._run_hooks(tuple(grad_input))
        if new is None:
            return None
        return tuple(new[i] for i in self.input_positions)

    def _run_hooks(self, grad_input):
        changed = None
        for hook in list((self.module._backward_hooks or {}).values()):
            new = hook(self.module, grad_input, self.grad_output)
            if new is not None:
                grad_input = changed = _checked(new, len(grad_input), "full backward hook", "grad_input")
        return changed


def _checked(new, n, what, name):
    new = tuple(new) if isinstance(new, (tuple, list)) else (new,)
    if len(new) != n:
        raise RuntimeError(f"a {what} returned {len(new)} values for {name}, expected {n}")
    return new


class _BackwardHookFunction(Function):
    """Identity on the tensors of a module call: its node is where their gradients meet."""

    @staticmethod
    def forward(ctx, *tensors):
        ctx.set_materialize_grads(False)
        return tensors

    @staticmethod
    def backward(ctx, *grads):
        return grads
