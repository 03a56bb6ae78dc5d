"""torch.distributed.algorithms.join: PyTorch's context manager for uneven inputs across ranks (Join, Joinable,
JoinHook), for code that wraps its loop in it (Hugging Face accelerate's join_uneven_inputs). gpumemnet runs it
where every rank has the same number of iterations (one process included): on exit each joinable's post-hook runs
with is_last_joiner=True, as PyTorch's do then. Uneven inputs are not evened out: PyTorch's joined ranks shadow the
others' collectives, which gpumemnet's DistributedDataParallel does not do, so a rank that runs out early leaves
the others waiting in their next collective, as without Join."""
from abc import ABC, abstractmethod

__all__ = ["Join", "JoinHook", "Joinable"]


class JoinHook:
    """What a joinable runs while others still iterate (main_hook) and after all have joined (post_hook)."""

    def main_hook(self):
        pass

    def post_hook(self, is_last_joiner):
        pass


class Joinable(ABC):
    @abstractmethod
    def __init__(self):
        super().__init__()

    @abstractmethod
    def join_hook(self, **kwargs):
        ...

    @property
    @abstractmethod
    def join_device(self):
        ...

    @property
    @abstractmethod
    def join_process_group(self):
        ...


class Join:
    def __init__(self, joinables, enable=True, throw_on_early_termination=False, **kwargs):
        if len(joinables) == 0:
            raise ValueError("The join context manager requires at least one joinable")
        self._joinables = list(joinables)
        self._hooks = [j.join_hook(**kwargs) for j in self._joinables]
        self._enable = enable

    @staticmethod
    def notify_join_context(joinable):
        """PyTorch's per-iteration all-reduce of who still has inputs; with even inputs there is nothing to say."""
        return None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if self._enable and exc_type is None:
            for hook in self._hooks:
                hook.post_hook(True)
        return False
