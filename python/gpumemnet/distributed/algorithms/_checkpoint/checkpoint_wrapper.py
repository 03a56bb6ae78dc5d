"""torch.distributed.algorithms._checkpoint.checkpoint_wrapper: activation checkpointing applied by wrapping a
module (checkpoint_wrapper) or every module a predicate picks (apply_activation_checkpointing), as PyTorch's. The
wrapper's forward runs the module under torch.utils.checkpoint; its state_dict keys are the module's own (the
wrapper's prefix is taken out on saving and put back on loading), so checkpoints load with or without it."""
import enum
import functools

from ....nn.modules.module import Module
from ....utils.checkpoint import checkpoint as _checkpoint

__all__ = ["CheckpointImpl", "CheckpointWrapper", "checkpoint_wrapper", "apply_activation_checkpointing"]

_PREFIX = "_checkpoint_wrapped_module."


class CheckpointImpl(enum.Enum):
    REENTRANT = enum.auto()
    NO_REENTRANT = enum.auto()


class CheckpointWrapper(Module):
    def __init__(self, mod, checkpoint_impl=CheckpointImpl.NO_REENTRANT, checkpoint_fn=None, **checkpoint_fn_kwargs):
        super().__init__()
        self._checkpoint_wrapped_module = mod
        self.checkpoint_impl = checkpoint_impl
        if checkpoint_fn is None:
            checkpoint_fn = functools.partial(_checkpoint, use_reentrant=checkpoint_impl == CheckpointImpl.REENTRANT)
        self.checkpoint_fn = functools.partial(checkpoint_fn, **checkpoint_fn_kwargs)
        self._register_state_dict_hook(_drop_prefix)
        self._register_load_state_dict_pre_hook(_add_prefix, with_module=True)

    def forward(self, *args, **kwargs):
        return self.checkpoint_fn(self._checkpoint_wrapped_module, *args, **kwargs)

    def __getattr__(self, name):  # the wrapped module's attributes, as PyTorch's wrapper forwards them
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._checkpoint_wrapped_module, name)

    def __getitem__(self, key):
        return self._checkpoint_wrapped_module.__getitem__(key)


def _drop_prefix(module, state_dict, prefix, *args):
    for key in list(state_dict):
        if key.startswith(prefix + _PREFIX):
            state_dict[prefix + key[len(prefix + _PREFIX):]] = state_dict.pop(key)
    return state_dict


def _add_prefix(module, state_dict, prefix, *args):
    for key in list(state_dict):
        if key.startswith(prefix) and not key.startswith(prefix + _PREFIX):
            state_dict[prefix + _PREFIX + key[len(prefix):]] = state_dict.pop(key)


def checkpoint_wrapper(module, checkpoint_impl=CheckpointImpl.NO_REENTRANT, checkpoint_fn=None,
                       **checkpoint_fn_kwargs):
    return CheckpointWrapper(module, checkpoint_impl, checkpoint_fn, **checkpoint_fn_kwargs)


def apply_activation_checkpointing(model, checkpoint_wrapper_fn=checkpoint_wrapper, check_fn=lambda _: True,
                                   auto_wrap_policy=None):
    """Wraps, in place, every submodule of model for which check_fn(module) is true (the outermost ones)."""
    def visit(parent):
        for name, child in list(parent.named_children()):
            if check_fn(child):
                setattr(parent, name, checkpoint_wrapper_fn(child))
            else:
                visit(child)
    visit(model)
