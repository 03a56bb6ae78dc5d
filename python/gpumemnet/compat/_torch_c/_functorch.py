"""torch._C._functorch: the queries of PyTorch's functorch wrappers (batched tensors of vmap, grad-tracking
tensors of grad). gpumemnet's vmap and grad run on plain tensors (a loop over the batch; the autograd engine), so no
tensor is ever such a wrapper: the queries say no, and what would unwrap one returns the tensor itself. The
batch-dimension primitives have no tensors to make and raise (tensordict imports them, and calls them only inside
a vmap of its own)."""

__all__ = ["is_batchedtensor", "is_gradtrackingtensor", "is_functionaltensor", "get_unwrapped", "maybe_get_level",
           "_add_batch_dim", "_remove_batch_dim"]


def is_batchedtensor(tensor):
    return False


def is_gradtrackingtensor(tensor):
    return False


def is_functionaltensor(tensor):
    return False


def get_unwrapped(tensor):
    return tensor


def maybe_get_level(tensor):
    return -1


def _add_batch_dim(tensor, batch_dim, level):
    raise NotImplementedError("torch._C._functorch._add_batch_dim: gpumemnet's vmap loops over the batch and has no "
                              "batched tensors")


def _remove_batch_dim(tensor, level, batch_size, out_dim):
    raise NotImplementedError("torch._C._functorch._remove_batch_dim: gpumemnet's vmap loops over the batch and has "
                              "no batched tensors")
