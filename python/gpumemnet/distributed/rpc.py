"""torch.distributed.rpc: PyTorch's remote procedure calls between processes. gpumemnet has no RPC framework, so
is_available() is False (as in a PyTorch build without it: libraries such as PyTorch Geometric import the module
and check that), the classes are names for isinstance checks and annotations, and starting RPC raises."""

__all__ = ["is_available", "init_rpc", "shutdown", "rpc_sync", "rpc_async", "remote", "get_worker_info", "RRef",
           "WorkerInfo", "BackendType", "RpcBackendOptions", "TensorPipeRpcBackendOptions"]

_WHY = "gpumemnet has no RPC framework (torch.distributed.rpc.is_available() is False)"


def is_available():
    return False


def _unavailable(name):
    def refuse(*args, **kwargs):
        raise RuntimeError(f"torch.distributed.rpc.{name}: {_WHY}")
    refuse.__name__ = refuse.__qualname__ = name
    refuse.__doc__ = f"PyTorch's rpc.{name}; raises: {_WHY}."
    return refuse


init_rpc = _unavailable("init_rpc")
shutdown = _unavailable("shutdown")
rpc_sync = _unavailable("rpc_sync")
rpc_async = _unavailable("rpc_async")
remote = _unavailable("remote")
get_worker_info = _unavailable("get_worker_info")


class _Unavailable:
    def __init__(self, *args, **kwargs):
        raise RuntimeError(f"torch.distributed.rpc.{type(self).__name__}: {_WHY}")


class RRef(_Unavailable):
    """A reference to a remote value (a name only)."""


class WorkerInfo(_Unavailable):
    """A worker's name and id (a name only)."""


class RpcBackendOptions(_Unavailable):
    """An RPC agent's options (a name only)."""


class TensorPipeRpcBackendOptions(RpcBackendOptions):
    """The TensorPipe agent's options (a name only)."""


class BackendType:
    TENSORPIPE = "TENSORPIPE"
