"""summary(model, input_size, ...) (gm.summary): torchsummary's table of training steps, from estimate()
(estimator.py), with the step's memory by kind, at its peak, and whether it fits the device. Apart from
estimator.py so that each file stays readable (and under the project's 800 lines)."""
import html
import sys

from .. import _C
from .._core.dtype import device_str
from . import stats as _memory
from .estimator import _fmt, _html_table, estimate

__all__ = ["Summary", "summary"]


def _verdict(est, capacity, run_under_limit):
    """summary's last line. Allocated bytes within capacity are not enough: the allocator holds whole segments
    and may fragment them. When the segments of the step from an empty cache fit too (peak_reserved), it fits;
    between the two, the step runs again under capacity as a limit, as the device would run it (the allocator
    releases its cache and retries before it gives up)."""
    if not est.fits(capacity) or est.peak_reserved <= capacity:
        return est.verdict(capacity)
    try:
        run_under_limit()
    except _C.OutOfMemoryError as e:
        return (f"does not fit: needs {_fmt(est.total)} allocated, which is within {_fmt(capacity)}, but not with "
                f"the allocator's segments ({_fmt(est.peak_reserved)} from an empty cache) and their fragmentation: "
                + str(e).splitlines()[0])
    return est.verdict(capacity) + " (with the allocator releasing its cache during the step)"


class Summary(str):
    """What summary() returns: the table's text (a str, so it prints, compares and splits as before), shown as
    itself by repr (not as a quoted string) and as an HTML table in a notebook (_repr_html_)."""

    def __new__(cls, text, est=None, header=(), rows=(), footer=()):
        self = super().__new__(cls, text)
        self.estimate, self._header, self._rows, self._footer = est, header, rows, footer
        return self

    def __repr__(self):
        return str(self)

    def _repr_html_(self):
        e = html.escape
        table = _html_table("gpumemnet summary", [[e(c) for c in r] for r in self._rows],
                            header=[e(h) for h in self._header])
        return table + "\n<pre>" + e("\n".join(self._footer)) + "</pre>"


def _interactive():
    """True in IPython/Jupyter and in the plain interactive interpreter: there the value a call returns is shown,
    so summary() does not print it too (a notebook would show the table twice)."""
    ipython = sys.modules.get("IPython")
    if ipython is not None and getattr(ipython, "get_ipython", lambda: None)() is not None:
        return True
    return hasattr(sys, "ps1")


def summary(model, input_size, batch_size=-1, device="cpu", optimizer=None, capacity=None, loss_fn=None,
            target=None, autocast=None, checkpoint_segments=None, accumulation_steps=1):
    """torchsummary's table (Layer (type), Output Shape, Param #) with a column of the bytes each layer keeps for
    backward, the memory of training by kind and at its peak (the highest step's: estimate() runs the first and
    the steady one), and whether it fits the device: its capacity, or its limit (gm.memory.set_limit) when one
    is set, or `capacity` (bytes) when given.
    batch_size=-1 prints -1 as the batch dimension, as torchsummary does, and estimates a batch of 1.

    Returns a Summary: the text (a str) that shows itself as the table, and as HTML in a notebook. Printed too
    when run from a script, as torchsummary prints it; not printed in IPython/Jupyter or the interactive
    interpreter, where the returned value is shown (once). Figures are MiB/GiB (gm.memory.format_bytes); the
    peaks are estimate()'s Estimate.total and Estimate.inference_total, the same figures by the same names."""
    dev = device_str(device)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size == 0 or batch_size < -1:
        raise ValueError(f"summary: batch_size must be a positive int, or -1 (torchsummary's: a batch of 1 shown "
                         f"as -1), got {batch_size!r}")
    if capacity is not None and (isinstance(capacity, bool) or not isinstance(capacity, (int, float))
                                 or capacity <= 0):
        raise ValueError(f"summary: capacity must be a positive number of bytes or None, got {capacity!r}")
    batch = abs(batch_size)
    kw = dict(loss_fn=loss_fn, target=target, autocast=autocast, checkpoint_segments=checkpoint_segments,
              accumulation_steps=accumulation_steps)
    est = estimate(model, input_size, optimizer=optimizer, batch_size=batch, device=dev, **kw)
    if capacity is None:
        limit = _memory.get_limit(dev)
        capacity = limit if limit else _memory.capacity(dev)
    line, dline = "-" * 78, "=" * 78
    header = ("Layer (type)", "Output Shape", "Param #", "Kept")
    rows = []
    for i, r in enumerate(est.layers, 1):
        if isinstance(r.output_shape, tuple):
            shape = "[" + ", ".join([str(batch_size)] + [str(s) for s in r.output_shape[1:]]) + "]"
        else:
            shape = str([[batch_size] + list(s[1:]) for s in r.output_shape])
        rows.append((f"{r.type}-{i}", shape, f"{r.params:,}", _fmt(r.kept)))
    out = [line, f"{header[0]:>20}  {header[1]:>25} {header[2]:>15} {header[3]:>12}", dline]
    out += [f"{a:>20}  {b:>25} {c:>15} {d:>12}" for a, b, c, d in rows]
    at = " · ".join(f"{c} {_fmt(b)}" for c, b in est.breakdown())
    steps = f" from step {est.peak_step} on; step 1: {_fmt(est.first_step_total)}" if est.peak_step > 1 else ""
    footer = [f"Total params: {est.params:,}",
              f"Trainable params: {est.trainable:,}",
              f"Non-trainable params: {est.params - est.trainable:,}",
              line,
              f"Parameters: {_fmt(est.param_bytes)}",
              f"Gradients: {_fmt(est.gradient_bytes)}",
              f"Optimizer state: {_fmt(est.optimizer_bytes)}",
              f"Activations saved for backward (most at once): {_fmt(est.activation_bytes)}",
              f"Input: {_fmt(est.input_bytes)}",
              f"Training step peak: {_fmt(est.total)} (reached in {est.peak_scope or '?'}{steps})",
              f"  at that moment: {at}",
              f"Inference peak: {_fmt(est.inference_total)}",
              f"Device {dev}: {_fmt(capacity)}" + (f", {est.predicted_for}" if est.notes else ""),
              line,
              _verdict(est, capacity, lambda: estimate(model, input_size, optimizer=optimizer, batch_size=batch,
                                                       device=dev, limit=capacity, **kw))]
    out += [dline] + footer
    text = Summary("\n".join(out), est, header, rows, footer)
    if not _interactive():
        print(text)
    return text
