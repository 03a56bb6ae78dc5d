"""torch._dynamo.eval_frame: the class of torch.compile's result (accelerate's is_compiled_module tests for it)."""
from ...nn.modules.compiled import OptimizedModule  # noqa: F401
