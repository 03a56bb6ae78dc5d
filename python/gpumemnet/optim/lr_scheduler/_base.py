"""The scheduler base (LRScheduler) and the schedules that are one formula of the epoch: LambdaLR,
MultiplicativeLR, StepLR, MultiStepLR, ConstantLR, LinearLR, ExponentialLR, PolynomialLR, CosineAnnealingLR.

Each get_lr() is PyTorch's recursive (chainable) form, so that the values match PyTorch's to the last bit even
when another scheduler also changes the lr (ChainedScheduler, SequentialLR); step(epoch) and SequentialLR's
milestones use the closed forms (_get_closed_form_lr). `_is_initial` is True during the step the constructor
makes, as in PyTorch: that step reports the current lr instead of applying a factor."""
import functools
import math
import types
import warnings
from bisect import bisect_right
from collections import Counter

from ... import _C
from ..optimizer import Optimizer

__all__ = ["LRScheduler", "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR", "LinearLR",
           "ExponentialLR", "PolynomialLR", "CosineAnnealingLR"]


def _check_optimizer(optimizer, cls):
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{cls}: {type(optimizer).__name__} is not an Optimizer (expected a gpumemnet Optimizer)")


def _positive_int(value, name, cls):
    """A count of epochs: PyTorch does not check it, and a float such as the text-classification tutorial's
    StepLR(optimizer, 1.0) works there (the schedule takes last_epoch % step_size); a number > 0 is asked here."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{cls}: {name} must be a positive number, got {value!r}")
    return value


def _format_param(name, optimizer, value):
    """One value per parameter group (a list or tuple of that length, or one value for all)."""
    if isinstance(value, (list, tuple)):
        if len(value) != len(optimizer.param_groups):
            raise ValueError(f"{name} must have the same length as optimizer.param_groups. {name} has {len(value)} "
                             f"values, param_groups has {len(optimizer.param_groups)}.")
        return list(value)
    return [value] * len(optimizer.param_groups)


def _set_lr(group, lr):
    """group["lr"] = lr; a tensor lr stays that tensor, filled with lr, as PyTorch's schedulers do (scripts anneal
    it in place: `group["lr"].copy_(lrnow)`)."""
    if isinstance(group["lr"], _C.TensorBase):
        group["lr"].fill_(float(lr))
    else:
        group["lr"] = lr


def _group_lrs(optimizer):
    """The groups' lrs, a tensor one as a copy (get_last_lr() must not move with the next step's fill_)."""
    return [g["lr"].clone() if isinstance(g["lr"], _C.TensorBase) else g["lr"] for g in optimizer.param_groups]


class _enable_get_lr_call:  # noqa: N801 - PyTorch's name
    """Within it, scheduler.get_lr() runs as step() runs it (no warning): libraries' own step() use it (nnU-Net)."""

    def __init__(self, o):
        self.o = o

    def __enter__(self):
        self.o._get_lr_called_within_step = True
        return self

    def __exit__(self, type, value, traceback):  # noqa: A002 - PyTorch's names
        self.o._get_lr_called_within_step = False


class LRScheduler:
    _is_initial = False
    _get_lr_called_within_step = False

    def __init_subclass__(cls, **kwargs):
        """gpumemnet's schedulers' get_lr warns as PyTorch's when called outside step() (a user's own scheduler's
        does not, as in PyTorch)."""
        super().__init_subclass__(**kwargs)
        fn = cls.__dict__.get("get_lr")
        if fn is not None and cls.__module__.startswith("gpumemnet."):
            @functools.wraps(fn)
            def get_lr(self):
                if not self._get_lr_called_within_step:
                    warnings.warn("To get the last learning rate computed by the scheduler, please use "
                                  "`get_last_lr()`.", UserWarning, stacklevel=2)
                return fn(self)
            cls.get_lr = get_lr

    def __init__(self, optimizer, last_epoch=-1):
        _check_optimizer(optimizer, type(self).__name__)
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:  # a tensor lr's own value, not the tensor the steps fill
                lr = group["lr"]
                group.setdefault("initial_lr", lr.clone() if isinstance(lr, _C.TensorBase) else lr)
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] when resuming an "
                                   f"optimizer (last_epoch={last_epoch}); load the optimizer's state_dict first")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._get_lr_called_within_step = False  # PyTorch's attribute (its state_dict has the key)
        self._initial_step()

    def _initial_step(self):
        """The constructor's step (also what SequentialLR runs to restart its first scheduler)."""
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self):
        raise NotImplementedError

    def get_last_lr(self):
        """The lr of each group as last set by this scheduler."""
        return self._last_lr

    def step(self, epoch=None):
        if self._step_count == 1 and not self._is_initial and not getattr(self.optimizer, "_opt_called", False):
            warnings.warn("Detected call of `lr_scheduler.step()` before `optimizer.step()`. In PyTorch 1.1.0 and "
                          "later, you should call them in the opposite order: `optimizer.step()` before "
                          "`lr_scheduler.step()`.  Failure to do this will result in PyTorch skipping the first "
                          "value of the learning rate schedule. See more details at "
                          "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate", UserWarning,
                          stacklevel=2)
        self._step_count += 1
        if epoch is not None:
            warnings.warn("passing an epoch to scheduler.step() is deprecated (as in PyTorch); call step() once "
                          "per epoch instead", UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _within_step(self, compute):
        """compute() (get_lr or the closed form) as step() runs it: get_lr does not warn there."""
        with _enable_get_lr_call(self):
            return compute()

    def _update_lr(self, epoch=None):
        if epoch is None:
            self.last_epoch += 1
            values = self._within_step(self.get_lr)
        else:
            self.last_epoch = epoch
            values = self._within_step(getattr(self, "_get_closed_form_lr", self.get_lr))
        for group, lr in zip(self.optimizer.param_groups, values):
            _set_lr(group, lr)
        self._last_lr = _group_lrs(self.optimizer)

    def state_dict(self):
        """Everything but the optimizer (save that with optimizer.state_dict())."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)


_LRScheduler = LRScheduler  # PyTorch's old name, still imported by older code


class _LambdaBase(LRScheduler):
    """One function per parameter group (or one for all); state_dict saves a callable object's __dict__, not a
    plain function (None), as in PyTorch."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        name = type(self).__name__
        _check_optimizer(optimizer, name)
        self.optimizer = optimizer
        n = len(optimizer.param_groups)
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != n:
                raise ValueError(f"{name}: expected {n} lr_lambdas (one per parameter group), got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * n
        for i, fn in enumerate(self.lr_lambdas):
            if not callable(fn):
                raise TypeError(f"{name}: lr_lambda[{i}] must be callable, got {type(fn).__name__}")
        super().__init__(optimizer, last_epoch)

    def state_dict(self):
        out = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        out["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) or not hasattr(fn, "__dict__")
                             else dict(fn.__dict__) for fn in self.lr_lambdas]
        return out

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        lambdas = state_dict.pop("lr_lambdas", [])
        self.__dict__.update(state_dict)
        for fn, saved in zip(self.lr_lambdas, lambdas):
            if saved is not None:
                fn.__dict__.update(saved)


class LambdaLR(_LambdaBase):
    """lr = base_lr * lr_lambda(epoch)."""

    def get_lr(self):
        return [base * fn(self.last_epoch) for fn, base in zip(self.lr_lambdas, self.base_lrs)]


class MultiplicativeLR(_LambdaBase):
    """lr = lr * lr_lambda(epoch), from epoch 1."""

    def get_lr(self):
        if self._is_initial:
            return _group_lrs(self.optimizer)
        return [g["lr"] * fn(self.last_epoch) for fn, g in zip(self.lr_lambdas, self.optimizer.param_groups)]


class StepLR(LRScheduler):
    """lr = base_lr * gamma ** (epoch // step_size)."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size = _positive_int(step_size, "step_size", "StepLR")
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return _group_lrs(self.optimizer)
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * self.gamma ** (self.last_epoch // self.step_size) for base_lr in self.base_lrs]


class MultiStepLR(LRScheduler):
    """lr = base_lr * gamma ** (number of milestones <= epoch); a milestone listed twice counts twice."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch not in self.milestones:
            return _group_lrs(self.optimizer)
        return [g["lr"] * self.gamma ** self.milestones[self.last_epoch] for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        milestones = sorted(self.milestones.elements())
        return [base_lr * self.gamma ** bisect_right(milestones, self.last_epoch) for base_lr in self.base_lrs]


class ConstantLR(LRScheduler):
    """lr = base_lr * factor until epoch total_iters, then base_lr."""

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1):
        if factor > 1.0 or factor < 0:
            raise ValueError(f"ConstantLR: factor expected to be between 0 and 1, got {factor!r}")
        self.factor = factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        groups = self.optimizer.param_groups
        if self.last_epoch == 0:
            return [g["lr"] * self.factor for g in groups]
        if self.last_epoch != self.total_iters:
            return _group_lrs(self.optimizer)
        return [g["lr"] * (1.0 / self.factor) for g in groups]

    def _get_closed_form_lr(self):
        return [base_lr * (self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor))
                for base_lr in self.base_lrs]


class LinearLR(LRScheduler):
    """lr = base_lr * factor, the factor going linearly from start_factor to end_factor over total_iters epochs
    (torchvision's warm-up)."""

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5, last_epoch=-1):
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError(f"LinearLR: start_factor expected to be greater than 0 and less or equal to 1, got "
                             f"{start_factor!r}")
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError(f"LinearLR: end_factor expected to be between 0 and 1, got {end_factor!r}")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        groups = self.optimizer.param_groups
        if self.last_epoch == 0:
            return [g["lr"] * self.start_factor for g in groups]
        if self._is_initial or self.last_epoch > self.total_iters:
            return _group_lrs(self.optimizer)
        delta = self.end_factor - self.start_factor
        factor = 1.0 + delta / (self.total_iters * self.start_factor + (self.last_epoch - 1) * delta)
        return [g["lr"] * factor for g in groups]

    def _get_closed_form_lr(self):
        return [base_lr * (self.start_factor + (self.end_factor - self.start_factor) *
                           min(self.total_iters, self.last_epoch) / self.total_iters) for base_lr in self.base_lrs]


class ExponentialLR(LRScheduler):
    """lr = base_lr * gamma ** epoch."""

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self._is_initial:
            return _group_lrs(self.optimizer)
        return [g["lr"] * self.gamma for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * self.gamma ** self.last_epoch for base_lr in self.base_lrs]


class PolynomialLR(LRScheduler):
    """lr = base_lr * (1 - min(epoch, total_iters) / total_iters) ** power."""

    def __init__(self, optimizer, total_iters=5, power=1.0, last_epoch=-1):
        self.total_iters = total_iters
        self.power = power
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self._is_initial or self.last_epoch > self.total_iters:
            return _group_lrs(self.optimizer)
        e, T = self.last_epoch, self.total_iters
        decay = ((1.0 - e / T) / (1.0 - (e - 1) / T)) ** self.power
        return [g["lr"] * decay for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * (1.0 - min(self.total_iters, self.last_epoch) / self.total_iters) ** self.power
                for base_lr in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2 (SGDR without restarts; past
    T_max it rises again, as in PyTorch)."""

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        self.T_max = _positive_int(T_max, "T_max", "CosineAnnealingLR")
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        groups, T, e = self.optimizer.param_groups, self.T_max, self.last_epoch
        if self._is_initial:
            return _group_lrs(self.optimizer)
        if self._step_count == 1 and e > 0:
            return [self.eta_min + (base - self.eta_min) * (1 + math.cos(e * math.pi / T)) / 2
                    for base in self.base_lrs]
        if (e - 1 - T) % (2 * T) == 0:
            return [group["lr"] + (base - self.eta_min) * (1 - math.cos(math.pi / T)) / 2
                    for base, group in zip(self.base_lrs, groups)]
        return [(1 + math.cos(math.pi * e / T)) / (1 + math.cos(math.pi * (e - 1) / T)) *
                (group["lr"] - self.eta_min) + self.eta_min for group in groups]

    def _get_closed_form_lr(self):
        return [self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base in self.base_lrs]
