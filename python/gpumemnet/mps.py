"""torch.mps: Apple GPUs (Metal), which gpumemnet does not drive. Device-selection and logging code asks it beside
torch.cuda: none here, as PyTorch says on a machine without one; seeding and emptying the cache do nothing and the
memory counters read 0, as there."""
__all__ = ["is_available", "device_count", "empty_cache", "manual_seed", "current_allocated_memory",
           "driver_allocated_memory"]


def is_available():
    return False


def device_count():
    return 0


def empty_cache():
    pass


def manual_seed(seed):
    pass


def current_allocated_memory():
    return 0


driver_allocated_memory = current_allocated_memory
