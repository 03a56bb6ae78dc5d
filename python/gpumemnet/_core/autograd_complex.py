"""Complex tensors in autograd.grad (complex.py's ComplexTensor is a layer above autograd.py and not a Tensor: it
holds its real view (..., 2) as `_r`, which is what the graph records)."""
from .. import _C


def complex_of(t):
    """The class of a complex tensor (complex.py, a layer above: not a Tensor, it holds its real view (..., 2) as
    `_r`), else None."""
    real = isinstance(t, _C.TensorBase) or not isinstance(getattr(t, "_r", None), _C.TensorBase)
    return None if t is None or real else type(t)


def real_views(outputs, grad_outputs, inputs):
    """grad()'s complex tensors as their real views, the graph they are recorded in (PyTorch's convention holds
    there: a complex leaf's gradient is dL/dRe + i dL/dIm); with, per input, the class to wrap its gradient in."""
    if len(grad_outputs) == len(outputs):
        for t, g in zip(outputs, grad_outputs):
            if g is None and complex_of(t):
                raise RuntimeError("grad can be implicitly created only for real scalar outputs")
    real = [t._r if complex_of(t) else t for t in outputs]
    gouts = [g._r if complex_of(g) else g for g in grad_outputs]
    return real, gouts, [t._r if complex_of(t) else t for t in inputs], [complex_of(t) for t in inputs]
