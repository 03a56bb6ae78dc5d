"""torch.optim.swa_utils: AveragedModel (SWA and EMA of a model's weights), update_bn, SWALR and the averaging
functions, with PyTorch's names and rules. torchvision's reference scripts subclass AveragedModel for their
model EMA at import time, so it has to exist for them to start.

The averages are computed one tensor at a time with ordinary tensor ops (PyTorch uses _foreach_lerp_): each
update makes transient temporaries the size of one parameter, never of the whole model."""
import itertools
import math
from copy import deepcopy

from .. import _C
from .._core import creation
from .._core.autograd import no_grad
from ..nn.modules.batchnorm import _BatchNorm
from ..nn.modules.module import Module
from .lr_scheduler._base import LRScheduler, _format_param

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn", "get_swa_multi_avg_fn", "get_ema_avg_fn",
           "get_swa_avg_fn"]


def _lerp_(p, m, w):
    """p <- lerp(p, m, w) in place (PyTorch's two-sided form)."""
    p.copy_(p + (m - p) * w if w < 0.5 else m - (m - p) * (1 - w))


def _check_decay(decay):
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in [0,1] range.")


def get_ema_multi_avg_fn(decay=0.999):
    _check_decay(decay)

    def ema_update(ema_param_list, current_param_list, _):
        with no_grad():
            for p, m in zip(ema_param_list, current_param_list):
                if p.dtype.is_floating_point:
                    _lerp_(p, m, 1 - decay)
                else:
                    p.copy_(p * decay + m * (1 - decay))
    return ema_update


def get_swa_multi_avg_fn():
    def swa_update(averaged_param_list, current_param_list, num_averaged):
        n = float(num_averaged.item()) if isinstance(num_averaged, _C.TensorBase) else float(num_averaged)
        with no_grad():
            for p, m in zip(averaged_param_list, current_param_list):
                if p.dtype.is_floating_point:
                    _lerp_(p, m, 1 / (n + 1))
                else:
                    p.copy_(p + (m - p) / (n + 1))
    return swa_update


def get_ema_avg_fn(decay=0.999):
    _check_decay(decay)

    def ema_update(ema_param, current_param, num_averaged):
        with no_grad():
            return decay * ema_param + (1 - decay) * current_param
    return ema_update


def get_swa_avg_fn():
    def swa_update(averaged_param, current_param, num_averaged):
        with no_grad():
            return averaged_param + (current_param - averaged_param) / (num_averaged + 1)
    return swa_update


class AveragedModel(Module):
    """A deep copy of `model` (`.module`) whose parameters (and buffers with use_buffers=True) are the running
    average of the model's, updated by update_parameters(model): equal-weight SWA by default, or avg_fn /
    multi_avg_fn (e.g. get_ema_multi_avg_fn(0.999) for an EMA). n_averaged counts the updates (a buffer)."""

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", creation.tensor(0, dtype="int64", device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def update_parameters(self, model):
        if self.use_buffers:
            mine = itertools.chain(self.module.parameters(), self.module.buffers())
            theirs = itertools.chain(model.parameters(), model.buffers())
        else:
            mine, theirs = self.module.parameters(), model.parameters()
        n = int(self.n_averaged.item())
        with no_grad():
            pairs = [(p.detach(), m.detach().to(p.device)) for p, m in zip(mine, theirs)]
            if n == 0:
                for p, m in pairs:
                    p.copy_(m)
            elif self.avg_fn is not None:
                for p, m in pairs:
                    p.copy_(self.avg_fn(p, m, self.n_averaged.to(p.device)))
            else:
                fn = self.multi_avg_fn or get_swa_multi_avg_fn()
                fn([p for p, _ in pairs], [m for _, m in pairs], self.n_averaged.to(pairs[0][0].device)
                   if pairs else n)
            if not self.use_buffers:
                for b, mb in zip(self.module.buffers(), model.buffers()):
                    b.detach().copy_(mb.detach().to(b.device))
            self.n_averaged.copy_(self.n_averaged + 1)


def update_bn(loader, model, device=None):
    """Recompute every BatchNorm's running statistics with one pass over `loader` (cumulative averages,
    momentum=None), as PyTorch's update_bn does after SWA."""
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    with no_grad():
        for batch in loader:
            if isinstance(batch, (list, tuple)):
                batch = batch[0]
            if device is not None:
                batch = batch.to(device)
            model(batch)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneals each group's lr to swa_lr over anneal_epochs (cos or linear), then holds it."""

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos", last_epoch=-1):
        for lr, group in zip(_format_param("swa_lr", optimizer, swa_lr), optimizer.param_groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t):
        return t

    @staticmethod
    def _cosine_anneal(t):
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def _set_anneal_func(self, strategy):
        self._anneal_strategy = strategy
        self.anneal_func = self._cosine_anneal if strategy == "cos" else self._linear_anneal

    def get_lr(self):
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_alpha = self.anneal_func(max(0, min(1, (step - 1) / max(1, self.anneal_epochs))))
        prev_lrs = [self._get_initial_lr(g["lr"], g["swa_lr"], prev_alpha) for g in self.optimizer.param_groups]
        alpha = self.anneal_func(max(0, min(1, step / max(1, self.anneal_epochs))))
        return [g["swa_lr"] * alpha + lr * (1 - alpha) for g, lr in zip(self.optimizer.param_groups, prev_lrs)]

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)


