"""torch._inductor: PyTorch's compiler backend. gpumemnet never compiles; its settings module exists so that
training scripts that tune the compiler at their top (gpt-fast, modded-nanogpt) run unchanged."""
from . import config  # noqa: F401
