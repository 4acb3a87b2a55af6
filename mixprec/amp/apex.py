"""apex's loop over the loss scalers mp.amp.initialize made: ``scale_loss``, ``state_dict``, ``load_state_dict``.

    with mp.amp.scale_loss(loss, optimizer) as scaled:
        scaled.backward()
    optimizer.step()

with ``num_losses`` loss scalers and apex's names and checkpoint format; ``loss_scaler(loss_id)``
hands out a scaler itself, for torch's GradScaler loop. The levels themselves are
mixprec/amp/opt_levels.py.
"""
from __future__ import annotations

import contextlib
import numbers
from collections.abc import Mapping

from ..backend import devices
from ..tensor import Tensor
from ..optim import Optimizer
from .master_weights import master_params
from .opt_levels import _INITIALIZED, _LOSS_SCALERS, _as_list

__all__ = ["scale_loss", "loss_scaler", "state_dict", "load_state_dict"]


def _check_loss_id(loss_id, caller):
    if not _LOSS_SCALERS:
        raise RuntimeError(f"{caller}: call mp.amp.initialize(model, optimizer, ...) first; it makes the loss "
                           "scalers")
    if isinstance(loss_id, bool) or not isinstance(loss_id, numbers.Integral) or \
            not 0 <= loss_id < len(_LOSS_SCALERS):
        raise ValueError(f"{caller}: loss_id must be an integer in [0, {len(_LOSS_SCALERS)}) (initialize "
                         f"made num_losses={len(_LOSS_SCALERS)} loss scalers), got {loss_id!r}")
    return _LOSS_SCALERS[loss_id]


def loss_scaler(loss_id=0):
    """The loss scaler mp.amp.initialize made for loss loss_id: a GradScaler ("dynamic") or a
    StaticGradScaler, the one scale_loss(..., loss_id) uses. For torch's loop instead of apex's::

        model, opt = mp.amp.initialize(model, opt, opt_level="O2")
        scaler = mp.amp.loss_scaler()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    """
    return _check_loss_id(loss_id, "mp.amp.loss_scaler")


@contextlib.contextmanager
def scale_loss(loss, optimizers, loss_id=0):
    """apex's amp.scale_loss, for scripts written for apex's loop::

        with mp.amp.scale_loss(loss, optimizer) as scaled_loss:
            scaled_loss.backward()
        optimizer.step()                  # does nothing if a gradient was inf/NaN

    Yields the loss times the scale of loss scaler loss_id (one of initialize's
    num_losses). On leaving the block the new gradients are unscaled (into the masters
    at O2) and checked, the scale is updated, and each optimizer whose gradients had an
    inf/NaN skips its next step() (Optimizer.skip_next_step). Gradients that were there
    before the block (an earlier loss, or accumulation over iterations) are set aside
    while it runs and added back, already unscaled, so several losses with their own
    scales can meet in one step. As in apex, the overflow check is read on the host when
    the block ends; the loop without any host read is GradScaler.step with a fused
    optimizer. If the block raises, the gradients are put back as they were.
    """
    scaler = _check_loss_id(loss_id, "mp.amp.scale_loss")
    optimizer_list = _as_list(optimizers, Optimizer, "optimizer", "an mp.optim.Optimizer", "mp.amp.scale_loss")
    for optimizer in optimizer_list:
        if optimizer not in _INITIALIZED:
            raise ValueError("mp.amp.scale_loss: the optimizer was not set up by mp.amp.initialize")
    set_aside = []  # (stepped tensor, a copy of its unscaled gradient) from before the block
    for optimizer in optimizer_list:
        for p in master_params(optimizer):
            if p.grad is not None:  # copied: an O2 master's gradient buffer is reused by unscale_
                with devices.on_device(p.device):
                    set_aside.append((p, Tensor._wrap(p.grad._array.copy())))
        optimizer.zero_grad(set_to_none=True)
    try:
        yield scaler.scale(loss)
    except BaseException:
        for optimizer in optimizer_list:
            optimizer.zero_grad(set_to_none=True)
        for p, grad in set_aside:
            p.grad = grad
        raise
    checked = False
    for optimizer in optimizer_list:
        scaler.unscale_(optimizer)
        found = scaler._found_inf(optimizer)  # None: this loss gave the optimizer no gradient
        if found:
            optimizer.skip_next_step()
        checked = checked or found is not None
    for p, grad in set_aside:
        if p.grad is None:
            p.grad = grad
        else:
            p.grad._array += grad._array
            p.grad._bump_version()
    if checked:
        scaler.update()


def state_dict() -> dict:
    """apex's amp.state_dict(): {"loss_scaler0": ..., "loss_scaler1": ...}, each a GradScaler.state_dict()."""
    if not _LOSS_SCALERS:
        raise RuntimeError("mp.amp.state_dict: call mp.amp.initialize first; it makes the loss scalers")
    return {f"loss_scaler{i}": scaler.state_dict() for i, scaler in enumerate(_LOSS_SCALERS)}


def load_state_dict(state_dict):
    """Restore what mp.amp.state_dict() (or apex's amp.state_dict()) saved into initialize's loss scalers.

    Each entry is a GradScaler.state_dict(), or apex's {"loss_scale": s, "unskipped": n} (n clean steps
    since the scale last changed: the growth tracker). Everything is checked before anything changes.
    """
    if not _LOSS_SCALERS:
        raise RuntimeError("mp.amp.load_state_dict: call mp.amp.initialize first; it makes the loss scalers")
    if not isinstance(state_dict, Mapping):
        raise TypeError(f"mp.amp.load_state_dict expects the dict mp.amp.state_dict() returned, got "
                        f"{type(state_dict).__name__}")
    expected = [f"loss_scaler{i}" for i in range(len(_LOSS_SCALERS))]
    if sorted(state_dict, key=str) != sorted(expected):
        raise ValueError(f"mp.amp.load_state_dict: expected the keys {expected} (initialize made "
                         f"{len(_LOSS_SCALERS)} loss scalers), got {sorted(map(str, state_dict))}")
    checked = []
    for key, scaler in zip(expected, _LOSS_SCALERS):
        entry = state_dict[key]
        if isinstance(entry, Mapping) and set(entry) == {"loss_scale", "unskipped"}:  # apex's format
            entry = {"scale": entry["loss_scale"], "_growth_tracker": entry["unskipped"],
                     **{k: v for k, v in scaler.state_dict().items() if k not in ("scale", "_growth_tracker")}}
        try:
            checked.append(scaler._checked_state(entry))
        except (TypeError, ValueError, RuntimeError) as exc:
            raise type(exc)(f"mp.amp.load_state_dict[{key!r}]: {exc}") from None
    for scaler, values in zip(_LOSS_SCALERS, checked):
        scaler._load_checked(values)
