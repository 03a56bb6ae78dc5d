"""torch.distributed._composable (names only: fsdp/)."""
