"""What would have fitted: when an OutOfMemoryError escapes a model's outermost call, a few meta estimates of the
usual remedies, each with its predicted peak and saving, attached to the error (issue 6, item 5).

The allocator's text (csrc/allocator.c) ranks remedies by what holds the memory, but it cannot say by how much
each helps: only the Python layer knows the model and the input. Here the model and the input's shape are known,
so each remedy is estimated as gpumemnet.memory.estimator.estimate would for a user who asked: the same meta run of one
first training step (or one forward, when the failing call recorded no graph), with the remedy applied to a meta
copy. Nothing real is allocated, so this works while the device is full.

Bounded on purpose: at most one estimate per remedy (eight), no remedy is tried once MAX_SECONDS of estimating
have passed, and any failure of an estimate only drops that remedy. The original error is always what is raised;
it gains `predictions` [(remedy, predicted peak bytes, saving bytes)], largest saving first, and a few lines of
text. What the step is assumed to be: Adam (the optimizer is not known at forward time) and loss = output.sum()
(its bytes are a scalar's); the figures are the whole step's need (parameters + input + peak, as
Estimate.total), so a saving is the same whatever else the process holds."""
import time
import weakref

from .. import _C
from .._core.autograd import is_grad_enabled, no_grad
from .._core.dtype import as_dtype
from .._core.state import state
from ..nn import functional as F
from ..nn.modules.container import Sequential
from ..nn.modules.linear import Linear
from ..nn.modules.module import Module, register_module_forward_pre_hook
from ..optim import SGD
from ..utils.checkpoint import checkpoint
from . import estimator as _estimate
from . import planner as _planner
from . import stats as _stats

MAX_SECONDS = 5.0
MIN_SHARE = 0.01  # a remedy saving less than this share of the need is not worth a line
DOMINANT_SHARE = 0.5  # a Linear holding at least this share of the parameters is worth replacing


class _Checkpointed(Module):
    """A block whose forward is recomputed in backward (gm.utils.checkpoint) while training."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, *args):
        return checkpoint(self.inner, *args, use_reentrant=False) if self.training else self.inner(*args)


class _GlobalPoolHead(Module):
    """A Linear fed by the flattened (N, C*H*W) map, replaced by a global average pool of each channel and a
    Linear(C, out): what nn.GlobalAvgPool2d before the classifier does, without changing the model's forward."""

    def __init__(self, channels, linear):
        super().__init__()
        self.channels = channels
        self.linear = linear

    def forward(self, x):
        return self.linear(F.global_avg_pool2d(x.reshape(x.shape[0], self.channels, -1, 1)))


def _fmt(n):
    return _estimate._fmt(n)


def _replace(root, path, new):
    *parents, name = path.split(".")
    m = root
    for p in parents:
        m = m._modules[p]
    m._modules[name] = new


def _need(est, training):
    """What the device must hold for the step (training) or the forward (inference)."""
    return est.total if training else est.inference_total


class Prediction(tuple):
    """(remedy, predicted peak, saving) as before; .fits: whether the step ran on meta under the limit (which caps
    the allocator's segments, not the bytes in them), None where no such run was made (the peak is over it)."""

    def __new__(cls, text, peak, saving, fits=None):
        self = super().__new__(cls, (text, peak, saving))
        self.fits = fits
        return self


def _dominant_linear(model, est):
    """(path, Linear, channels) of a Linear holding most of the parameters and fed by a flattened (N, C, H, W)
    map (the leaf called before it output one with C*H*W == in_features), or None."""
    total = sum(p.numel() for p in model.parameters())
    best = None
    for path, m in model.named_modules():
        if isinstance(m, Linear) and (best is None or m.weight.numel() > best[1].weight.numel()):
            best = (path, m)
    if best is None or best[1].weight.numel() < DOMINANT_SHARE * total:
        return None
    path, lin = best
    rows = est.layers
    for i, r in enumerate(rows):
        if r.path != path:
            continue
        for prev in reversed(rows[:i]):
            s = prev.output_shape
            if isinstance(s, tuple) and len(s) == 4:
                if s[1] * s[2] * s[3] == lin.in_features and s[2] * s[3] > 1:
                    return path, lin, s[1]
                return None
        return None
    return None


def _blocks(model, shape, device):
    """Paths of the modules the model's forward calls directly, in call order (seen in a meta forward)."""
    seen = []
    clone = _estimate._meta_copy(model)

    def pre(mod, args):  # (the failing call may still be on the stack below the clone)
        stack = state.modules
        if len(stack) >= 2 and stack[-2] is clone and mod._path not in seen:
            seen.append(mod._path)

    handle = register_module_forward_pre_hook(pre)
    try:
        with no_grad():
            x = _C.empty(shape, next(iter(clone.parameters()))._dtype, "meta")
            clone(x)
    finally:
        handle.remove()
        del clone
    return seen


def _remedies(model, shape, dev, training, base):
    """(text, estimate kwargs, model or None) for each remedy worth estimating, in the order they are tried."""
    n = shape[0]
    out = []
    # first: when a Linear holds most of the parameters, no batch-side remedy reaches its bytes
    dom = _dominant_linear(model, base)
    if dom is not None:
        path, lin, c = dom

        def make_gap(path=path, c=c):
            clone = _estimate._meta_copy(model)
            old = _walk(clone, path)
            new = Linear(c, old.out_features, bias=old.bias is not None, device="meta", dtype=old.weight.dtype)
            _replace(clone, path, _GlobalPoolHead(c, new))
            return clone
        out.append((f"a global average pool before {path} (nn.GlobalAvgPool2d): {path} becomes "
                    f"Linear({c}, {lin.out_features}) instead of Linear({lin.in_features}, {lin.out_features})",
                    {}, make_gap))
    for k in (2, 4):
        if n % k == 0:
            what = f"a batch of {n // k} with {k} accumulation steps" if training else \
                f"the batch in {k} chunks of {n // k}"
            out.append((what, dict(accumulation_steps=k), None))
    if training:
        if isinstance(model, Sequential):
            for s in (2, 4):  # which is better depends on where the peak falls: both are estimated
                if len(model) >= s:
                    out.append((f"checkpointing in {s} segments (gm.utils.checkpoint_sequential)",
                                dict(checkpoint_segments=s), None))
        elif not isinstance(model, Sequential):
            blocks = _blocks(model, shape, dev)
            if len(blocks) >= 2:
                def make(blocks=blocks):
                    clone = _estimate._meta_copy(model)
                    for p in blocks[:-1]:
                        _replace(clone, p, _Checkpointed(_walk(clone, p)))
                    return clone
                out.append((f"checkpointing each of the {len(blocks) - 1} blocks before the last "
                            f"(gm.utils.checkpoint)", {}, make))
    if all(p._dtype == as_dtype("float32").code for p in model.parameters()):
        dt = "float16" if dev.startswith("cuda") else "bfloat16"
        out.append((f"autocast to {dt} (gm.autocast)", dict(autocast=as_dtype(dt)), None))
    if training:
        out.append(("SGD with momentum instead of Adam (one state tensor per parameter, not two)",
                    dict(optimizer=lambda ps: SGD(ps, lr=0.01, momentum=0.9)), None))
    return out


def _walk(root, path):
    m = root
    for p in path.split("."):
        m = m._modules[p]
    return m


@_estimate.holding_meta  # its meta forward (_blocks) and estimates, as one turn on the meta device
def predict(model, x, training=None, limit=None):
    """[(remedy, predicted peak, saving)] for running `model` on an input like `x` (a Tensor or a shape, first
    dim the batch), largest saving first, and the baseline's predicted need; only remedies that save at least
    MIN_SHARE of the need.
    training: a training step (default: model.training and grad mode on) or a forward only. limit: the device's
    limit; a remedy whose peak is under it runs on meta under it too (Prediction.fits), as its segments may not
    fit where its bytes would."""
    if training is None:
        training = model.training and is_grad_enabled()
    if isinstance(x, _C.TensorBase):
        shape, dev = tuple(x.shape), x._device
    else:
        shape = tuple(x)
        dev = next(iter(model.parameters()))._device
    dev = "cuda" if dev.startswith("cuda") else "cpu"
    t0 = time.perf_counter()
    base = _estimate.estimate(model, shape, device=dev)
    need = _need(base, training)
    preds = []
    for text, kw, make in _remedies(model, shape, dev, training, base):
        if time.perf_counter() - t0 > MAX_SECONDS:
            break
        try:
            variant = make() if make is not None else model
            est = _estimate.estimate(variant, shape, device=dev, **kw)
        except Exception:  # a remedy this model does not take: say nothing about it
            continue
        peak = _need(est, training)
        if need - peak >= need * MIN_SHARE:
            preds.append(Prediction(text, peak, need - peak, _runs_under(variant, shape, dev, kw, limit)
                                    if limit is not None and peak <= limit else None))
    preds.sort(key=lambda p: -p[2])
    return preds, need


def _runs_under(model, shape, dev, kw, limit):
    """Whether the step runs on meta under `limit` (the allocator's segments, which a limit caps, fit too)."""
    try:
        _estimate.estimate(model, shape, device=dev, limit=limit, **kw)
    except _C.OutOfMemoryError:
        return False
    except Exception:
        return None
    return True


def _fits(p, limit):
    fits = getattr(p, "fits", None)
    return p[1] <= limit if fits is None else fits


def _verdict(p, limit):
    if _fits(p, limit):
        return f"fits the {_fmt(limit)}"
    if p[1] <= limit:
        return f"does not fit the {_fmt(limit)}: the allocator's segments for it do not"
    return f"still {_fmt(p[1] - limit)} over the {_fmt(limit)}"


def _plan_for(model, shape, limit):
    """gm.memory.plan's answer for the step (Adam, output.sum(), as the predictions) within `limit` bytes, as a plain
    dict (the configuration and its predicted peak: an error keeps no Plan, which holds the model); the str of the
    ValueError saying that nothing fits; None when it cannot be asked (a model input it cannot make)."""
    try:
        p = _planner.plan(model, shape[1:], batch_size=shape[0], budget=limit)
    except ValueError as e:
        return str(e)
    except Exception:
        return None
    return dict(_planner._config(p), micro_batch=p.micro_batch, predicted_peak=p.predicted_peak)


def _plan_text(p, limit):
    if p is None:
        return f"  none of these fits the {_fmt(limit)}"
    if isinstance(p, str):
        return f"  none of these fits the {_fmt(limit)}, nor does any configuration gm.memory.plan tries: {p}"
    return (f"  none of these fits the {_fmt(limit)}; gm.memory.plan finds one that does: "
            f"{_planner._describe(p)}, predicted peak {_fmt(p['predicted_peak'])} "
            f"(gm.memory.plan(model, input_shape, loss_fn, batch_size=..., budget=...).step(x, y, optimizer))")


# What attach() found for a model, input shape and limit, so that a loop that keeps running out of memory (and
# catches it) pays for the meta runs once: the model's identity and structure are part of the key.
_explained = {}
_EXPLAINED_MAX = 16


def _fingerprint(model):
    return tuple((name, type(m).__name__, m.training) for name, m in model.named_modules()) + tuple(
        (name, tuple(p.shape), p._dtype, p.requires_grad) for name, p in model.named_parameters())


def _explanation(model, shape, training, limit):
    """(predictions, need, plan) for attach, computed once per model, structure, input shape, mode and limit."""
    key = (id(model), _fingerprint(model), shape, training, limit)
    hit = _explained.get(key)
    if hit is not None and hit[0]() is model:
        return hit[1]
    preds, need = predict(model, shape, training, limit)  # (estimate() runs its step with grad on itself)
    fitting = [p for p in preds if _fits(p, limit)]
    plan = _plan_for(model, shape, limit) if training and not fitting and len(shape) >= 1 else None
    if len(_explained) >= _EXPLAINED_MAX:
        _explained.pop(next(iter(_explained)))
    _explained[key] = (weakref.ref(model), (preds, need, plan))
    return preds, need, plan


def attach_last_root(exc):
    """An OutOfMemoryError raised in backward or an optimizer step: explain it for the model whose root call ran
    last (the one a training loop's loss came from), if any; never raises."""
    last = state.last_root
    model = last[0]() if last is not None else None
    if model is not None:
        attach(exc, model, (last[1],))


def attach(exc, model, args):
    """Give exc (an OutOfMemoryError escaping model(*args)) its predictions; never raises."""
    if _estimate.busy.depth or getattr(exc, "predictions", None) is not None:
        return
    try:
        exc.predictions = []
        if len(args) != 1:
            return
        x = args[0]  # a tensor, or the shape of the input of the last root call (attach_last_root)
        shape = tuple(x.shape) if isinstance(x, _C.TensorBase) else tuple(x)
        if not shape:
            return
        training = model.training and is_grad_enabled()
        dev = next(iter(model.parameters()))._device
        limit = _stats.get_limit(dev) or _stats.capacity(dev)
        preds, need, exc.plan = _explanation(model, shape, training, limit)
        exc.predictions = list(preds)
        fitting = [p for p in preds if _fits(p, limit)]
        if (preds or exc.plan) and exc.args and isinstance(exc.args[0], str):
            what = (f"one training step (Adam, loss = output.sum()) of {type(model).__name__} on a batch of "
                    f"{shape[0]}" if training else f"one forward without a graph of a batch of {shape[0]}")
            held = f" (its allocator segments do not fit the {_fmt(limit)})" if need <= limit else ""
            lines = [f"\n  predicted by meta runs of {what}: it needs {_fmt(need)}{held}; with"]
            lines += [f"    - {p[0]}: predicted peak {_fmt(p[1])} (saves {_fmt(p[2])}): " + _verdict(p, limit)
                      for p in preds]
            if training and not fitting:
                lines.append(_plan_text(exc.plan, limit))
            exc.args = (exc.args[0] + "\n".join(lines),) + exc.args[1:]
    except Exception:  # an explanation that fails must not hide the error it explains
        pass
