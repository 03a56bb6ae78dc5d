"""torch.utils.tensorboard.writer: SummaryWriter writes scalars, scalar groups, histograms, images, text and
hyperparameters as TensorBoard event files, through the `tensorboard` package's own event-file writer and protocol
buffers (as PyTorch's does; like PyTorch's, it needs that package: `pip install tensorboard`); FileWriter adds
prepared Summary protos (Lightning's TensorBoardLogger writes summary.hparams' through it).

add_graph cannot trace a gpumemnet model (PyTorch traces with TorchScript): it writes nothing and warns once, so a
script that logs its graph keeps running. add_embedding, add_pr_curve, add_audio, add_video and add_mesh are not
here yet and raise NotImplementedError saying so."""
import io
import os
import socket
import time
import warnings
from datetime import datetime

import numpy as np

from ... import _C
from .summary import hparams, tensorboard_module

__all__ = ["FileWriter", "SummaryWriter"]


def _tb():
    """The tensorboard modules the writer needs, or PyTorch's ImportError for a missing package."""
    protos = [tensorboard_module("compat.proto." + m) for m in ("event_pb2", "summary_pb2", "tensor_pb2",
                                                                  "tensor_shape_pb2")]
    return (*protos, tensorboard_module("plugins.text.plugin_data_pb2"),
            tensorboard_module("summary.writer.event_file_writer").EventFileWriter)


class FileWriter:
    """The event file of one directory of a SummaryWriter: add_summary / add_event write prepared protos there."""

    def __init__(self, writer, path):
        self._owner, self._path = writer, path

    def get_logdir(self):
        return self._path

    def add_event(self, event, step=None, walltime=None):
        if step is not None:
            event.step = int(step)
        if walltime is not None:
            event.wall_time = walltime
        self._owner._writer(self._path).add_event(event)

    def add_summary(self, summary, global_step=None, walltime=None):
        self._owner._write(self._path, summary, global_step, walltime)

    def flush(self):
        self._owner._writer(self._path).flush()

    def close(self):
        self._owner._writer(self._path).close()


def _numpy(x, what):
    """x (a tensor, array or number) as a float64 NumPy array."""
    if isinstance(x, _C.TensorBase):
        x = x.detach()
        x = _C.TensorBase.numpy((x.float() if x._dtype in (2, 3) else x).cpu())
    try:
        return np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{what}: expected a tensor, an array or a number, got {type(x).__name__}") from None


def _tensorflow_bins():
    """TensorBoard's default bucket edges, PyTorch's bins="tensorflow": from 1e-12 up past 1e20 by factors of 1.1,
    mirrored below zero, and 0."""
    v, above = 1e-12, []
    while v < 1e20:
        above.append(v)
        v *= 1.1
    return [-b for b in reversed(above)] + [0] + above


_TENSORFLOW_BINS = _tensorflow_bins()


def _histogram(a, bins, max_bins):
    """(counts, bucket limits) as PyTorch's summary writes them: NumPy's histogram, merged in groups of equal size
    when it has more than max_bins buckets, cut down to the buckets from the first to the last that hold a value,
    with one bucket to the left (empty, or the one before) so that the first one's left edge is shown."""
    counts, edges = np.histogram(a, bins=_TENSORFLOW_BINS if isinstance(bins, str) and bins == "tensorflow" else bins)
    if max_bins is not None and len(counts) > max_bins:
        group = len(counts) // max_bins
        counts = np.pad(counts, (0, -len(counts) % group)).reshape(-1, group).sum(axis=1)
        edges = np.append(edges[:-1:group], edges[-1])
    held = np.flatnonzero(counts)
    if held.size == 0:
        raise ValueError("add_histogram: no value falls in any bucket (NaN or inf values only?)")
    start, end = int(held[0]), int(held[-1]) + 1
    counts = counts[start - 1:end] if start > 0 else np.concatenate([[0], counts[:end]])
    return counts, edges[start:end + 1]


def _is_uint8(x):
    """PyTorch's scale rule keys on uint8 only."""
    return (isinstance(x, np.ndarray) and x.dtype == np.uint8) or (isinstance(x, _C.TensorBase) and x._dtype == 6)


class SummaryWriter:
    """Writes TensorBoard event files into log_dir (runs/<date>_<host><comment> by default, as PyTorch's)."""

    def __init__(self, log_dir=None, comment="", purge_step=None, max_queue=10, flush_secs=120,
                 filename_suffix=""):
        modules = _tb()
        self._event_pb2, self._summary_pb2, self._tensor_pb2, self._shape_pb2, self._text_pb2 = modules[:5]
        self._file_writer_cls = modules[5]
        if not log_dir:
            stamp = datetime.now().strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", f"{stamp}_{socket.gethostname()}{comment}")
        self.log_dir = str(log_dir)
        self._opts = dict(max_queue_size=max_queue, flush_secs=flush_secs, filename_suffix=filename_suffix)
        self._writers = {}
        self._graph_warned = False
        self._writer(self.log_dir)
        if purge_step is not None:  # as PyTorch: later readers drop what an earlier run wrote from this step on
            self._write(self.log_dir, None, purge_step, None, file_version=None, purge=True)

    # ---- plumbing ------------------------------------------------------------------------------------------
    def _writer(self, path):
        if path not in self._writers:
            self._writers[path] = self._file_writer_cls(path, **self._opts)
        return self._writers[path]

    def _write(self, path, summary, step, walltime, file_version=None, purge=False):
        event = self._event_pb2.Event(wall_time=time.time() if walltime is None else walltime)
        if summary is not None:
            event.summary.CopyFrom(summary)
        if step is not None:
            event.step = int(step)
        if purge:
            event.session_log.status = self._event_pb2.SessionLog.START
        self._writer(path).add_event(event)

    def _value(self, **kw):
        return self._summary_pb2.Summary(value=[self._summary_pb2.Summary.Value(**kw)])

    def get_logdir(self):
        return self.log_dir

    @property
    def file_writer(self):
        return FileWriter(self, self.log_dir)

    def _get_file_writer(self):
        return self.file_writer

    # ---- what is written ------------------------------------------------------------------------------------
    def add_scalar(self, tag, scalar_value, global_step=None, walltime=None, new_style=False,
                   double_precision=False):
        """One value of the series `tag` at global_step."""
        v = _numpy(scalar_value, "add_scalar").squeeze()
        if v.ndim != 0:
            raise ValueError(f"add_scalar: scalar_value must hold one value, got shape {v.shape}")
        self._write(self.log_dir, self._value(tag=tag, simple_value=float(v)), global_step, walltime)

    def add_scalars(self, main_tag, tag_scalar_dict, global_step=None, walltime=None):
        """Several series in one chart: each written by its own writer in log_dir/<main_tag>_<tag>, as PyTorch's."""
        walltime = time.time() if walltime is None else walltime
        for tag, value in tag_scalar_dict.items():
            path = os.path.join(self.log_dir, f"{main_tag.replace('/', '_')}_{tag}")
            v = float(_numpy(value, "add_scalars").squeeze())
            self._write(path, self._value(tag=main_tag, simple_value=v), global_step, walltime)

    def add_histogram(self, tag, values, global_step=None, bins="tensorflow", walltime=None, max_bins=None):
        """The distribution of values (in float64): bucketed as PyTorch's writer buckets them (bins: TensorBoard's
        default edges for 'tensorflow', else a count, edges or a NumPy rule; see _histogram), with min, max,
        count, sum and sum of squares."""
        a = _numpy(values, "add_histogram").reshape(-1).astype(np.float64)
        if a.size == 0:
            raise ValueError("add_histogram: the input has no element")
        counts, limits = _histogram(a, bins, max_bins)
        hist = self._summary_pb2.HistogramProto(min=float(a.min()), max=float(a.max()), num=int(a.size),
                                                sum=float(a.sum()), sum_squares=float(np.dot(a, a)),
                                                bucket_limit=[float(e) for e in limits],
                                                bucket=[float(c) for c in counts])
        self._write(self.log_dir, self._value(tag=tag, histo=hist), global_step, walltime)

    def add_image(self, tag, img_tensor, global_step=None, walltime=None, dataformats="CHW"):
        """An image (CHW by default; HWC, HW also), stored as PNG: uint8 values as they are, any other dtype
        scaled by 255 (so floats are taken in [0, 1]) and clipped, as PyTorch's."""
        fmt = dataformats.upper()
        a = _numpy(img_tensor, "add_image")
        if fmt == "HW":
            a, fmt = a[None], "CHW"
        if fmt not in ("CHW", "HWC") or a.ndim != 3:
            raise ValueError(f"add_image: dataformats {dataformats!r} does not fit an image of shape {a.shape} "
                             f"(expected CHW, HWC or HW)")
        self._write_png(tag, a if fmt == "CHW" else a.transpose(2, 0, 1), _is_uint8(img_tensor), global_step,
                        walltime)

    def add_images(self, tag, img_tensor, global_step=None, walltime=None, dataformats="NCHW"):
        """A batch of images tiled into one, 8 to a row (as PyTorch's)."""
        a = _numpy(img_tensor, "add_images")
        if dataformats.upper() == "NHWC":
            a = a.transpose(0, 3, 1, 2)
        if a.ndim != 4:
            raise ValueError(f"add_images: expected a batch of images ({dataformats}), got shape {a.shape}")
        if a.shape[1] == 1:
            a = np.repeat(a, 3, axis=1)
        n, c, h, w = a.shape
        cols = min(n, 8)
        rows = -(-n // cols)
        grid = np.zeros((c, rows * h, cols * w))
        for i in range(n):
            r, k = divmod(i, cols)
            grid[:, r * h:(r + 1) * h, k * w:(k + 1) * w] = a[i]
        self._write_png(tag, grid, _is_uint8(img_tensor), global_step, walltime)

    def _write_png(self, tag, chw, is_uint8, global_step, walltime):
        try:
            from PIL import Image
        except ImportError as e:
            raise ImportError("SummaryWriter.add_image needs Pillow (pip install pillow)") from e
        if chw.shape[0] == 1:
            chw = np.repeat(chw, 3, axis=0)
        pixels = np.clip(chw.transpose(1, 2, 0) * (1.0 if is_uint8 else 255.0), 0, 255).astype(np.uint8)
        buf = io.BytesIO()
        Image.fromarray(pixels).save(buf, format="PNG")
        image = self._summary_pb2.Summary.Image(height=pixels.shape[0], width=pixels.shape[1],
                                                colorspace=pixels.shape[2], encoded_image_string=buf.getvalue())
        self._write(self.log_dir, self._value(tag=tag, image=image), global_step, walltime)

    def add_text(self, tag, text_string, global_step=None, walltime=None):
        """Markdown text, shown by TensorBoard's text plugin (tag + '/text_summary', as PyTorch's)."""
        plugin = self._summary_pb2.SummaryMetadata.PluginData(
            plugin_name="text", content=self._text_pb2.TextPluginData(version=0).SerializeToString())
        shape = self._shape_pb2.TensorShapeProto(dim=[self._shape_pb2.TensorShapeProto.Dim(size=1)])
        tensor = self._tensor_pb2.TensorProto(dtype="DT_STRING", string_val=[str(text_string).encode("utf_8")],
                                              tensor_shape=shape)
        summary = self._value(tag=tag + "/text_summary", metadata=self._summary_pb2.SummaryMetadata(
            plugin_data=plugin), tensor=tensor)
        self._write(self.log_dir, summary, global_step, walltime)

    def add_graph(self, model, input_to_model=None, verbose=False, use_strict_trace=True):
        """Nothing is written: gpumemnet cannot trace a model into a graph (PyTorch traces with TorchScript)."""
        if not self._graph_warned:
            warnings.warn("SummaryWriter.add_graph: gpumemnet cannot trace a model graph; nothing was written",
                          stacklevel=2)
            self._graph_warned = True

    def add_hparams(self, hparam_dict, metric_dict, hparam_domain_discrete=None, run_name=None, global_step=None):
        """Hyperparameters and their metrics for TensorBoard's HParams tab, in the sub-run log_dir/run_name (the
        time by default) with each metric as a scalar there, as PyTorch's."""
        if not isinstance(hparam_dict, dict) or not isinstance(metric_dict, dict):
            raise TypeError("hparam_dict and metric_dict should be dictionary.")
        exp, ssi, sei = hparams(hparam_dict, metric_dict, hparam_domain_discrete)
        with SummaryWriter(log_dir=os.path.join(self.log_dir, run_name or str(time.time()))) as run:
            for summary in (exp, ssi, sei):
                run.file_writer.add_summary(summary, global_step)
            for k, v in metric_dict.items():
                run.add_scalar(k, v, global_step)

    def _not_yet(self, name):
        raise NotImplementedError(f"SummaryWriter.{name} is a PyTorch method gpumemnet does not have yet")

    def add_embedding(self, *args, **kwargs): self._not_yet("add_embedding")
    def add_pr_curve(self, *args, **kwargs): self._not_yet("add_pr_curve")
    def add_audio(self, *args, **kwargs): self._not_yet("add_audio")
    def add_video(self, *args, **kwargs): self._not_yet("add_video")
    def add_mesh(self, *args, **kwargs): self._not_yet("add_mesh")

    def flush(self):
        for w in self._writers.values():
            w.flush()

    def close(self):
        for w in self._writers.values():
            w.close()
        self._writers = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
