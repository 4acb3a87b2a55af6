"""Learning-rate schedules with torch.optim.lr_scheduler's formulas and call pattern.

    scheduler = StepLR(optimizer, step_size=30, gamma=0.1)
    for epoch in range(100):
        train(...)            # optimizer.step() inside
        scheduler.step()

Schedulers are chainable, as in PyTorch: each step multiplies the learning rate
the optimizer currently has, so two schedulers on one optimizer compose, and
SequentialLR switches from one to the next at milestones (warm-up, then decay).

Skipped steps. With a GradScaler an iteration whose gradients overflowed does
not call optimizer.step(). A schedule counted in iterations (a warm-up) should
not advance then. Pass ``skip_unstepped=True`` and ``scheduler.step()`` does
nothing unless optimizer.step() really ran since the previous scheduler step:

    scheduler = LinearLR(optimizer, start_factor=0.1, total_iters=100, skip_unstepped=True)
    scaler.step(optimizer); scaler.update(); scheduler.step()

The scheduler reads the count of step() calls the optimizer keeps itself, so
this works for any reason a step is skipped, not only the scaler's. Nothing is
wrapped (torch wraps optimizer.step on the instance), so a deep copy of an
optimizer steps its own parameters only. A fused optimizer stepped by a
GradScaler is the exception: its step is always called and skips on the
device, which the host never learns, so skip_unstepped=True refuses it.
A per-tensor optimizer on a GPU would skip on the device too; such a scheduler
asks the GradScaler to read found_inf for it instead (one host wait a step).

Calling scheduler.step() before the optimizer ever stepped warns (a
UserWarning, as in torch): the first learning rate of the schedule is then
never used. A skip_unstepped scheduler does not warn, it waits for that step.
"""
from __future__ import annotations

import bisect
import copy
import math
import warnings
from collections.abc import Iterable, Mapping

from .optimizer import Optimizer, _is_int, check_like, check_real

__all__ = ["LRScheduler", "StepLR", "CosineAnnealingLR", "LinearLR", "LambdaLR", "SequentialLR"]


class LRScheduler:
    """Base class: sets each param group's "lr" from get_lr() at every step().

    last_epoch=-1 starts a new schedule (and records each group's
    "initial_lr"); a larger value resumes one. The constructor takes the first
    step, so the optimizer holds the epoch-0 learning rate right away.
    """

    def __init__(self, optimizer, last_epoch: int = -1, skip_unstepped: bool = False):
        name = type(self).__name__
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{name}: {type(optimizer).__name__} is not an mp.optim.Optimizer")
        if not _is_int(last_epoch) or last_epoch < -1:
            raise TypeError(f"{name}: last_epoch must be an int >= -1 (-1 starts a new schedule), got {last_epoch!r}")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"param_groups[{i}] has no 'initial_lr', which resuming a schedule "
                                   f"(last_epoch={last_epoch}) needs; load the optimizer's state_dict first")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self.skip_unstepped = bool(skip_unstepped)
        self.skipped_steps = 0
        if self.skip_unstepped:  # a GradScaler then reads found_inf for a per-tensor optimizer (see Optimizer)
            optimizer.step_decided_on_host = True
        self._seen_optimizer_steps = optimizer._steps_taken
        self._step_count = 0
        self._initial_step()

    def _initial_step(self):
        self._step_count = 0
        self._take_step()

    def get_lr(self) -> list[float]:
        """The learning rate of every param group at self.last_epoch."""
        raise NotImplementedError

    def get_last_lr(self) -> list[float]:
        """The learning rates the last step set."""
        return self._last_lr

    def step(self):
        """Advance the schedule by one (or do nothing, see skip_unstepped)."""
        if self._step_count == 1 and not self.skip_unstepped and self.optimizer._steps_taken == 0:
            warnings.warn(f"{type(self).__name__}.step() was called before the optimizer ever stepped: the "
                          "schedule's first learning rate is skipped. Call optimizer.step() first, then "
                          "scheduler.step(), in every iteration", UserWarning, stacklevel=2)
        if self.skip_unstepped:
            if self.optimizer._steps_decided_on_device:
                raise RuntimeError("skip_unstepped=True cannot tell whether the optimizer stepped: a fused optimizer "
                                   "stepped by a GradScaler skips on the device, and nothing is read back. Use "
                                   "skip_unstepped=False (torch's behaviour) or fused=False")
            taken = self.optimizer._steps_taken
            if taken == self._seen_optimizer_steps:
                self.skipped_steps += 1
                return
            self._seen_optimizer_steps = taken
        self._take_step()

    def _take_step(self):
        self._step_count += 1
        self.last_epoch += 1
        try:
            lrs = self.get_lr()
        except BaseException:  # (a user's lr_lambda raised: the schedule stays where it was)
            self._step_count -= 1
            self.last_epoch -= 1
            raise
        self._set(lrs)

    def _set(self, lrs):
        for group, lr in zip(self.optimizer.param_groups, lrs):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def _closed_form(self, epoch):
        """The learning rates at ``epoch`` computed from base_lrs (for jumps such as SequentialLR's)."""
        raise NotImplementedError

    def _restart(self):
        """Start this schedule over at epoch 0 from base_lrs (SequentialLR's milestones)."""
        self.last_epoch = 0
        self._step_count += 1
        self._set(self._closed_form(0))

    _not_state = ("optimizer", "_seen_optimizer_steps")

    def state_dict(self) -> dict:
        """Everything but the optimizer (and functions), for checkpoints."""
        return {k: v for k, v in self.__dict__.items() if k not in self._not_state}

    _counters = ("last_epoch", "_step_count", "skipped_steps")  # state that must load as ints

    def load_state_dict(self, state_dict: dict):
        """Restore what state_dict() saved. Everything is checked first: a failed load changes nothing."""
        self._apply_state(self._checked_state(state_dict))

    def _checked_state(self, state_dict) -> dict:
        """The attributes state_dict sets, each checked against this scheduler's current value."""
        name = type(self).__name__
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"{name}.load_state_dict expects a dict, got {type(state_dict).__name__}")
        missing = sorted({"last_epoch", "base_lrs"} - set(state_dict))
        if missing:
            raise KeyError(f"{name}.load_state_dict: the state has no {', '.join(missing)}; "
                           "is it a scheduler's state_dict?")
        current = self.state_dict()
        checked = {}
        for key, value in state_dict.items():
            if key in self._not_state:
                continue
            if key not in current:
                raise ValueError(f"{name}.load_state_dict: unknown key {key!r}; a {name} state holds "
                                 f"{sorted(current)} (is it another scheduler's state?)")
            where = f"{name} state_dict[{key!r}]"
            if key in self._counters and not _is_int(value):
                raise ValueError(f"{where} must be an int (a step count), got {value!r}")
            check_like(current[key], value, where)
            checked[key] = copy.deepcopy(value)
        return checked

    def _apply_state(self, checked):
        self.__dict__.update(checked)
        self._seen_optimizer_steps = self.optimizer._steps_taken

    def __repr__(self):
        return f"{type(self).__name__}(last_epoch={self.last_epoch}, last_lr={self.get_last_lr()})"


class StepLR(LRScheduler):
    """Multiply the learning rate by gamma every step_size steps: lr = base_lr * gamma ** (epoch // step_size)."""

    def __init__(self, optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1,
                 skip_unstepped: bool = False):
        if not isinstance(step_size, int) or step_size < 1:
            raise ValueError(f"StepLR: step_size must be a positive int, got {step_size!r}")
        check_real("StepLR", gamma=gamma)
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch, skip_unstepped)

    def get_lr(self):
        lrs = [group["lr"] for group in self.optimizer.param_groups]
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return lrs
        return [lr * self.gamma for lr in lrs]

    def _closed_form(self, epoch):
        return [base * self.gamma ** (epoch // self.step_size) for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Cosine decay from base_lr to eta_min over T_max steps (then back up, periodically):

    lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2
    """

    def __init__(self, optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1,
                 skip_unstepped: bool = False):
        if not isinstance(T_max, int) or T_max < 1:
            raise ValueError(f"CosineAnnealingLR: T_max must be a positive int, got {T_max!r}")
        check_real("CosineAnnealingLR", eta_min=eta_min)
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch, skip_unstepped)

    def get_lr(self):
        groups, e, t, lo = self.optimizer.param_groups, self.last_epoch, self.T_max, self.eta_min
        if e == 0:
            return [g["lr"] for g in groups]
        if self._step_count == 1 and e > 0:
            return self._closed_form(e)
        if (e - 1 - t) % (2 * t) == 0:
            return [g["lr"] + (base - lo) * (1 - math.cos(math.pi / t)) / 2 for g, base in zip(groups, self.base_lrs)]
        return [(1 + math.cos(math.pi * e / t)) / (1 + math.cos(math.pi * (e - 1) / t)) * (g["lr"] - lo) + lo
                for g in groups]

    def _closed_form(self, epoch):
        return [self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * epoch / self.T_max)) / 2
                for base in self.base_lrs]


class LinearLR(LRScheduler):
    """Scale the learning rate linearly from start_factor to end_factor over total_iters steps (a warm-up).

    lr = base_lr * (start_factor + (end_factor - start_factor) * min(epoch, total_iters) / total_iters)
    """

    def __init__(self, optimizer, start_factor: float = 1.0 / 3, end_factor: float = 1.0, total_iters: int = 5,
                 last_epoch: int = -1, skip_unstepped: bool = False):
        check_real("LinearLR", start_factor=start_factor, end_factor=end_factor)
        if not 0 < start_factor <= 1:
            raise ValueError(f"LinearLR: start_factor must be in (0, 1], got {start_factor}")
        if not 0 <= end_factor <= 1:
            raise ValueError(f"LinearLR: end_factor must be in [0, 1], got {end_factor}")
        if not isinstance(total_iters, int) or total_iters < 1:
            raise ValueError(f"LinearLR: total_iters must be a positive int, got {total_iters!r}")
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch, skip_unstepped)

    def get_lr(self):
        lrs = [group["lr"] for group in self.optimizer.param_groups]
        if self.last_epoch == 0:
            return [lr * self.start_factor for lr in lrs]
        if self.last_epoch > self.total_iters:
            return lrs
        s, e = self.start_factor, self.end_factor
        factor = 1.0 + (e - s) / (self.total_iters * s + (self.last_epoch - 1) * (e - s))
        return [lr * factor for lr in lrs]

    def _closed_form(self, epoch):
        s, e = self.start_factor, self.end_factor
        return [base * (s + (e - s) * min(self.total_iters, epoch) / self.total_iters) for base in self.base_lrs]


class LambdaLR(LRScheduler):
    """lr = base_lr * lr_lambda(epoch), one function for all groups or one per group.

    The functions are not part of state_dict (code is never saved); pass them again when resuming.
    """

    _not_state = LRScheduler._not_state + ("lr_lambdas",)

    def __init__(self, optimizer, lr_lambda, last_epoch: int = -1, skip_unstepped: bool = False):
        n = len(optimizer.param_groups)
        lambdas = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else [lr_lambda] * n
        if len(lambdas) != n or not all(callable(f) for f in lambdas):
            raise ValueError(f"LambdaLR: expected one callable or a list of {n} callables (one per param group)")
        self.lr_lambdas = lambdas
        super().__init__(optimizer, last_epoch, skip_unstepped)

    def get_lr(self):
        return self._closed_form(self.last_epoch)

    def _closed_form(self, epoch):
        factors = [f(epoch) for f in self.lr_lambdas]
        for i, factor in enumerate(factors):
            check_real("LambdaLR", **{f"lr_lambda[{i}]({epoch})": factor})
        return [base * factor for base, factor in zip(self.base_lrs, factors)]


class SequentialLR(LRScheduler):
    """Run schedulers one after another, switching at the milestone steps.

    SequentialLR(opt, [LinearLR(opt, 0.1, total_iters=5), CosineAnnealingLR(opt, 95)], milestones=[5])
    warms up for 5 steps, then restarts the cosine schedule from the base learning rate.
    """

    def __init__(self, optimizer, schedulers, milestones, last_epoch: int = -1, skip_unstepped: bool = False):
        for what, value in (("schedulers", schedulers), ("milestones", milestones)):
            if not isinstance(value, Iterable):
                raise TypeError(f"SequentialLR: {what} must be a list, got {type(value).__name__}")
        schedulers, milestones = list(schedulers), list(milestones)
        if not schedulers:
            raise ValueError("SequentialLR: expected at least one scheduler")
        for i, s in enumerate(schedulers):
            if not isinstance(s, LRScheduler) or s.optimizer is not optimizer:
                raise ValueError(f"SequentialLR: schedulers[{i}] must be an LRScheduler of the same optimizer")
        if len(milestones) != len(schedulers) - 1 or milestones != sorted(milestones):
            raise ValueError(f"SequentialLR: expected {len(schedulers) - 1} increasing milestones for "
                             f"{len(schedulers)} schedulers, got {milestones}")
        self._schedulers, self._milestones = schedulers, milestones
        self.optimizer = optimizer
        for group in optimizer.param_groups:  # undo the first step the schedulers took when they were built
            group["lr"] = group["initial_lr"]
        for s in schedulers:
            s.last_epoch -= 1
        super().__init__(optimizer, last_epoch + 1, skip_unstepped)

    def _initial_step(self):
        self._step_count = 1
        self._schedulers[0]._initial_step()
        self._last_lr = self._schedulers[0].get_last_lr()

    def _take_step(self):
        self._step_count += 1
        self.last_epoch += 1
        idx = bisect.bisect_right(self._milestones, self.last_epoch)
        current = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            current._restart()
        else:
            current._take_step()
        self._last_lr = current.get_last_lr()

    def state_dict(self):
        state = {k: v for k, v in self.__dict__.items() if k not in self._not_state + ("_schedulers",)}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def _checked_state(self, state_dict):
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"SequentialLR.load_state_dict expects a dict, got {type(state_dict).__name__}")
        own = dict(state_dict)
        inner = own.pop("_schedulers", None)
        if not isinstance(inner, (list, tuple)) or len(inner) != len(self._schedulers):
            raise KeyError(f"SequentialLR.load_state_dict: expected states for {len(self._schedulers)} schedulers")
        checked = super()._checked_state(own)
        checked["_schedulers"] = [s._checked_state(st) for s, st in zip(self._schedulers, inner)]
        return checked

    def _apply_state(self, checked):
        inner = checked.pop("_schedulers")
        super()._apply_state(checked)
        for s, st in zip(self._schedulers, inner):
            s._apply_state(st)
