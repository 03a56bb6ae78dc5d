"""torch.jit.annotations: TorchScript's type names that model code imports for its signatures (torchvision's
roi_align takes a `BroadcastingList2[int]`). Eagerly they are plain typing aliases."""
import typing
from typing import Any, Dict, List, Optional, Tuple  # noqa: F401 - re-exported, as PyTorch's module does

BroadcastingList1 = BroadcastingList2 = BroadcastingList3 = typing.List
