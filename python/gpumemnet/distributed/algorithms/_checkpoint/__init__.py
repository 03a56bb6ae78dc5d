"""torch.distributed.algorithms._checkpoint: activation checkpointing by wrapping modules (checkpoint_wrapper.py)."""
