"""torch.ao: PyTorch's model-optimisation toolkit (quantization). gpumemnet trains in floating point; see
torch.ao.quantization here for what exists and why."""
