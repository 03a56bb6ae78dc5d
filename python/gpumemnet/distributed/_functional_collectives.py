"""torch.distributed._functional_collectives: PyTorch's traceable collectives, which return tensors to wait on.
gpumemnet's collectives complete when they return, so wait_tensor gives its argument back; the all-to-all forms
are not in gpumemnet (nor is all_to_all_single: expert parallelism needs them)."""


def wait_tensor(tensor):
    return tensor


def all_to_all_single_autograd(*args, **kwargs):
    raise NotImplementedError("all_to_all_single_autograd: gpumemnet's collectives have no all-to-all")


all_to_all_single = all_to_all_single_autograd
