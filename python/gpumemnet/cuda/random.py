"""torch.cuda.random: the CUDA generator's functions under the module name PyTorch code reaches them by
(torchattacks' APGD / FAB / Square call torch.cuda.random.manual_seed). The same functions as gm.cuda's."""
from ._device import (get_rng_state, get_rng_state_all, initial_seed, manual_seed, manual_seed_all,  # noqa: F401
                      seed, seed_all, set_rng_state, set_rng_state_all)

__all__ = ["get_rng_state", "get_rng_state_all", "set_rng_state", "set_rng_state_all", "manual_seed",
           "manual_seed_all", "seed", "seed_all", "initial_seed"]
