"""Master weights: float32 copies of a low-precision model's parameters, stepped by the model's own optimizer.

O2 (mp.amp.initialize) keeps the model in float16 for speed and lets the optimizer step
float32 *masters*, so that updates smaller than half a float16 ulp are not rounded away.
``MasterWeights(models, optimizer, pairs)`` sets that up with three documented protocols
and nothing else (no attribute of the model or the optimizer is replaced):

* the optimizer (mp.optim.Optimizer's step extension): its param_groups hold the
  masters in place of the float16 parameters; MasterWeights answers
  ``unscale_pairs()`` with (float16 model gradient, float32 master gradient) pairs, so
  GradScaler.unscale_ writes the masters' gradients in the same fused launch that
  checks for inf/NaN; ``before_update()`` makes sure the masters' gradients are the
  model's current ones; ``weight_copies()`` names each (master, model weight) pair, so
  that the optimizer rounds every updated master into its model weight (a fused
  optimizer in the same kernel pass); ``zero_grad()`` clears the model's gradients too;
* the model (nn.Module state-dict hooks): ``state_dict()`` holds the float32 masters
  under the usual keys, and ``load_state_dict()`` writes the values it loads into the
  masters, then refreshes the float16 weights from them;
* the scaler: nothing. It talks to the optimizer (unscale_pairs) only.

The invariant: every model parameter equals its master rounded to the model's dtype.
"""
from __future__ import annotations

import numpy as np

from .. import backend as _be
from ..backend import devices
from ..autograd.grad_mode import no_grad
from ..optim.optimizer import writable_grad, zero_grads
from ..tensor import Tensor
from . import functional as _F

__all__ = ["MasterWeights", "master_params"]


def master_params(optimizer):
    """The tensors the optimizer steps: float32 masters with master weights, its parameters otherwise.

    Clip these (after scaler.unscale_(optimizer)), not model.parameters(): with master
    weights the model's float16 gradients are still scaled, the masters' are the true ones.
    """
    for group in optimizer.param_groups:
        yield from group["params"]


class MasterWeights:
    """float32 masters of a model's low-precision parameters (see the module docstring).

    models: the model, or the list of models, whose state dicts hold the masters; pairs: (model
    parameter, float32 master Parameter) for each parameter the optimizer steps that has a
    master; the optimizer's param_groups are re-pointed at the masters.
    Master gradients live in float32 buffers allocated once, so their addresses never
    change (the CUDA unscale kernel keeps its chunk table).
    """

    def __init__(self, models, optimizer, pairs):
        self.optimizer = optimizer
        self.pairs = list(pairs)                                   # (model param, master)
        self._master_of = {id(p): m for p, m in self.pairs}
        self._model_of = {id(m): p for p, m in self.pairs}
        self._grad_buffers = {}                                    # id(master) -> float32 array
        self._filled = None  # {id(model param): (its grad, version)} as unscale_pairs read them; None: not yet
        self._loading = []   # (model param, master, value) that a load_state_dict in progress will write
        for group in optimizer.param_groups:
            group["params"] = [self._master_of.get(id(p), p) for p in group["params"]]
        optimizer.set_step_extension(self)
        for model in models if isinstance(models, (list, tuple)) else [models]:
            model.register_state_dict_post_hook(self._state_dict_hook)
            model.register_load_state_dict_pre_hook(self._load_pre_hook)
            model.register_load_state_dict_post_hook(self._load_post_hook)

    @classmethod
    def of(cls, optimizer):
        """The MasterWeights an optimizer steps, or None."""
        extension = getattr(optimizer, "step_extension", None)
        return extension if isinstance(extension, cls) else None

    def master_of(self, param):
        """The float32 master of a model parameter (None when it has none)."""
        return self._master_of.get(id(param))

    # ---- the optimizer's step extension ----
    def unscale_pairs(self):
        """(gradient, destination) pairs for GradScaler.unscale_: every float16 model gradient into its
        master's float32 gradient, and in place for what the optimizer steps directly (a float32 norm
        parameter). A master whose model parameter got no gradient gets none (it is not stepped)."""
        pairs, filled = [], {}
        for group in self.optimizer.param_groups:
            for q in group["params"]:
                p = self._model_of.get(id(q))
                if p is None:
                    if q.grad is not None:
                        g = writable_grad(q)
                        pairs.append((g, g))
                    continue
                if p.grad is None:
                    q.grad = None
                    continue
                q.grad = self._master_grad(q)
                pairs.append((p.grad, q.grad))
                filled[id(p)] = (p.grad, p.grad._version)
        self._filled = filled
        return pairs

    def before_update(self):
        """The masters' gradients must be the model's current ones: a scaler's unscale_ filled them (and
        nothing may have changed the model's gradients since), or no scaler was used: copy them now."""
        if self._filled is None:
            self._copy_grads()
            return
        for p, _ in self.pairs:
            seen = self._filled.get(id(p))
            if (seen is None) != (p.grad is None) or seen is not None and (seen[0] is not p.grad or
                                                                           seen[1] != p.grad._version):
                raise RuntimeError("optimizer.step(): the model's gradients changed after scaler.unscale_(optimizer) "
                                   "read them. With master weights the optimizer steps float32 masters: clip or edit "
                                   "the gradients of mp.amp.master_params(optimizer), not model.parameters()")

    def weight_copies(self):
        """(master, model weight) pairs: the optimizer writes each model weight, rounded, from its updated master."""
        return [(m, p) for p, m in self.pairs]

    def after_update(self):
        self._filled = None

    def zero_grad(self, set_to_none=True):
        zero_grads((p for p, _ in self.pairs), set_to_none)
        self._filled = None

    # ---- the model's state-dict hooks ----
    def _state_dict_hook(self, module, state_dict, prefix, local_metadata):
        """The model's state_dict holds the float32 masters (so a checkpoint keeps full precision and loads
        into a float32 model as well); detached unless state_dict(keep_vars=True) asked for the tensors."""
        for name, p in module.named_parameters(prefix=prefix.rstrip("."), remove_duplicate=False):
            m = self.master_of(p)
            if m is not None and name in state_dict:
                state_dict[name] = m if state_dict[name] is p else m.detach()

    def _load_pre_hook(self, module, state_dict, prefix, *_):
        """Note the values meant for the masters; they are written only once the whole load succeeded."""
        self._loading = [(p, m, state_dict[name])
                         for name, p in module.named_parameters(prefix=prefix.rstrip("."), remove_duplicate=False)
                         if (m := self.master_of(p)) is not None and name in state_dict]

    @no_grad()
    def _load_post_hook(self, module, incompatible_keys):
        """Masters := the loaded values (float32, exact whatever the file held); weights := masters rounded."""
        loading, self._loading = self._loading, []
        for _, m, value in loading:
            m._assign("load_state_dict", value)
        self._refresh_model([(p, m) for p, m, _ in loading])

    # ---- internals ----
    def _master_grad(self, master):
        buf = self._grad_buffers.get(id(master))
        if buf is None:
            with devices.on_device(master.device):
                buf = self._grad_buffers[id(master)] = _be.xp_of(master.device).empty(master.shape, np.float32)
        return master.grad if master.grad is not None and master.grad._array is buf else Tensor._wrap(buf)

    def _copy_grads(self):
        """Copy (widen) the model's gradients into the masters unchanged: optimizer.step() without a scaler."""
        pairs = [(s._array, d._array) for s, d in self.unscale_pairs() if s is not d]
        if pairs:
            device = devices.device_of_array(pairs[0][0])
            xp = _be.xp_of(device)
            with devices.on_device(device):
                flag, one = xp.zeros((1,), np.float32), xp.ones((1,), np.float32)
            _F.non_finite_check_and_unscale_([s for s, _ in pairs], flag, one, out=[d for _, d in pairs])

    @no_grad()
    def _refresh_model(self, pairs):
        """model weight = master rounded to the model's dtype (round to nearest even)."""
        for p, m in pairs:
            p._assign("refreshing a weight from its master", m)  # also bumps its version: stale casts go
