"""gpumemnet.distributed.algorithms: PyTorch's torch.distributed.algorithms (DDP communication hooks)."""
