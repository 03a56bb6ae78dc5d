"""torch._functorch.vmap: helpers over batched tensors (tensordict imports them). gpumemnet's vmap makes none, so
there is no batch dimension to remove."""

__all__ = ["_maybe_remove_batch_dim"]


def _maybe_remove_batch_dim(name, batched_output, vmap_level, batch_size, out_dim):
    raise NotImplementedError("torch._functorch.vmap._maybe_remove_batch_dim: gpumemnet's vmap makes no batched "
                              "tensors")
