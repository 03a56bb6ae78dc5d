"""The profiler's results (layer 3): FunctionEvent (one timed range), FunctionEventAvg (the ranges of one name
summed), EventList (a list of either, with key_averages, table, export_chrome_trace), as torch.autograd's
profiler_util has them. Times are in microseconds, memory in bytes of gpumemnet's allocator (block sizes, exact:
gm.memory.memory_allocated), shown with gpumemnet's binary units (KiB, MiB)."""
import enum
import gzip
import json
import math
import os

from ..memory.stats import format_bytes

__all__ = ["DeviceType", "Interval", "FunctionEvent", "FunctionEventAvg", "EventList"]


class DeviceType(enum.Enum):
    """Where an event ran: every range gpumemnet records is a host (CPU) range, the launches of CUDA work too."""
    CPU = 0
    CUDA = 1


class Interval:
    def __init__(self, start, end):
        self.start, self.end = start, end

    def elapsed_us(self):
        return self.end - self.start

    def __repr__(self):
        return f"Interval(start={self.start}, end={self.end})"


class FunctionEvent:
    """One range: an op of gpumemnet's core (gm::<op>), a record_function range, a module's forward
    (nn.Module: ..., with_modules=True), a ProfilerStep#N or the autograd walk. Times in microseconds."""

    def __init__(self, id, name, thread, start_us, end_us, *, input_shapes=None, stack=None, flops=0,
                 cpu_memory_usage=0, device_memory_usage=0, is_user_annotation=False, use_device=None,
                 sequence_nr=-1, scope=0):
        self.id, self.thread = id, thread
        # PyTorch's rows: the steps' ranges are one row "ProfilerStep*"; the trace keeps "ProfilerStep#N"
        self.trace_name = name
        self.name = "ProfilerStep*" if name.startswith("ProfilerStep#") else name
        self.time_range = Interval(start_us, end_us)
        self.input_shapes = input_shapes if input_shapes is not None else []
        self.stack = stack if stack is not None else []
        self.flops = flops
        self.cpu_memory_usage, self.device_memory_usage = cpu_memory_usage, device_memory_usage
        self.is_user_annotation = is_user_annotation
        self.use_device = use_device
        self.cpu_children, self.cpu_parent = [], None
        self.count, self.node_id, self.is_async, self.is_remote, self.is_legacy = 1, -1, False, False, False
        self.device_type = DeviceType.CPU
        self.overload_name, self.sequence_nr, self.scope = "", sequence_nr, scope
        self.kernels = []  # device kernels: none are timed here (CPU ranges only)
        self.device_time_total = self.self_device_time_total = 0.0

    @property
    def key(self):
        return self.name

    @property
    def cpu_time_total(self):
        return self.time_range.elapsed_us()

    @property
    def self_cpu_time_total(self):
        # exact: every child range lies inside its parent's, on the same thread
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children)

    @property
    def cpu_time(self):
        return self.cpu_time_total / self.count

    @property
    def device_time(self):
        return 0.0

    @property
    def self_cpu_memory_usage(self):
        return self.cpu_memory_usage - sum(c.cpu_memory_usage for c in self.cpu_children)

    @property
    def self_device_memory_usage(self):
        return self.device_memory_usage - sum(c.device_memory_usage for c in self.cpu_children)

    # PyTorch's older names of the device columns
    cuda_memory_usage = property(lambda self: self.device_memory_usage)
    self_cuda_memory_usage = property(lambda self: self.self_device_memory_usage)
    cuda_time_total = property(lambda self: self.device_time_total)
    self_cuda_time_total = property(lambda self: self.self_device_time_total)

    def append_cpu_child(self, child):
        self.cpu_children.append(child)

    def set_cpu_parent(self, parent):
        self.cpu_parent = parent

    def __repr__(self):
        return (f"<FunctionEvent id={self.id} name={self.name} cpu_time={_format_time(self.cpu_time_total)} "
                f"start_us={self.time_range.start:.3f} end_us={self.time_range.end:.3f} "
                f"cpu_children={[c.id for c in self.cpu_children]} cpu_memory_usage={self.cpu_memory_usage} "
                f"input_shapes={self.input_shapes}>")


class FunctionEventAvg:
    """The events of one key summed: count, total and self times, memory, FLOPs."""

    def __init__(self):
        self.key = None
        self.count = 0
        self.node_id, self.is_async, self.is_remote, self.is_legacy, self.use_device = 0, False, False, False, None
        self.cpu_time_total = self.self_cpu_time_total = 0.0
        self.device_time_total = self.self_device_time_total = 0.0
        self.cpu_memory_usage = self.self_cpu_memory_usage = 0
        self.device_memory_usage = self.self_device_memory_usage = 0
        self.input_shapes, self.stack, self.overload_name, self.scope = None, None, None, None
        self.cpu_children, self.cpu_parent = None, None
        self.device_type, self.is_user_annotation, self.flops = DeviceType.CPU, False, 0

    def add(self, other):
        if self.key is None:  # the first event gives the fields that are not summed
            self.key, self.node_id, self.is_async, self.use_device = other.key, other.node_id, other.is_async, \
                other.use_device
            self.input_shapes, self.stack, self.overload_name, self.scope = other.input_shapes, other.stack, \
                other.overload_name, other.scope
            self.cpu_children, self.cpu_parent = other.cpu_children, other.cpu_parent
            self.device_type, self.is_user_annotation = other.device_type, other.is_user_annotation
        if not isinstance(other, (FunctionEvent, FunctionEventAvg)) or other.key != self.key:
            raise AssertionError(f"FunctionEventAvg.add: expected an event of key {self.key!r}, got {other!r}")
        return self._sum(other)

    def _sum(self, other):
        for field in ("cpu_time_total", "self_cpu_time_total", "device_time_total", "self_device_time_total",
                      "cpu_memory_usage", "self_cpu_memory_usage", "device_memory_usage",
                      "self_device_memory_usage", "count", "flops"):
            setattr(self, field, getattr(self, field) + getattr(other, field))
        return self

    def __iadd__(self, other):
        return self.add(other)

    @property
    def cpu_time(self):
        return self.cpu_time_total / self.count if self.count else 0.0

    @property
    def device_time(self):
        return self.device_time_total / self.count if self.count else 0.0

    cuda_memory_usage = property(lambda self: self.device_memory_usage)
    self_cuda_memory_usage = property(lambda self: self.self_device_memory_usage)
    cuda_time_total = property(lambda self: self.device_time_total)
    self_cuda_time_total = property(lambda self: self.self_device_time_total)

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key} self_cpu_time={_format_time(self.self_cpu_time_total)} "
                f"cpu_time={_format_time(self.cpu_time)} input_shapes={self.input_shapes} "
                f"cpu_memory_usage={self.cpu_memory_usage}>")


class EventList(list):
    """A list of events (a profile's, or key_averages'), with PyTorch's summaries of them."""

    def __init__(self, *args, use_device=None, profile_memory=False, with_flops=False, trace_meta=None):
        super().__init__(*args)
        self._use_device, self._profile_memory, self._with_flops = use_device, profile_memory, with_flops
        self._trace_meta = trace_meta or {}

    @property
    def self_cpu_time_total(self):
        return sum(e.self_cpu_time_total for e in self)

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0, group_by_overload_name=False):
        """One FunctionEventAvg per name (and input shapes / the innermost stack_n frames where asked), in the
        order the names first appear."""
        groups = {}
        for e in self:
            key = (e.key, e.node_id)
            if group_by_input_shape:
                key += (str(e.input_shapes),)
            if group_by_stack_n > 0:
                key += tuple(e.stack[:group_by_stack_n])
            if group_by_overload_name:
                key += (e.overload_name,)
            groups.setdefault(key, FunctionEventAvg()).add(e)
        out = EventList(groups.values(), use_device=self._use_device, profile_memory=self._profile_memory,
                        with_flops=self._with_flops)
        for avg in out:
            avg.stack = avg.stack[:group_by_stack_n] if group_by_stack_n else []
            if not group_by_input_shape:
                avg.input_shapes = ""
            if not group_by_overload_name:
                avg.overload_name = ""
        return out

    def total_average(self):
        """Every event summed, under the key "Total"."""
        total = FunctionEventAvg()
        total.key = "Total"
        for e in self:
            total._sum(e)
        return total

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75, max_name_column_width=55,
              max_shapes_column_width=80, header=None, top_level_events_only=False, time_unit=None):
        """PyTorch's text table: Name, Self CPU %, Self CPU, CPU total %, CPU total, CPU time avg, then with
        profile_memory CPU Mem and Self CPU Mem (and CUDA Mem, Self CUDA Mem where CUDA memory moved), # of Calls,
        Input Shapes (record_shapes), Source Location (with_stack), Total FLOPs (with_flops). sort_by names an
        event attribute ("self_cpu_time_total", "cpu_memory_usage", "count", ...), largest first."""
        return _build_table(self, sort_by=sort_by, header=header, row_limit=row_limit,
                            max_src_column_width=max_src_column_width, max_name_column_width=max_name_column_width,
                            max_shapes_column_width=max_shapes_column_width, with_flops=self._with_flops,
                            profile_memory=self._profile_memory, top_level_events_only=top_level_events_only,
                            time_unit=time_unit)

    def __str__(self):
        return self.table()

    def export_chrome_trace(self, path):
        """Write the events as Chrome's trace format (chrome://tracing, Perfetto): one complete ("X") event per
        range, with "[memory]" instant events where a range changed the allocated bytes (profile_memory). A path
        ending in .gz is written gzipped."""
        write_chrome_trace(self, path, self._trace_meta)

    def export_stacks(self, path, metric="self_cpu_time_total"):
        """Flame-graph input: one line per event with a recorded stack (with_stack=True), the frames outermost
        first joined by ';', then the metric (an event attribute, e.g. self_cpu_time_total) as an integer."""
        attr = metric.replace("cuda", "device")
        with open(path, "w") as f:
            for e in self:
                if e.stack:
                    value = int(getattr(e, attr))
                    if value > 0:
                        f.write(";".join(reversed(e.stack)) + " " + str(value) + "\n")


def _format_time(us):
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def _format_share(part, total):
    if total == 0:
        return "NaN" if part else "0.00%"
    return f"{part * 100.0 / total:.2f}%"


def _time_text(us, unit):
    return {"s": f"{us / 1e6:.3f}s", "ms": f"{us / 1e3:.3f}ms", "us": f"{us:.3f}us"}.get(unit, _format_time(us))


def _sort_key(sort_by):
    attr = sort_by.replace("cuda", "device").replace("xpu", "device").replace("privateuse1", "device")
    return lambda e: getattr(e, attr)


def _build_table(events, *, sort_by, header, row_limit, max_src_column_width, max_name_column_width,
                 max_shapes_column_width, with_flops, profile_memory, top_level_events_only, time_unit):
    if not events:
        return ""
    use_device = events[0].use_device
    has_device_mem = any(e.self_device_memory_usage > 0 for e in events)
    has_shapes = any(e.input_shapes for e in events)
    if sort_by is not None:
        events = sorted(events, key=_sort_key(sort_by), reverse=True)
    name_width = max(len(e.key) for e in events) + 4
    if max_name_column_width is not None:
        name_width = min(name_width, max_name_column_width)
    shapes_width = max(len(str(e.input_shapes)) for e in events) + 4
    if max_shapes_column_width is not None:
        shapes_width = min(shapes_width, max_shapes_column_width)
    stacks = [e.stack for e in events if e.stack]
    src_width = None
    if stacks:
        src_width = max(len(entry) for s in stacks for entry in s) + 4
        if max_src_column_width is not None:
            src_width = min(src_width, max_src_column_width)
    device = (use_device or "").upper()
    show_device_mem = profile_memory and use_device and has_device_mem
    headers = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]
    if profile_memory:
        headers += ["CPU Mem", "Self CPU Mem"]
        if show_device_mem:
            headers += [f"{device} Mem", f"Self {device} Mem"]
    headers.append("# of Calls")
    widths = [name_width] + [12] * (len(headers) - 1)
    aligns = [">"] * len(headers)
    if has_shapes:
        headers.append("Input Shapes")
        widths.append(shapes_width)
        aligns.append(">")
    if stacks:
        headers.append("Source Location")
        widths.append(src_width)
        aligns.append("<")
    flops_scale = None
    if with_flops:
        positive = [e.flops for e in events if e.flops > 0]
        if positive:
            names = ["FLOPs", "KFLOPs", "MFLOPs", "GFLOPs", "TFLOPs", "PFLOPs"]
            level = int(max(0, min(math.log10(min(positive)) / 3, len(names) - 1)))
            flops_scale = 10.0 ** (-3 * level)
            headers.append(f"Total {names[level]}")
            widths.append(12)
            aligns.append(">")
    row_format = "".join("{:" + a + str(w) + "}  " for a, w in zip(aligns, widths))
    sep = "".join("-" * w + "  " for w in widths)
    line_length = sum(w + 2 for w in widths) - 2
    total_self = sum(e.self_cpu_time_total for e in events)

    lines = []
    if header is not None:
        lines += ["=" * line_length, header]
    if top_level_events_only:
        lines += ["=" * line_length, "This report only display top-level ops statistics"]
    lines += [sep, row_format.format(*headers), sep]
    shown = 0
    for e in events:
        if shown == row_limit:
            break
        if top_level_events_only and e.cpu_parent is not None:
            continue
        shown += 1
        name = e.key
        if max_name_column_width is not None and len(name) >= max_name_column_width - 3:
            name = name[:max_name_column_width - 3] + "..."
        row = [name, _format_share(e.self_cpu_time_total, total_self), _time_text(e.self_cpu_time_total, time_unit),
               _format_share(e.cpu_time_total, total_self), _time_text(e.cpu_time_total, time_unit),
               _time_text(e.cpu_time, time_unit)]
        if profile_memory:
            row += [format_bytes(e.cpu_memory_usage), format_bytes(e.self_cpu_memory_usage)]
            if show_device_mem:
                row += [format_bytes(e.device_memory_usage), format_bytes(e.self_device_memory_usage)]
        row.append(e.count)
        if has_shapes:
            row.append(str(e.input_shapes)[:shapes_width])
        if stacks:
            src = e.stack[0] if e.stack else ""
            if len(src) > src_width:  # keep the end of the path: the file and line
                src = "..." + src[len(src) - src_width + 3:]
            row.append(src)
        if flops_scale is not None:
            row.append("--" if e.flops <= 0 else f"{e.flops * flops_scale:8.3f}")
        lines.append(row_format.format(*[str(v) for v in row]))
    lines += [sep, f"Self CPU time total: {_format_time(total_self)}"]
    return "\n".join(lines) + "\n"


def write_chrome_trace(events, path, meta):
    """The trace JSON of a list of FunctionEvents (see EventList.export_chrome_trace)."""
    pid = os.getpid()
    trace = []
    threads = sorted({e.thread for e in events})
    trace.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "python"}})
    for tid in threads:
        trace.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": f"thread {tid}"}})
    for e in events:
        args = {"External id": e.id}
        if e.input_shapes:
            args["Input Dims"] = e.input_shapes
        if e.stack:
            args["Call stack"] = ";".join(e.stack)
        if e.flops:
            args["flops"] = e.flops
        trace.append({"ph": "X", "cat": "user_annotation" if e.is_user_annotation else "cpu_op",
                      "name": getattr(e, "trace_name", e.name),
                      "pid": pid, "tid": e.thread, "ts": e.time_range.start, "dur": e.cpu_time_total,
                      "args": args})
        for dev, used, total in getattr(e, "_memory_marks", ()):
            trace.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": pid,
                          "tid": e.thread, "ts": e.time_range.end,
                          "args": {"Device Type": 0 if dev == "cpu" else 1, "Device Id": -1 if dev == "cpu" else 0,
                                   "Bytes": used, "Total Allocated": total}})
    doc = {"schemaVersion": 1, "deviceProperties": [], "displayTimeUnit": "ms", "traceEvents": trace}
    doc.update(meta)
    text = json.dumps(doc)
    if str(path).endswith(".gz"):
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        with open(path, "w") as f:
            f.write(text)
