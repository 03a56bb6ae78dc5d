"""torch._dynamo.exc: the compiler's exceptions, which code catches around torch.compile (heavyball). Nothing is
compiled here, so none is raised."""

__all__ = ["TorchDynamoException", "InternalTorchDynamoError", "BackendCompilerFailed", "Unsupported"]


class TorchDynamoException(RuntimeError):
    pass


class InternalTorchDynamoError(TorchDynamoException):
    pass


class BackendCompilerFailed(TorchDynamoException):
    pass


class Unsupported(TorchDynamoException):
    pass
