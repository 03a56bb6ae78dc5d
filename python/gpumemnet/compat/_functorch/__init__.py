"""torch._functorch: the internals of PyTorch's functorch transforms. gpumemnet's vmap loops over the batch and
makes no batched tensors (torch.func has the transforms); vmap.py has the helpers libraries import."""
