"""torch.utils.tensorboard: SummaryWriter (writer.py) and the Summary protos it writes (summary.py)."""
from .writer import FileWriter, SummaryWriter  # noqa: F401

__all__ = ["SummaryWriter"]
