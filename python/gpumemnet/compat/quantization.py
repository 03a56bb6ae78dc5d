"""torch.quantization: the old name of torch.ao.quantization (catalyst imports it); see there."""
from .ao.quantization import *  # noqa: F401,F403
