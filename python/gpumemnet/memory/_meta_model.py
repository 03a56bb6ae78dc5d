"""What estimate() (estimator.py) runs its step on: the meta copy of the model (no data read or copied), the
recorder of its layer rows, meta inputs and targets of the given shapes, and the loss called on them. Apart from
estimator.py so that each file stays readable (and under the project's 800 lines); estimator.py imports it, never
the other way."""
import contextlib
import copy
import dataclasses
import gc
import types
import warnings

from .. import _C
from .._core.autograd import AccumulateGrad, no_grad
from .._core.complex import ComplexTensor
from .._core.dtype import as_dtype
from .._core.scope import category
from ..nn.modules._hooks import drop_user_hooks, user_hooks
from ..nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
from ..nn.parameter import Parameter
from . import stats as _memory

META = "meta"


@contextlib.contextmanager
def warning_filter(action, category=Warning):
    """warnings of `category` get `action` ("ignore", "error") while the block runs: the estimate's replays of the
    script's code are not the script's, and what they warn is not said. The filter goes in front of
    warnings.filters in place, not through catch_warnings: that resets Python's record of the warnings already
    shown (its filters version), and the script's own warnings, shown once by default, were shown again after
    every estimate (a deprecation warning of the forward on every watched step)."""
    entry = (action, None, category, None, 0)
    filters = warnings.filters
    filters.insert(0, entry)
    try:
        yield
    finally:
        for i, f in enumerate(filters):
            if f is entry:
                del filters[i]
                break


class LayerRow:
    """One call of a leaf module in the training forward: torchsummary's row plus the bytes it kept for backward
    (the growth of the 'activation' category while it ran: what its backward will read)."""
    __slots__ = ("path", "type", "output_shape", "params", "kept")

    def __init__(self, path, type_, output_shape, params, kept):
        self.path, self.type, self.output_shape, self.params, self.kept = path, type_, output_shape, params, kept

    def __repr__(self):
        return (f"LayerRow({self.path!r}, {self.type}, {self.output_shape}, params={self.params}, "
                f"kept={self.kept})")



HOOKS_NOTE = ("the model's {n} hook(s) (forward hooks of its modules, gradient hooks of its parameters) do not run "
              "in the estimate, which runs a copy: what they allocate (a new output, a clamped gradient) is not "
              "counted")


def hooks_left_out(model):
    """The script's hooks on model's modules and parameters, which its meta copy runs without."""
    return sum(user_hooks(m) for m in model.modules()) + \
        sum(1 for p in model.parameters() for h in (p._hooks or ()) if not getattr(h, "retains_grad", False))


def _meta_copy(model, device=None, param_dtype=None):
    """A deep copy of model whose parameters and buffers are empty meta tensors (no data is read or copied);
    with param_dtype, floating parameters and buffers in that dtype (model.to(param_dtype)).
    device: the device the estimate stands for; when the model lives there, the copy starts from its layout."""
    memo, tensors = {}, {}
    for m in model.modules():
        for name, t in list(m._parameters.items()) + list(m._buffers.items()):
            if t is not None:
                tensors.setdefault(id(t), (name, t))
    # In the order the model's tensors were allocated (which is not the order of model.modules(): torchvision's
    # ResNet makes a block's downsample before the block), so that the meta allocator packs them into segments
    # as the device's allocator did, and the step's blocks find the same free space.
    ordered = sorted(tensors.values(), key=lambda nt: nt[1]._alloc_serial)
    # That order alone does not give the device's free space: a builder's temporaries leave holes between the
    # parameters, in segments that stay in use, and a request of the step may find a hole on the device where meta
    # has none (or another one). So when the model lives on the device the estimate stands for, meta starts from
    # that device's segments: each tensor's twin at its block's offset, the holes free (allocator.c, "mirroring").
    # A model on another device (an estimate for a CUDA card of a model on the CPU) has no layout there to copy.
    mirror = param_dtype is None and device is not None and device != META and \
        all(t._device == device for _, t in ordered) and \
        _C._meta_mirror([t for _, t in ordered]) > 0
    try:
        with category("parameter"):
            for i, (name, t) in enumerate(ordered):
                if mirror:
                    _C._meta_claim(i)
                dt = param_dtype if param_dtype is not None and t.dtype.is_floating_point else t._dtype
                if isinstance(t, Parameter):
                    q = Parameter(_C.empty(tuple(t.shape), dt, META), requires_grad=t.requires_grad)
                    q._name = getattr(t, "_name", None) or name
                else:
                    q = _C.empty(tuple(t.shape), dt, META)
                memo[id(t)] = q
    finally:
        if mirror:
            _C._meta_mirror_end()
    _meta_attributes(model, memo)
    clone = _deepcopy_rebound(model, memo)
    for m in clone.modules():  # the script's hooks run on its model, not on this copy
        drop_user_hooks(m)
    orig = [(n, tuple(p.shape)) for n, p in model.named_parameters()]
    mine = [(n, tuple(p.shape)) for n, p in clone.named_parameters()]
    if orig != mine or any(p._device != META for p in clone.parameters()):
        raise RuntimeError("estimate: the meta copy of the model does not have the model's parameters (a parameter "
                           "held outside a Module's registered parameters cannot be copied without its data)")
    return clone


def _meta_attributes(model, memo):
    """Meta twins, in memo, of the tensors modules hold as plain attributes: the old weight_norm / spectral_norm's
    computed weight, SincNet's filters, LLaMA's freqs_cis (deepcopy cannot copy a tensor in a graph, and the copy
    must hold no data). A complex tensor's pairs likewise, and the tensors in plain lists, tuples and dicts of
    attributes (a policy's saved_log_probs, graph tensors kept until the episode ends)."""
    for m in model.modules():
        for v in vars(m).values():
            _meta_twins(v, memo, 3)


def _meta_twins(v, memo, depth):
    """_meta_attributes for one value: a tensor, or a plain container of them (depth levels at most)."""
    t = v._r if isinstance(v, ComplexTensor) else v
    if isinstance(t, _C.TensorBase):
        if id(t) not in memo:
            memo[id(t)] = _C.empty(tuple(t.shape), t._dtype, META)
    elif depth and type(v) in (list, tuple, dict):  # a module's own dicts (_parameters...) are subclasses
        for w in (v.values() if type(v) is dict else v):
            _meta_twins(w, memo, depth - 1)


def _deepcopy_rebound(obj, memo):
    """copy.deepcopy(obj, memo), with the functions the copy's modules hold as attributes (directly, or in a list,
    tuple or dict) remade over the copies of what they close over. deepcopy copies a function as itself, so
    `self.to_logits = lambda t: t @ self.emb.weight.t()` (x-transformers' tied output layer) would still reach
    the original module, whose weight is not on meta. A bound method needs nothing: deepcopy binds it to the
    copy of its object."""
    clone = copy.deepcopy(obj, memo)
    made = {}
    for m in clone.modules():
        d = vars(m)
        for k, v in list(d.items()):
            w = _rebound_in(v, memo, made)
            if w is not v:
                d[k] = w
    return clone


def _rebound_in(v, memo, made):
    """v with its functions _rebound: a list or dict changed in place, a new tuple; v itself when none changed.
    Plain containers only: a module's own lists (hook lists) and dicts (_parameters) are subclasses, left alone."""
    if type(v) in (list, tuple):
        w = [_rebound(f, memo, made) for f in v]
        if all(a is b for a, b in zip(v, w)):
            return v
        if type(v) is tuple:
            return tuple(w)
        v[:] = w
        return v
    if type(v) is dict:
        v.update({k: g for k, g in ((k, _rebound(f, memo, made)) for k, f in v.items()) if g is not v[k]})
        return v
    return _rebound(v, memo, made)


def _rebound(f, memo, made):
    """Function f over the copies (memo: id of an original -> its copy) of the objects its closure holds, or f
    itself when it holds none (and anything that is not a function). made: the functions remade already (a
    function's own name in its closure, a recursive helper, stays the original's)."""
    if not isinstance(f, types.FunctionType) or not f.__closure__:
        return f
    if id(f) in made:
        return made[id(f)]
    made[id(f)] = f
    cells, changed = [], False
    for c in f.__closure__:
        try:
            v = c.cell_contents
        except ValueError:  # a cell not filled yet
            cells.append(c)
            continue
        w = _rebound(v, memo, made) if isinstance(v, types.FunctionType) else memo.get(id(v), v)
        changed = changed or w is not v
        cells.append(types.CellType(w))
    if not changed:
        return f
    g = types.FunctionType(f.__code__, f.__globals__, f.__name__, f.__defaults__, tuple(cells))
    g.__kwdefaults__, g.__qualname__, g.__doc__ = f.__kwdefaults__, f.__qualname__, f.__doc__
    g.__dict__.update(f.__dict__)
    made[id(f)] = g
    return g


def sequence_now():
    """The sequence number the next graph node gets: nodes numbered below it were made before (the script's)."""
    return _C.Node()._sequence_nr()


def cut_outside(loss, first_seq):
    """Cuts the edges of the replay's graph (from loss) into what is not the replay's: the accumulators of leaves
    that are not meta (a forward that reads a parameter from outside the model, as pyro's global param store, has
    it in the replay's graph too) and nodes made before the replay (numbered below first_seq: a tensor of the
    script's graph read from outside). Without the cut, the replay's backward adds its gradients into the real
    .grad, runs the real leaves' hooks and frees the script's saved tensors. Only the replay's own nodes are
    changed. Returns the ids of the real leaves and old nodes cut off."""
    cut, seen, stack = set(), set(), [loss.grad_fn] if loss.grad_fn is not None else []
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        edges = node._edges or ()
        kept = []
        for e in edges:
            target = e[0] if e is not None else None
            if target is not None and (target.variable._device != META if isinstance(target, AccumulateGrad)
                                       else target._sequence_nr() < first_seq):
                cut.add(id(target.variable) if isinstance(target, AccumulateGrad) else id(target))
                e = None
            elif target is not None:
                stack.append(target)
            kept.append(e)
        if any(a is not b for a, b in zip(edges, kept)):
            node._edges = type(edges)(kept) if isinstance(edges, (tuple, list)) else tuple(kept)
    return cut


def _cat(name):
    return _memory.memory_stats(META)["by_category"][name]["current"]


class _LayerRecorder:
    """Global forward hooks that record each leaf module of `root` as it runs, while `on`."""

    def __init__(self, root):
        self.paths = {id(m): (p, m) for p, m in root.named_modules() if not m._modules and m is not root}
        self.rows, self.starts, self.on = [], [], False
        self.handles = [register_module_forward_pre_hook(self.pre), register_module_forward_hook(self.post)]

    def pre(self, mod, args):
        if self.on and id(mod) in self.paths:
            self.starts.append(_cat("activation"))

    def post(self, mod, args, out):
        if not (self.on and id(mod) in self.paths):
            return
        kept = _cat("activation") - self.starts.pop()
        shape = tuple(out.shape) if isinstance(out, _C.TensorBase) else \
            [tuple(o.shape) for o in out if isinstance(o, _C.TensorBase)]
        n = sum(p.numel() for p in mod.parameters())
        self.rows.append(LayerRow(self.paths[id(mod)][0], type(mod).__name__, shape, n, kept))

    def remove(self):
        for h in self.handles:
            h.remove()
        # the handles hold our bound methods: a cycle that would keep the model copy (self.paths) until the
        # cycle collector runs
        self.handles, self.paths = [], {}


def _check_scalar_loss(loss, who):
    if not isinstance(loss, _C.TensorBase) or loss.numel() != 1:
        got = tuple(loss.shape) if isinstance(loss, _C.TensorBase) else type(loss).__name__
        raise ValueError(f"{who}: the loss must be a scalar tensor, got {got}")


# ---- inputs and loss -----------------------------------------------------------------------------------------
def layout_of(t):
    """None for a contiguous tensor, else (stride, offset, its storage's elements): a loss copies a non-contiguous
    argument (x[:, 1:] as the target) where it takes a contiguous one as it is, so a replay's is laid out alike."""
    if t.is_contiguous():
        return None
    return tuple(t.stride()), t.storage_offset(), t._storage_nbytes // t.element_size()


def meta_laid_out(shape, dtype, layout):
    """A meta tensor of shape and dtype with layout_of's layout (None: contiguous)."""
    if layout is None:
        return _C.empty(shape, dtype, META)
    stride, offset, n = layout
    return _C.empty((n,), dtype, META).as_strided(shape, stride, offset)


def _meta_like(spec, batch, what, dtype=None):
    """A meta tensor for target: a Tensor (its shape and dtype; the first dim becomes the micro-batch) or a shape
    (dtype, default float32: under param_dtype a target given as a shape follows the model, as its inputs do).
    batch None: the target as it is, a non-contiguous one laid out alike (python -m gpumemnet run's replay of the
    script's x[:, 1:]: the loss copies it as the script's does)."""
    if isinstance(spec, _C.TensorBase):
        if batch is None:
            return meta_laid_out(tuple(spec.shape), spec._dtype, layout_of(spec))
        shape, dtype = tuple(spec.shape), spec._dtype
    elif isinstance(spec, (tuple, list)):
        shape, dtype = tuple(spec), dtype if dtype is not None else as_dtype("float32").code
    else:
        raise TypeError(f"estimate: {what} must be a Tensor or a shape, got {type(spec).__name__}")
    if batch is not None and shape:
        shape = (batch,) + shape[1:]
    return _C.empty(shape, dtype, META)


def _check_shape(shape, what):
    if isinstance(shape, int):
        shape = (shape,)
    try:
        shape = tuple(shape)
    except TypeError:
        raise TypeError(f"estimate: {what} must be a tuple of ints, got {type(shape).__name__}") from None
    if not all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in shape):
        raise ValueError(f"estimate: {what} must be positive ints, got {shape}")
    return shape


def _input_specs(input_shape, batch_size, dtype):
    """[(shape, dtype code)] of the model's inputs: input_shape is one sample's shape (with batch_size) or the
    whole batch's; or a Tensor (its shape and dtype), or a tuple/list of Tensors for a model of several inputs
    (python -m gpumemnet run passes the script's own inputs so)."""
    if isinstance(input_shape, _C.TensorBase) or (isinstance(input_shape, (tuple, list)) and input_shape
                                                   and all(isinstance(t, _C.TensorBase) for t in input_shape)):
        tensors = [input_shape] if isinstance(input_shape, _C.TensorBase) else list(input_shape)
        specs = []
        for t in tensors:
            shape = tuple(t.shape)
            if not shape:
                raise ValueError("estimate: an input tensor must have a batch dimension, got a 0-d tensor")
            specs.append(((batch_size,) + shape[1:] if batch_size is not None else shape, t._dtype))
        return specs
    shape = _check_shape(input_shape, "input_shape")
    return [((batch_size,) + shape if batch_size is not None else shape, dtype)]



def _shape_text(input_shape):
    if isinstance(input_shape, _C.TensorBase):
        return str(tuple(input_shape.shape))
    if isinstance(input_shape, (tuple, list)) and any(isinstance(t, _C.TensorBase) for t in input_shape):
        return str([tuple(t.shape) for t in input_shape])
    return str(tuple(input_shape))


def _levels():
    """Bytes allocated on meta and meta-host now: what they return to once the estimate's own objects are gone."""
    return _memory.memory_allocated(META), _memory.memory_allocated(_memory.META_HOST)


def _release(levels):
    """Runs the cycle collector only when the estimate's objects did not all go with their last reference (meta
    or meta-host holds more than `levels`). A full gc.collect() costs ~10 ms in a process that imported
    torchvision, and the unconditional ones were 90 % of a small model's estimate (plan() runs dozens)."""
    if _levels()[0] > levels[0] or _levels()[1] > levels[1]:
        gc.collect()


class _nullctx:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _Attr(str):
    """A step of a path into an output that is a dataclass's field (read with getattr), not a key."""


def tensors_in(obj, path=()):
    """[(path, tensor)] of the tensors in a model's output: a tensor, or tuples, lists, dicts (and namedtuples
    such as torchvision's InceptionOutputs, and Hugging Face's ModelOutput, a dict) and dataclasses of them (a
    field's name is an _Attr in the path)."""
    if isinstance(obj, _C.TensorBase):
        return [(path, obj)]
    if isinstance(obj, (tuple, list)):
        return [r for i, o in enumerate(obj) for r in tensors_in(o, path + (i,))]
    if isinstance(obj, dict):
        return [r for k, o in obj.items() for r in tensors_in(o, path + (k,))]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [r for f in dataclasses.fields(obj) for r in tensors_in(getattr(obj, f.name), path + (_Attr(f.name),))]
    return []


def reads_values(e):
    """Whether error e says that code read a meta tensor's values (.item(), bool(), .tolist(), nonzero()): meta
    tensors have shapes only, so a forward or loss that branches on values cannot be replayed on them."""
    text = str(e)
    return "has no data" in text or "have no data" in text or "tensor's values" in text


def reads_outside(e):
    """Whether error e says that meta tensors met real ones: the forward read a tensor the meta copy does not hold
    (a global store's, a closure's), which stays on its device."""
    text = str(e)
    return "same device" in text and "meta" in text


def _call_loss(loss_fn, out, y):
    try:
        return loss_fn(out, y)
    except _C.OutOfMemoryError:
        raise
    except (ValueError, RuntimeError, TypeError, IndexError) as e:
        if reads_values(e):
            raise ValueError(f"estimate: the loss reads tensor values (.item(), bool()), which a replay on meta "
                             f"cannot: {e}") from e
        got = "None" if y is None else f"{tuple(y.shape)} ({y.dtype})"
        what = f"shape {tuple(out.shape)}" if isinstance(out, _C.TensorBase) else f"type {type(out).__name__}"
        raise ValueError(f"estimate: loss_fn(output, target) failed for an output of {what} and a target of {got}: "
                         f"{e}") from e


def _made_up_target(clone, xs, loss_fn, amp_ctx, forward=lambda model, xs: model(*xs)):
    """A meta target loss_fn accepts, for a loss_fn given without one. The output's shape comes from a forward of
    the micro-batch xs (forward(clone, xs): estimator._estimate's passes the keyword inputs too) under no_grad in
    eval mode (on meta: shapes and allocations only, no dropout, no RNG); all it allocated is freed and its cache
    released before the target is made, so the step starts from the allocator state it would have had without
    it."""
    was = clone.training
    levels = _levels()
    clone.eval()
    try:
        with no_grad(), amp_ctx():
            out = forward(clone, xs)
        if not isinstance(out, _C.TensorBase):
            raise ValueError(f"estimate: loss_fn needs a target and the model's output is a "
                             f"{type(out).__name__}, not a Tensor: pass target= (a Tensor or a shape)")
        shape, dtype = tuple(out.shape), out._dtype
        tries = [(None, None, "no target")]  # a loss that ignores its target gets none, as in the real step
        if len(shape) >= 2:  # class indices: (N, C, d1...) -> (N, d1...)
            tries.append((shape[:1] + shape[2:], as_dtype("int64").code, "class indices"))
        tries.append((shape, dtype, "a tensor of the output's shape"))
        errors = []
        found = False
        for tshape, tdtype, what in tries:
            y = None if tshape is None else _C.empty(tshape, tdtype, META)
            try:
                # a warning refuses the target too: mse_loss broadcasts class indices (N,) against (N, C) with
                # PyTorch's "different to the input size" warning, where the target is the output's shape
                with no_grad(), amp_ctx(), warning_filter("error", UserWarning):
                    loss_fn(out, y)
                found = True
                break
            except _C.OutOfMemoryError:
                raise
            except (ValueError, RuntimeError, TypeError, IndexError, AttributeError, UserWarning) as e:
                errors.append(f"{what}{'' if tshape is None else ' ' + str(tshape)}: {e}")
        del out, y
        if not found:
            raise ValueError("estimate: loss_fn needs a target: pass target= (a Tensor, or a shape whose first dim "
                             "is the batch); made-up targets were refused: " + "; ".join(errors))
    finally:
        clone.train(was)
    _release(levels)
    _memory.empty_cache(META)
    if tshape is None:
        return None
    with category("input"):
        return _C.empty(tshape, tdtype, META)
