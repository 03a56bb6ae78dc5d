"""torch.distributed.constants: the default timeout of a process group (Lightning imports it from here)."""
from .process_group import default_pg_timeout  # noqa: F401

__all__ = ["default_pg_timeout"]
