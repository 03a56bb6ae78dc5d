"""torch.utils.tensorboard: SummaryWriter (writer.py) and the Summary protos it writes (summary.py)."""
from .writer import FileWriter, SummaryWriter

__all__ = ["SummaryWriter", "FileWriter"]
