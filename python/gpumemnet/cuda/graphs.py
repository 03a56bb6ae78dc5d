"""torch.cuda's CUDA graphs (CUDAGraph, graph, graph_pool_handle, make_graphed_callables): gpumemnet launches its
kernels one by one and does not capture graphs. The names exist (Hugging Face's generation code names them in
annotations); capturing raises."""

__all__ = ["CUDAGraph", "graph", "graph_pool_handle", "make_graphed_callables", "is_current_stream_capturing"]

_WHY = "CUDA graphs are not supported by gpumemnet (its kernels launch one by one); run the step without capture"


class CUDAGraph:
    def __init__(self, *args, **kwargs):
        raise RuntimeError(f"torch.cuda.CUDAGraph: {_WHY}")


class graph:  # noqa: N801 (PyTorch's name)
    def __init__(self, cuda_graph, pool=None, stream=None, capture_error_mode="global"):
        raise RuntimeError(f"torch.cuda.graph: {_WHY}")


def graph_pool_handle():
    raise RuntimeError(f"torch.cuda.graph_pool_handle: {_WHY}")


def make_graphed_callables(callables, sample_args, *args, **kwargs):
    raise RuntimeError(f"torch.cuda.make_graphed_callables: {_WHY}")


def is_current_stream_capturing():
    return False
