"""autograd.Function subclasses written by users, with PyTorch's semantics for them (torch/autograd/function.py).

gpumemnet's own ops are Function subclasses too, written to its internal conventions: forward on raw C ops,
mark_non_differentiable by output index, backward given only the gradients that arrived, a registered formula
under create_graph (graph_backward.py). A class defined outside the gpumemnet package gets, instead
(Function.__init_subclass__ calls adopt):
- forward runs under no_grad, with a real ctx even when nothing requires grad (ctx.k = k must work in eval);
- the setup_context style (forward without ctx, setup_context(ctx, inputs, output) beside it);
- an output that is an input returned unchanged comes back as an alias, so the caller's tensor keeps its own
  history; an input marked dirty (mark_dirty, written in place) becomes the node's output;
- mark_non_differentiable takes the output tensors, as PyTorch's does;
- backward gets a zero gradient for an output no gradient reached (set_materialize_grads(False): None);
- its saved inputs and outputs come back as the graph's tensors (a leaf itself; others linked to their node), and
  under create_graph its backward runs with grad mode on, so the gradients it computes from them are
  differentiable again (PyTorch's double backward of custom Functions);
- the node is named "<Class>Backward"."""
import functools

from .. import _C
from . import autograd as A
from .dtype import DTYPES
from .tensor_products import expands_to


def adopt(cls):
    """Called by Function.__init_subclass__ for a class defined outside the gpumemnet package."""
    cls.apply = classmethod(_apply)
    cls.apply_grads = _apply_grads
    cls.name = _name
    cls.save_for_backward = _save_for_backward
    cls.saved_tensors = property(_saved_tensors)
    cls.saved_variables = cls.saved_tensors  # PyTorch's deprecated name
    cls.mark_non_differentiable = _mark_non_differentiable
    cls.mark_dirty = _mark_dirty
    cls.set_materialize_grads = _set_materialize_grads


def _apply(cls, *args):
    Tensor = A._Tensor
    edges = [A._edge_of(a) if A._is_tensor(a) and a.requires_grad else None for a in args] \
        if A._grad_on() else [None] * len(args)
    node = cls.__new__(cls)
    node._edges = edges
    node.needs_input_grad = tuple(e is not None for e in edges)
    with A.no_grad():
        if cls.setup_context is not A.Function.setup_context:
            out = cls.forward(*args)
            cls.setup_context(node, args, out)
        else:
            out = cls.forward(node, *args)
    saved_objs = node.__dict__.pop("_saved_objs", ())
    if not any(node.needs_input_grad):
        node._saved = None  # nothing will run backward: what forward saved is not kept
        return out
    outs = list(out) if type(out) is tuple else [out]
    originals = list(outs)
    dirty = node.__dict__.pop("_dirty", ())
    non_diff = node.__dict__.pop("_non_diff_tensors", ())
    for i, o in enumerate(outs):
        if not A._is_tensor(o):
            continue
        if any(o is a for a in args):
            if any(o is d for d in dirty):
                if o.requires_grad and o.grad_fn is None:
                    raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
            else:  # returned unchanged: the caller's tensor keeps its history, the output is a new alias of it
                o = outs[i] = o._view(tuple(o.shape))
        if o._dtype <= 3 and not any(o is n for n in non_diff):  # float outputs carry gradients
            o.requires_grad = True
            o.grad_fn = node
            o._output_nr = i
            A._mark_output(o, args, node._saved, Tensor)
    node._out_meta = [(tuple(o.shape), o._dtype, o._device) if A._is_tensor(o) else None for o in outs]
    node._in_shapes = [tuple(a.shape) if e is not None else None for a, e in zip(args, edges)]
    node._in_dtypes = [a._dtype if e is not None else None for a, e in zip(args, edges)]
    roles = [_role(t, args, originals) for t in saved_objs]
    # a saved output that carries no gradient (integer, or marked non-differentiable) comes back as it is
    node._roles = [r if r is None or r[0] == "in" or getattr(outs[r[1]], "grad_fn", None) is node else None
                   for r in roles]
    return tuple(outs) if type(out) is tuple else outs[0]


def _role(t, args, outs):
    """What a saved tensor is to the node: ("in", i), ("out", nr) or None (made inside forward: a constant)."""
    for i, a in enumerate(args):
        if t is a:
            return ("in", i)
    for i, o in enumerate(outs):
        if t is o:
            return ("out", i)
    return None


def _save_for_backward(self, *tensors):
    A.Function.save_for_backward(self, *tensors)
    self.__dict__["_saved_objs"] = tensors  # which are inputs and outputs is sorted out once forward returned


def _saved_tensors(self):
    saved = A.Function._unpacked.fget(self)
    roles = self.__dict__.get("_roles")
    if not roles:
        return saved
    # PyTorch's unpacked inputs and outputs are the graph's tensors (a leaf: the leaf itself), create_graph or not:
    # torchdiffeq's adjoint differentiates through the saved parameters under enable_grad() inside backward
    from .graph_backward import linked  # noqa: E402  (graph_backward imports the ops, which import autograd)
    out = []
    for t, role in zip(saved, roles):
        if t is not None and role is not None:
            t = linked(t, self._edges[role[1]] if role[0] == "in" else (self, role[1]))
        out.append(t)
    return tuple(out)


def _mark_non_differentiable(self, *tensors):
    self.__dict__["_non_diff_tensors"] = tensors


def _mark_dirty(self, *tensors):
    self.__dict__["_dirty"] = tensors


def _set_materialize_grads(self, value):
    self.__dict__["_materialize"] = bool(value)


def _apply_grads(self, grads):
    if self._released and self._saved is not None:
        self.saved_tensors  # raises the explanatory error
    meta = self.__dict__.get("_out_meta", ())
    grads = list(grads) + [None] * (len(meta) - len(grads))
    if self.__dict__.get("_materialize", True):
        for i, m in enumerate(meta):
            if grads[i] is None and m is not None:
                grads[i] = _C.fill_(_C.empty(*m), 0.0)
    out = type(self).backward(self, *grads)  # under create_graph the engine keeps grad mode on
    out = out if isinstance(out, tuple) else (out,)
    shapes, dtypes = self.__dict__.get("_in_shapes", ()), self.__dict__.get("_in_dtypes", ())
    n = len(shapes)
    if len(out) > n and all(g is None for g in out[n:]):  # extra Nones are fine (PyTorch's rule)
        out = out[:n]
    if len(out) != n:
        raise RuntimeError(f"function {_name(self)} returned an incorrect number of gradients (expected {n}, got "
                           f"{len(out)})")
    out = tuple(_as_input(g, shape, dtype) for g, shape, dtype in zip(out, shapes, dtypes))
    if A.anomaly.enabled and A.anomaly.check_nan:
        A._check_nan(self, out)
    return out


def _as_input(g, shape, dtype):
    """The gradient as PyTorch's engine hands it on (validate_outputs): of the input's broadcast shape, summed down
    to the input's (gpytorch's RBFCovariance returns the lengthscale's gradient at the covariance's shape); of
    another floating dtype, cast to the input's (a float32 gradient for a bfloat16 input: custom_fwd(cast_inputs=
    torch.float32) under autocast). Any other mismatch is left to the engine's error."""
    if shape is None or type(g) is not A._Tensor:
        return g
    if tuple(g.shape) != shape and expands_to(shape, tuple(g.shape)):
        g = g.sum_to_size(shape)
    if g._dtype != dtype and g._dtype <= 3 and dtype <= 3:  # float32, float64, float16, bfloat16
        g = g.to(DTYPES[dtype])
    return g


def _name(self):
    return type(self).__name__ + "Backward"


def once_differentiable(fn):
    """PyTorch's decorator for a backward that is not itself differentiable: it runs under no_grad, so the
    gradients it returns have no graph even under create_graph (differentiating them again finds nothing that
    requires grad)."""
    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with A.no_grad():
            return fn(ctx, *args)
    return wrapper


A._ADOPT.append(adopt)
