"""torch.xpu: Intel GPUs, which gpumemnet does not drive. Device-selection code asks it (`elif
torch.xpu.is_available()`) beside torch.cuda and torch.backends.mps: none here, as PyTorch says on a machine without
one; seeding and emptying the cache do nothing, as there."""
__all__ = ["is_available", "device_count", "is_initialized", "empty_cache", "manual_seed", "manual_seed_all"]


def is_available():
    return False


def device_count():
    return 0


def is_initialized():
    return False


def empty_cache():
    pass


def manual_seed(seed):
    pass


manual_seed_all = manual_seed
