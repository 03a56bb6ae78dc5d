"""torch.distributed.nn: the collectives as differentiable functions (functional.py). Code that averages a
statistic across ranks inside forward (vector-quantize-pytorch's codebook updates, contrastive losses gathering
every rank's embeddings) imports it even when it runs on one process."""
from . import functional  # noqa: F401
from .functional import all_gather, all_reduce, broadcast  # noqa: F401
from ..collectives import ReduceOp  # noqa: F401
