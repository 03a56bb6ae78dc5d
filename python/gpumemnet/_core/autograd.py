"""Reverse-mode autograd: the Python face of the engine in C (csrc/autograd_node.c: nodes, saved tensors, edges;
csrc/autograd_engine.c: the backward walk); every byte it touches is allocated in C.

A differentiable op is a `Function` subclass with `forward(ctx, *args)` and `backward(ctx, *grads)`.
`Function.apply` records a node only when grad mode is on and an input requires grad. Nodes keep only what
their backward needs (through `ctx.save_for_backward`) and drop it the moment their backward has run, unless
`retain_graph=True`. Saved tensors pass through the saved-tensor hooks (pack/unpack): the one mechanism that
checkpointing and host offload build on. Saved intermediates are re-tagged `activation` in the allocator.

Layer 1 (core). Grad mode and the saved-tensor hooks are per thread (_core/state.py). The Tensor class is
registered by _core/tensor.py (which imports this module); an OOM in backward is explained through
_core/hooks.py by gpumemnet.memory.
"""
import functools
import inspect
import weakref

from .. import _C
from . import hooks, subclass_dispatch
from .autograd_complex import complex_of as _complex_of, real_views as _real_views
from .autograd_hooks import NODE_POST_HOOKS, NODE_PRE_HOOKS, register_node_hook
from .state import anomaly, grad_mode, inference_flag, state

_grad_on = grad_mode.get  # the per-op read: one C call (see _core/state.py)
_set_grad = grad_mode.set
_C._set_inference_var(inference_flag)  # C marks what it allocates in inference mode (Tensor.is_inference)

__all__ = ["Function", "backward", "grad", "no_grad", "enable_grad", "set_grad_enabled", "inference_mode",
           "is_grad_enabled", "is_inference_mode_enabled", "graph"]


def is_grad_enabled():
    return _grad_on()


class _GradModeContext:
    """Base of no_grad / enable_grad / set_grad_enabled: a context manager and a decorator that restores the
    previous mode on exit, even when the body raises."""
    _target = True

    def __enter__(self):
        self._prev = _grad_on()
        _set_grad(self._target)
        return self

    def __exit__(self, *exc):
        _set_grad(self._prev)
        return False

    def __call__(self, fn):
        # Each call saves and restores its own previous mode (so recursion and threads sharing one decorator
        # instance stay correct); the target is the instance's, e.g. inference_mode(False) keeps grad on.
        target = self._target
        if inspect.isgeneratorfunction(fn):
            return _generator_in(lambda: set_grad_enabled(target), fn)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            prev = _grad_on()
            _set_grad(target)
            try:
                return fn(*args, **kwargs)
            finally:
                _set_grad(prev)
        return wrapper


def _generator_in(mode, fn):
    """A generator function decorated with a grad mode: the mode holds while the generator's own code runs, from
    each resumption to its next yield, and the caller's mode holds in between (PyTorch's _wrap_generator); a plain
    wrapper would return the generator before any of its code ran."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        gen = fn(*args, **kwargs)
        try:
            with mode():
                response = gen.send(None)
            while True:
                try:
                    request = yield response
                except GeneratorExit:
                    with mode():
                        gen.close()
                    raise
                except BaseException as e:
                    with mode():
                        response = gen.throw(e)
                else:
                    with mode():
                        response = gen.send(request)
        except StopIteration as e:
            return e.value
    return wrapper


class _BareDecorator(_GradModeContext):
    """Also a decorator without parentheses (`@no_grad` as `@no_grad()`), as PyTorch's since 2.0."""

    def __new__(cls, orig_func=None):
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)


class no_grad(_BareDecorator):
    """Run without recording: no graph, no saved activations."""
    _target = False


class enable_grad(_BareDecorator):
    _target = True


class inference_mode(_GradModeContext):
    """no_grad that is_inference_mode_enabled() reports, and whose new tensors are inference tensors
    (Tensor.is_inference(): C marks their storage, so views of them are too). gpumemnet keeps no other
    inference-only state and refuses nothing PyTorch refuses inference tensors outside it. inference_mode(False)
    turns inference mode off and grad mode on, as PyTorch's does. Also a decorator, with or without
    parentheses."""

    def __new__(cls, mode=True):
        if mode is None or isinstance(mode, bool):
            return super().__new__(cls)
        return cls()(mode)  # @inference_mode over a function

    def __init__(self, mode=True):
        self.mode = bool(mode)

    def __enter__(self):
        self._prev = _grad_on(), inference_flag.get()
        _set_grad(not self.mode)
        inference_flag.set(self.mode)
        return self

    def __exit__(self, *exc):
        _set_grad(self._prev[0])
        inference_flag.set(self._prev[1])
        return False

    def __call__(self, fn):
        mode = self.mode
        if inspect.isgeneratorfunction(fn):
            return _generator_in(lambda: inference_mode(mode), fn)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with inference_mode(mode):
                return fn(*args, **kwargs)
        return wrapper


def is_inference_mode_enabled():
    return inference_flag.get()


class set_grad_enabled(_GradModeContext):
    """Set grad mode now; used as a context manager it restores the previous mode on exit."""

    def __init__(self, mode):
        self._prev = _grad_on()
        self._target = bool(mode)
        _set_grad(self._target)

    def __enter__(self):  # sets the mode again (an object entered twice, or in another thread), as PyTorch's
        _set_grad(self._target)
        return self

    def __call__(self, fn):
        # As a decorator it acts when the function runs, not when the decorator is made (PyTorch's behaviour).
        _set_grad(self._prev)
        return super().__call__(fn)


# ---- saved-tensor hooks --------------------------------------------------------------------------------
class graph:
    """Namespace mirroring torch.autograd.graph."""

    class saved_tensors_hooks:
        """Within this context, tensors saved for backward pass through pack_hook(tensor) -> obj, and come
        back through unpack_hook(obj) -> tensor when backward needs them."""

        def __init__(self, pack_hook, unpack_hook):
            self.pack_hook = pack_hook
            self.unpack_hook = unpack_hook

        def __enter__(self):
            if state.saved_hooks_refusal is not None:
                raise RuntimeError(state.saved_hooks_refusal)
            state.saved_tensors_hooks.append((self.pack_hook, self.unpack_hook))
            return self

        def __exit__(self, *exc):
            state.saved_tensors_hooks.pop()
            return False


def as_activation(t):
    """Tag a tensor an op keeps for its backward that autograd would not re-tag itself (indices, masks,
    statistics: made by the op, but with no grad_fn)."""
    if t._category == "other":
        t._category = "activation"
        _label_saved(t)
    return t


def _label_saved(t):
    """Name t's block after the module whose forward keeps it, for memory reports: "activation saved by
    features.3 (Conv2d)" (the root model: "activation saved by Net"). The label is made once per module."""
    stack = state.modules  # pushed by nn.Module.__call__
    if stack:
        m = stack[-1]
        label = m.__dict__.get("_saved_label")
        if label is None:
            path = m._path
            label = f"activation saved by {path} ({type(m).__name__})" if path else \
                f"activation saved by {type(m).__name__}"
            if path is not None:
                object.__setattr__(m, "_saved_label", label)
        _C.label_unnamed(t, label)


# What a node keeps of a tensor for backward (an alias, its version, or what the pack hook made of it): in C,
# csrc/autograd_node.c, which the operators' fast path saves through too. `_SavedTensor(t)`, `.get(op_name)`.
_SavedTensor = _C.SavedTensor


# ---- nodes ------------------------------------------------------------------------------------------------
class Node(_C.Node):
    """A recorded op. `_edges[i]` is (node, output_nr) feeding input i, or None. The fields (edges, saved tensors,
    hooks, the forward's scope) live in the C base (csrc/autograd_node.c)."""
    __slots__ = ()

    @property
    def next_functions(self):
        """PyTorch's form of the edges: a (node, output_nr) pair per input, (None, 0) for one that needs no gradient
        (torchviz-style graph walks unpack every entry)."""
        return tuple((None, 0) if e is None else e for e in (self._edges or ()))

    def name(self):
        """PyTorch's name for the node (tensor reprs and error messages show it): AddBackward0 for Add."""
        name = type(self).__name__
        return name if "Backward" in name else name.lstrip("_") + "Backward0"

    def __repr__(self):
        return f"<{self.name()}>"

    def register_prehook(self, fn):
        """fn(grad_outputs) -> None or new grad_outputs: before the node runs, after its tensors' hooks."""
        return register_node_hook(self, NODE_PRE_HOOKS, fn)

    def register_hook(self, fn):
        """fn(grad_inputs, grad_outputs) -> None or new grad_inputs: after the node ran."""
        return register_node_hook(self, NODE_POST_HOOKS, fn)

    @property
    def metadata(self):
        """A dict of the user's, kept on the node (PyTorch's Node.metadata)."""
        try:
            return self._metadata
        except AttributeError:
            self._metadata = {}
            return self._metadata


class AccumulateGrad(Node):
    """Sink for a leaf: adds the incoming gradient into `.grad` (this is what makes accumulation work).
    `variable` (the leaf) is a field of the C base. The accumulators of leaves are made in C (`_C._edge_of`,
    csrc/autograd_node.c), which sets what __init__ sets without calling it: keep the two in step."""
    __slots__ = ("_metadata",)

    def __init__(self, variable):
        self.variable = variable
        self._edges = ()
        self._pre_hooks = None
        self._saved = None
        self._released = False

    def apply_grads(self, grads):
        # PyTorch steals the incoming gradient for a .grad that is None when nothing else holds it (no copy, and
        # no second buffer while the copy is made: story 000's fc1 gradient, 2.17 GiB, was the device peak of
        # offloaded Adam held twice); asked before `g` takes a reference of its own
        var = self.variable
        if grads[0] is None or not var.requires_grad:  # (requires_grad_(False) / detach_() after the forward: a
            return ()  # GAN freezing D after D's forward, as PyTorch's AccumulateGrad leaves .grad alone)
        free = var.grad is None and _C._grads_free(grads)[0]
        g = grads[0]
        if free and g._dtype == var._dtype and g._device == var._device and g._is_contiguous() and tuple(g.shape) == tuple(var.shape) and \
                g._storage_nbytes == g.numel() * g.element_size():
            grads[0] = None
            g._category = "gradient"
            var.grad = g
            if var._name is not None:
                g._name = var._name + ".grad"
            return ()
        if g._device != var._device:  # a 0-d CPU leaf used with CUDA tensors: its gradient lives on the CPU
            g = g.to(var._device)
        if state.create_graph:  # .grad keeps the gradient's graph: added out of place, as PyTorch does
            var.grad = g if var.grad is None else var.grad + g
            return ()
        prev_cat = _C.set_category("gradient")
        try:
            if var.grad is None:
                # Own the memory: the incoming gradient may alias a tensor someone else holds.
                var.grad = g.detach().clone() if g.dtype == var.dtype else g.to(var.dtype)
                if var._name is not None:
                    var.grad._name = var._name + ".grad"
            else:
                _C.binary(0, var.grad, g, var.grad)  # a bfloat16 g (ToDtype.backward) is widened as it is added
        finally:
            _C.set_category(prev_cat)
        # the engine runs the leaf's post-accumulate hooks (var._post_acc_hooks) once it has dropped grads
        return ()


class _NoCtx:
    """The ctx of a forward that records nothing: saving is a no-op. apply gives each call one that takes attributes
    (custom ops' setup_context sets ctx.k); internal forwards that set none get the shared _NO_CTX."""
    needs_input_grad = ()

    def save_for_backward(self, *tensors):
        pass

    def mark_non_differentiable(self, *tensors):
        pass

    def set_materialize_grads(self, value):
        pass


_NO_CTX = _NoCtx()


class Function(Node):
    """Subclass with static `forward(ctx, *args)` and `backward(ctx, *grad_outputs)`; call `apply`.

    A subclass whose backward can write an input gradient over an incoming gradient of the same shape sets
    `reuses_grad = True` and asks `ctx.grad_is_free(i)` in backward."""
    __slots__ = ("__dict__",)
    reuses_grad = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if not cls.__module__.startswith("gpumemnet.") and _ADOPT:  # a user's Function: PyTorch's semantics
            _ADOPT[0](cls)

    @staticmethod
    def setup_context(ctx, inputs, output):
        """PyTorch's alternative to a ctx argument of forward (a user's Function overrides it)."""
        raise NotImplementedError("setup_context is not overridden")

    @classmethod
    def apply(cls, *args):
        Tensor = _Tensor
        edges = None
        if _grad_on():
            i = 0
            for a in args:
                if (type(a) is Tensor or _subclassed[0] and isinstance(a, Tensor)) and a.requires_grad:
                    if edges is None:
                        edges = [None] * len(args)
                    edges[i] = _edge_of(a)
                i += 1
        if edges is None:
            return cls.forward(_NoCtx(), *args)
        node = cls.__new__(cls)  # the C base keeps the scope the forward runs in: backward is named after it
        node._edges = edges
        node.needs_input_grad = [e is not None for e in edges]
        out = cls.forward(node, *args)
        non_diff = node.__dict__.get("_non_diff", ())
        i = 0
        for o in (out if type(out) is tuple else (out,)):
            # float outputs only: indices and masks never carry gradients
            if _is_tensor(o) and o._dtype <= 3 and i not in non_diff:
                o.requires_grad = True
                o.grad_fn = node
                o._output_nr = i
                _mark_output(o, args, node._saved, Tensor)
            i += 1
        return out

    def save_for_backward(self, *tensors):
        saved = self._saved = tuple(_SavedTensor(t) if isinstance(t, _C.TensorBase) else None for t in tensors)
        if None in saved:  # (every op passes here: the rare case is looked for only where it can be)
            # a sparse or complex tensor (pyGAT's sparse attention saves its adjacency): kept as it is, beside them
            objects = {i: t for i, t in enumerate(tensors) if t is not None and not isinstance(t, _C.TensorBase)}
            if objects:
                self.__dict__["_saved_objects"] = objects

    def mark_non_differentiable(self, *indices):
        self._non_diff = set(indices)

    @property
    def _unpacked(self):
        """The saved tensors, for the op's backward. Not named saved_tensors: PyTorch's built-in nodes have none
        (custom Functions' do: custom_function.adopt), and torchviz draws every entry of a node that has one."""
        if self._released:
            raise RuntimeError(
                f"trying to run backward through {self.name()} a second time, but its saved tensors were "
                f"already freed; pass retain_graph=True to the first backward() if you need to call it twice")
        if self._saved is None:
            return ()
        name = self.name()
        out = tuple(None if s is None else s.get(name) for s in self._saved)
        objects = self.__dict__.get("_saved_objects")
        return out if not objects else tuple(objects.get(i, t) for i, t in enumerate(out))

    def grad_is_free(self, i=0):
        """In backward: whether grad_outputs[i] was handed over by the engine (nothing else holds it), so the
        backward may overwrite it with its result instead of allocating. False unless the class sets reuses_grad."""
        free = self.__dict__.get("_free_grads")
        return bool(free and free[i])

    def release_saved(self, i):
        """In backward: drop saved tensor i now, before backward returns (when the engine would release it
        anyway: the graph is not retained), so that its memory is back before the rest of backward allocates.
        Returns whether it was dropped; the caller drops its own reference too."""
        saved = self._saved
        if state.retain_graph or saved is None or saved[i] is None:
            return False
        self._saved = saved[:i] + (None,) + saved[i + 1:]
        return True

    def apply_grads(self, grads):
        if self._released and self._saved is not None:
            self._unpacked  # raises the explanatory error
        if state.create_graph:
            self.__dict__["_free_grads"] = None  # a formula may call the raw backward: it must not write into g
            out = _graph_backward(self)(self, *grads)
        else:
            out = self.backward(self, *grads)
        out = out if isinstance(out, tuple) else (out,)
        if anomaly.enabled and anomaly.check_nan:
            _check_nan(self, out)
        return out

    def release(self):
        self._saved = None
        self._released = True


# custom_function.adopt, registered by that module (imported with the package, before any user code runs): it
# gives a Function subclass defined outside gpumemnet PyTorch's semantics for users' Functions
_ADOPT = []
_REBASE = []  # indexing.rebase_views, registered by that module (it sits above this one)

# class -> its backward written with recorded ops, run under create_graph (_core/graph_backward.py)
_GRAPH_BACKWARD = {}


def register_graph_backward(cls, formula):
    """formula(ctx, *grad_outputs) -> input gradients, like cls.backward but built from recorded ops, so that
    backward(create_graph=True) can differentiate the gradients it returns. Subclasses inherit it."""
    _GRAPH_BACKWARD[cls] = formula


def _graph_backward(node):
    for cls in type(node).__mro__:
        formula = _GRAPH_BACKWARD.get(cls)
        if formula is not None:
            return formula
    raise NotImplementedError(
        f"create_graph=True: {node.name()} has no backward formula that records a graph in gpumemnet, so "
        f"gradients of gradients cannot pass through it; compute this part with create_graph=False, or with "
        f"other ops (the ops that have one: gpumemnet/_core/graph_backward.py)")


def _check_nan(node, grads):
    """Anomaly detection: a gradient with a NaN stops the backward at the node that made it (PyTorch's check)."""
    for i, g in enumerate(grads):
        if isinstance(g, _C.TensorBase) and g._device != "meta" and g.is_floating_point() and bool(g.isnan().any()):
            name = node.name().lstrip("_").split("Backward")[0] + "Backward"  # (PyTorch's names: CatBackward0)
            raise RuntimeError(f"Function '{name}' returned nan values in its {i}th output.")


def _mark_output(o, args, saved, Tensor):
    """An output sharing an input's storage is a view (in-place writes to it are refused), unless it is that
    input itself, written in place (b[:, 0] = b[:, 0] * 2 writes b from a view of b: b stays what it was; its
    recorded views are re-derived: indexing.rebase_views); an output its own backward keeps is an activation."""
    sid = o._storage_id
    if not any(a is o for a in args):
        for a in args:
            if _is_tensor(a) and a._storage_id == sid:
                o._graph_view = True
                return
    elif o._root_has_views:
        _REBASE[0](o)
    if saved and o._category == "other":
        for st in saved:
            if st is not None and st.storage == sid:
                o._category = "activation"
                _label_saved(o)
                return


_Tensor = None  # gpumemnet.Tensor: set by _core/tensor.py when it is defined (that module imports this one)


def set_tensor_class(cls):
    global _Tensor
    _Tensor = cls
    subclass_dispatch.set_tensor_class(cls)
    # PyTorch's protocol on Tensor itself: the default __torch_function__, and subclasses that dispatch through it
    cls.__torch_function__ = classmethod(subclass_dispatch.default_torch_function)
    cls.__init_subclass__ = classmethod(_init_tensor_subclass)


def _init_tensor_subclass(cls, **kwargs):
    super(_Tensor, cls).__init_subclass__(**kwargs)
    _subclassed[0] = True  # from now on the autograd checks look past type(x) is Tensor (needs_grad)
    subclass_dispatch.install_methods(cls)


_subclassed = [False]  # whether a Tensor subclass was ever defined


def _is_tensor(x):
    """x is a gpumemnet tensor (a subclass instance too): the slow path of the `type(x) is Tensor` checks."""
    return type(x) is _Tensor or (_subclassed[0] and isinstance(x, _Tensor))


def needs_grad(*xs):
    """The fast path's one check: grad mode is on and some input is a tensor that requires grad."""
    if not _grad_on():
        return False
    for x in xs:
        if type(x) is _Tensor and x.requires_grad:
            return True
    if _subclassed[0]:  # an instance of a Tensor subclass (fastai's TensorImage) records as any tensor
        for x in xs:
            if isinstance(x, _Tensor) and x.requires_grad:
                return True
    return False


def is_graph_view(t):
    """Whether t is a view of a tensor in a graph under grad mode: the in-place writes check_inplace refuses."""
    return _grad_on() and t.requires_grad and t.grad_fn is not None and t._graph_view


def check_inplace(t, name):
    """In-place writes under grad mode: refused on leaves that require grad (PyTorch's rule) and on views of
    tensors that require grad (gpumemnet does not rebase the graph of the base tensor), unless the view is the only
    tensor left on its memory (timm's GhostNet: `x = cat(...)[:, :n]; x += shortcut`, the cat's result gone):
    nothing else can see the write, so it is recorded as on any tensor in a graph."""
    if _grad_on() and t.requires_grad:
        if t.grad_fn is None:
            raise RuntimeError(f"{name}: a leaf tensor that requires grad cannot be modified in place under grad "
                               f"mode; wrap the update in gpumemnet.no_grad() (as optimizers do)")
        if t._graph_view and t._storage_refs > 1:
            raise RuntimeError(f"{name}: this tensor is a view of another tensor that is part of a graph; an "
                               f"in-place write would not reach the other tensor's gradient. Use the "
                               f"out-of-place form")
        _keep_saved_output(t.grad_fn, t)
        if t._retains_grad:  # its .grad is the gradient of the new version: moved at the next backward
            _RETAIN_MOVED[id(t)] = weakref.ref(t)
        return True
    _keep_saved_output(t.grad_fn, t)  # (a write under no_grad: F.embedding's max_norm into a computed weight)
    return False


# Tensors that retain_grad() and were then written in place: PyTorch moves their retain hook to the new grad_fn
# (Grad-CAM's activations ahead of an in-place ReLU). The write's node exists only after check_inplace, so the hook
# is moved when backward starts (_run); the old node's hook gives way once the tensor has another grad_fn.
_RETAIN_MOVED = {}  # id -> weak reference (a WeakSet would compare tensors with ==)


def _move_retained():
    while _RETAIN_MOVED:
        t = _RETAIN_MOVED.popitem()[1]()
        if t is not None:
            t._register_retain()


def _keep_saved_output(node, t):
    """Before t is written in place (under no_grad too): if t's own node saved t (its backward reads its output, to
    save memory) where PyTorch's op saves its input (output_writable: leaky_relu, elu, pow, div...), that node keeps
    a copy, made only then: scripts write into such outputs (fastai's `x = F.leaky_relu(x, a); x -= sub`). Where
    PyTorch's op saves its result too (relu, exp), backward raises as PyTorch's does. For a view, the nodes along its
    first edges (the view ops, then the op that made its base: `F.elu(x).flatten(1)` then ReLU(inplace)) are asked
    too: a node that saved other memory keeps what it saved."""
    for _ in range(_VIEW_DEPTH):
        _keep_saved_of(node, t)
        edges = getattr(node, "_edges", None)
        if not t._graph_view or not edges or edges[0] is None:
            return
        node = edges[0][0]


_VIEW_DEPTH = 16  # view ops walked back from a view written in place (a chain longer is left as it is)


def _keep_saved_of(node, t):
    saved = getattr(node, "_saved", None)
    if not saved or not getattr(node, "output_writable", False):
        return
    sid, version = t._storage_id, t._version

    def written(s):
        return s is not None and s.unpack is None and s.storage == sid and s.version == version
    if any(written(s) for s in saved):
        node._saved = tuple(_SavedTensor(s.packed.detach().clone()) if written(s) else s for s in saved)


def refuse_inplace(t, name, why=""):
    """check_inplace for a write the graph cannot record: on a tensor in a graph it raises and names the out-of-place
    form (name without its trailing _)."""
    if check_inplace(t, name):
        raise RuntimeError(f"{name}: writing in place into a tensor that is part of a graph is not supported{why}; "
                           f"use {name.rstrip('_')}()")


# The edge to t's gradient: (grad_fn, output_nr), or (its AccumulateGrad, 0) for a leaf, which holds its
# accumulator weakly (the graph holds it strongly), as in PyTorch: a strong link both ways would be a cycle keeping
# every parameter alive until the GC runs. In C (csrc/autograd_node.c), shared with the operators' fast path.
_edge_of = _C._edge_of


# ---- the engine ---------------------------------------------------------------------------------------------
def _no_graph_error(t):
    return RuntimeError(
        f"backward: this tensor (shape {tuple(t.shape)}) does not require grad and has no grad_fn, so there is "
        f"nothing to differentiate. Usual causes: it was computed under no_grad()/inference_mode() (the forward "
        f"of a training step must run with grad enabled), or it is a fresh leaf made from a detached value "
        f"(e.g. Tensor(loss.detach(), requires_grad=True) re-wraps the loss: its gradient never reaches the "
        f"model's parameters). Compute the loss from the model's output with grad enabled.")


def _run(roots, grad_outputs, retain_graph, capture=None, create_graph=False):
    """Run backward from (tensor, grad) pairs (the walk is csrc/autograd_engine.c). With `capture` (a dict edge ->
    None) the gradients reaching those edges are returned instead of being accumulated into leaves. With
    create_graph the nodes' graph formulas run (Function.apply_grads), so that the gradients have a graph."""
    if _RETAIN_MOVED:
        _move_retained()
    prev = state.retain_graph, state.capturing, state.create_graph
    state.retain_graph, state.capturing, state.create_graph = bool(retain_graph), capture is not None, create_graph
    try:
        if not create_graph:
            return _C._run_backward([_edge_of(t) for t in roots], list(grad_outputs), retain_graph, capture)
        with enable_grad():  # the walk keeps grad mode on: the formulas and the sums of gradients are recorded
            return _C._run_backward([_edge_of(t) for t in roots], list(grad_outputs), retain_graph, capture, True)
    finally:
        state.retain_graph, state.capturing, state.create_graph = prev


def _filled_like(t, value):
    """A tensor of t's shape, dtype and device filled with value (creation.full_like, which sits above us)."""
    g = _C.empty(tuple(t.shape), t._dtype, t._device)
    _C.fill_(g, value)
    return g


def _default_grads(tensors, grad_tensors):
    Tensor = _Tensor
    grad_tensors = list(grad_tensors)
    if len(grad_tensors) != len(tensors):  # zip would silently drop the extra outputs
        raise ValueError(f"backward: got {len(tensors)} outputs but {len(grad_tensors)} gradients")
    out = []
    for t, g in zip(tensors, grad_tensors):
        if g is None:
            if t.numel() != 1:
                raise RuntimeError(
                    f"backward: grad can be implicitly created only for a single-element output, this one has "
                    f"shape {tuple(t.shape)}; pass gradient= with the same shape")
            g = _filled_like(t, 1)
        elif not isinstance(g, Tensor):
            g = _filled_like(t, float(g))
        elif tuple(g.shape) != tuple(t.shape):
            raise ValueError(f"backward: gradient has shape {tuple(g.shape)} but the output has shape "
                             f"{tuple(t.shape)}")
        out.append(g)
    return out


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, grad_variables=None, inputs=None):
    """Accumulate d(tensors)/d(leaf) into every leaf's .grad; with inputs=, into those tensors' .grad only (leaves
    or not), as PyTorch does. grad_variables is grad_tensors' old name."""
    Tensor = _Tensor
    if grad_variables is not None:
        if grad_tensors is not None:
            raise RuntimeError("backward: pass grad_tensors only (grad_variables is its deprecated name)")
        grad_tensors = grad_variables
    if isinstance(tensors, Tensor):
        tensors = [tensors]
    tensors = list(tensors)
    if inputs is not None:
        inputs = [inputs] if isinstance(inputs, Tensor) else list(inputs)
        if not inputs:
            raise RuntimeError("'inputs' argument to backward() cannot be empty.")
        for t in inputs:  # a non-leaf named here keeps its .grad from now on, as in PyTorch (retains_grad)
            if t.grad_fn is not None:
                t.retain_grad()
        got = grad(tensors, inputs, grad_tensors, retain_graph, create_graph, allow_unused=True)
        with set_grad_enabled(create_graph):  # with create_graph, .grad keeps its graph (added out of place)
            for t, g in zip(inputs, got):
                if g is not None and t.grad_fn is None:  # a retained non-leaf's .grad is written by the walk
                    t.grad = g if t.grad is None else (t.grad + g if create_graph else t.grad.add_(g))
        return
    retain_graph = create_graph if retain_graph is None else bool(retain_graph)  # PyTorch's default
    if grad_tensors is None or isinstance(grad_tensors, (Tensor, int, float)):  # one gradient (a number: filled)
        grad_tensors = [grad_tensors] * len(tensors) if grad_tensors is None else [grad_tensors]
    for t in tensors:
        if not t.requires_grad:
            raise _no_graph_error(t)
    starting = hooks.get("backward_starting")  # set only in `python -m gpumemnet run`
    if starting is not None:
        starting(tensors)
    grads = _default_grads(tensors, grad_tensors)
    try:
        _run(tensors, grads, retain_graph, create_graph=bool(create_graph))
    except _C.OutOfMemoryError as e:  # say what would have fitted, for the model the loss came from
        explain = hooks.get("explain_oom_last_root")
        if explain is not None:
            explain(e)
        raise


def _batched_grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused, materialize_grads):
    """grad(is_grads_batched=True): the first dim of each grad_output indexes independent vector-Jacobian products
    (zuko's CNF takes a Jacobian so). PyTorch vmaps one backward; here one backward per index, each keeping the
    graph but the last (as retain_graph says), stacked along a new first dim."""
    outs = [outputs] if isinstance(outputs, _Tensor) else list(outputs)
    gos = [grad_outputs] if isinstance(grad_outputs, _Tensor) else list(grad_outputs or ())
    if len(gos) != len(outs) or not all(isinstance(g, _Tensor) and g.ndim == o.ndim + 1 for g, o in zip(gos, outs)):
        raise RuntimeError("grad(is_grads_batched=True): each grad_output must be a tensor with one more (batch) "
                           "dim than its output")
    n = gos[0].shape[0]
    if any(g.shape[0] != n for g in gos):
        raise RuntimeError(f"grad(is_grads_batched=True): the grad_outputs' batch sizes differ: "
                           f"{[g.shape[0] for g in gos]}")
    keep = create_graph if retain_graph is None else bool(retain_graph)
    per = [grad(outs, inputs, [g[i] for g in gos], retain_graph=keep or i < n - 1, create_graph=create_graph,
                allow_unused=allow_unused, materialize_grads=materialize_grads) for i in range(n)]
    return tuple(None if col[0] is None else _stacked(col, create_graph) for col in zip(*per))


def _stacked(ts, recorded):
    """The tensors ts stacked along a new first dim; recorded (create_graph) as a sum of each placed by a one-hot
    factor, since this module is below the one that has stack."""
    if not recorded:
        return _C.cat([t._unsqueeze(0) for t in ts], 0)
    out = None
    for i, t in enumerate(ts):
        place = _C.empty((len(ts),) + (1,) * t.ndim, t._dtype, t._device)
        _C.fill_(place, 0.0)
        _C.fill_(place._select(0, i), 1.0)
        out = t.unsqueeze(0) * place if out is None else out + t.unsqueeze(0) * place
    return out


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """The gradients of outputs with respect to inputs, returned (not accumulated into .grad). only_inputs is
    PyTorch's deprecated no-op; materialize_grads returns zeros for an unused input (and so allows it)."""
    Tensor = _Tensor
    if is_grads_batched:
        return _batched_grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused,
                             materialize_grads)
    if materialize_grads and allow_unused is False:
        raise ValueError("Expected allow_unused to be True or not passed when materialize_grads=True, but got: "
                         "allow_unused=False.")
    allow_unused = bool(allow_unused) or materialize_grads
    retain_graph = create_graph if retain_graph is None else bool(retain_graph)  # PyTorch's default
    single_out = isinstance(outputs, Tensor) or bool(_complex_of(outputs))
    outputs = [outputs] if single_out else list(outputs)
    inputs = [inputs] if isinstance(inputs, Tensor) or _complex_of(inputs) else list(inputs)
    if grad_outputs is None or isinstance(grad_outputs, (Tensor, int, float)) or _complex_of(grad_outputs):
        grad_outputs = [grad_outputs] * len(outputs) if grad_outputs is None else [grad_outputs]
    outputs, grad_outputs, inputs, wrap = _real_views(outputs, list(grad_outputs), inputs)
    for t in outputs:
        if not t.requires_grad:
            raise _no_graph_error(t)
    for i, t in enumerate(inputs):
        if not t.requires_grad:
            raise RuntimeError(f"grad: input {i} (shape {tuple(t.shape)}) does not require grad")
    edges = [_edge_of(t) for t in inputs]
    capture = {e: None for e in edges}
    _run(outputs, _default_grads(outputs, grad_outputs), retain_graph, capture, bool(create_graph))
    result = []
    for i, e in enumerate(edges):
        g = capture[e]
        if g is None and not allow_unused:
            raise RuntimeError(f"grad: input {i} (shape {tuple(inputs[i].shape)}) was not used to compute the "
                               f"outputs; pass allow_unused=True to get None for it")
        if g is None and materialize_grads:
            g = _filled_like(inputs[i], 0)
        result.append(g if g is None or wrap[i] is None else wrap[i](g))
    return tuple(result)

