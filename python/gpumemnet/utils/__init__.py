"""gpumemnet.utils (layer 2, a library over _core): data loading (gpumemnet.utils.data: Dataset, TensorDataset,
DataLoader) and activation checkpointing (gpumemnet.utils.checkpoint: callable itself, like the DESIGN's
`gm.utils.checkpoint(fn, *args)`, and holding checkpoint / checkpoint_sequential as in torch.utils.checkpoint)."""
from . import data  # noqa: F401
from . import checkpoint  # noqa: F401
from . import model_zoo  # noqa: F401
from . import hooks  # noqa: F401
from . import deterministic  # noqa: F401  (torch.utils.deterministic.fill_uninitialized_memory)
from . import tensorboard  # noqa: F401  (imports the tensorboard package only when a SummaryWriter is made)
from .checkpoint import checkpoint_sequential  # noqa: F401
