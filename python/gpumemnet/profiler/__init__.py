"""gm.profiler (layer 3): torch.profiler. Where a step's time and memory go, op by op.

    with gm.profiler.profile(profile_memory=True, record_shapes=True) as prof:
        with gm.profiler.record_function("forward"):
            loss = model(x).sum()
        loss.backward()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10))
    prof.export_chrome_trace("trace.json")

Every op of gpumemnet's core is timed while a profile records (gm::matmul, gm::conv2d, gm::add, ...; the backward
walk is autograd::engine::backward, module forwards are nn.Module: ... rows with with_modules=True), with exact
nesting: an op's self time is its time minus its children's. Memory columns (profile_memory=True) are the
allocator's own byte counts (gm.memory.memory_allocated: the blocks live tensors hold), per range: what it
allocated minus what it freed. Times are host times: CUDA work is asynchronous and its kernels are not timed
here, so there are no CUDA time columns (CUDA memory is counted, exactly). Schedules, ProfilerAction, step()
and on_trace_ready behave as PyTorch's."""
import enum
import json
import os
import socket
import time
import warnings
from functools import partial

from ..cuda import is_available as _cuda_available
from ._events import DeviceType, EventList, FunctionEvent, write_chrome_trace
from ._recorder import _memory_devices, _recorder, record_function

__all__ = ["profile", "schedule", "kineto_available", "supported_activities", "tensorboard_trace_handler", "ProfilerAction",
           "ProfilerActivity", "DeviceType", "record_function"]


class ProfilerActivity(enum.Enum):
    """What to profile: CPU (host ranges and the memory of the host) and CUDA (device memory too). The others
    are PyTorch's names for devices gpumemnet has not."""
    CPU = 0
    XPU = 1
    CUDA = 2
    HPU = 3
    MTIA = 4
    PrivateUse1 = 5

    def __int__(self):
        return self.value


class ProfilerAction(enum.Enum):
    """What a schedule asks of a step: nothing, warm up, record, or record and hand the trace over at its end."""
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3
    DEVICE_STOPPED = 4


def kineto_available():
    """PyTorch's Kineto tracer is not in gpumemnet (its profiler records its own events)."""
    return False


def supported_activities():
    """{CPU}, and CUDA where a CUDA device is present."""
    return {ProfilerActivity.CPU, ProfilerActivity.CUDA} if _cuda_available() else {ProfilerActivity.CPU}


def schedule(*, wait, warmup, active, repeat=0, skip_first=0, skip_first_wait=0):
    """The action of each step: skip_first steps of NONE, then cycles of `wait` NONE, `warmup` WARMUP and `active`
    recording steps (RECORD, the last one RECORD_AND_SAVE), `repeat` times (0: for ever). skip_first_wait != 0
    leaves out the first cycle's wait."""

    def schedule_fn(step):
        if step < 0:
            raise AssertionError(f"Step must be non-negative. Got {step}.")
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if skip_first_wait != 0:
            step += wait
        cycle = wait + warmup + active
        if repeat > 0 and step / cycle >= repeat:
            return ProfilerAction.NONE
        pos = step % cycle
        if pos < wait:
            return ProfilerAction.NONE
        if pos < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if pos < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise AssertionError(f"Invalid profiler schedule arguments. Got wait={wait} (need >= 0), warmup={warmup} "
                             f"(need >= 0), active={active} (need > 0), repeat={repeat} (need >= 0), "
                             f"skip_first={skip_first} (need >= 0).")
    if warmup == 0:
        warnings.warn("Profiler won't be using warmup, this can skew profiler results", stacklevel=2)
    return schedule_fn


def _record_every_step(_):
    return ProfilerAction.RECORD


def tensorboard_trace_handler(dir_name, worker_name=None, use_gzip=False, use_python_export=False):
    """An on_trace_ready that writes each cycle's trace into dir_name as <worker>.<time_ns>.pt.trace.json(.gz),
    the files TensorBoard's profiler plugin reads; worker defaults to <hostname>_<pid>. (gpumemnet always
    exports from Python: use_python_export changes nothing.)"""

    def handler_fn(prof):
        nonlocal worker_name
        if not os.path.isdir(dir_name):
            try:
                os.makedirs(dir_name, exist_ok=True)
            except Exception as e:
                raise RuntimeError(f"Can't create directory: {dir_name}") from e
        if not worker_name:
            worker_name = f"{socket.gethostname()}_{os.getpid()}"
        name = f"{worker_name}.{time.time_ns()}.pt.trace.json" + (".gz" if use_gzip else "")
        prof.export_chrome_trace(os.path.join(dir_name, name))

    return handler_fn


class _Session:
    """One recording: the frames it collects and the options the recorder reads."""

    def __init__(self, prof):
        self.record_shapes, self.with_stack = prof.record_shapes, prof.with_stack
        self.with_flops, self.with_modules = prof.with_flops, prof.with_modules
        devices = []
        if prof.profile_memory:
            devices.append("cpu")
            if prof.use_device == "cuda" and _cuda_available():
                devices.append("cuda")
        self.memory_devices = tuple(devices)
        self.frames = []
        self.recording = False

    def events(self, use_device, first_id):
        """The frames as FunctionEvents with their parents and children, in the order they opened."""
        frames = sorted(self.frames, key=lambda f: f.seq)
        mine = {id(f) for f in frames}
        events, by_frame = [], {}
        for i, f in enumerate(frames):
            used = _bytes_used(f)
            e = FunctionEvent(first_id + i, f.name, f.thread, f.start / 1e3, f.end / 1e3, input_shapes=f.shapes,
                              stack=f.stack, flops=f.flops,
                              cpu_memory_usage=used.get("cpu", 0), device_memory_usage=used.get("cuda", 0),
                              is_user_annotation=f.user, use_device=use_device, sequence_nr=f.seq)
            by_frame[id(f)] = e
            parent = f.parent
            while parent is not None and id(parent) not in mine:  # an ancestor opened before this cycle
                parent = parent.parent
            if parent is not None:
                e.set_cpu_parent(by_frame[id(parent)])
                by_frame[id(parent)].append_cpu_child(e)
            events.append(e)
        for f, e in zip(frames, events):  # the trace's [memory] marks: what a range itself allocated, the total
            e._memory_marks = []
            if f.mem0 is not None and f.mem1 is not None:
                for d, total in zip(_memory_devices(f.sessions), f.mem1):
                    own = e.self_cpu_memory_usage if d == "cpu" else e.self_device_memory_usage
                    if own:
                        e._memory_marks.append((d, own, total))
        return events


def _bytes_used(frame):
    """{device: bytes allocated minus bytes freed while the range ran}, where memory was profiled."""
    if frame.mem0 is None or frame.mem1 is None:
        return {}
    return {d: b - a for d, a, b in zip(_memory_devices(frame.sessions), frame.mem0, frame.mem1)}


class profile:
    """torch.profiler.profile: records while active (a `with` block, or start()/stop()), following `schedule`
    step by step (step() marks each step's end); on_trace_ready(prof) is called at the end of each recorded
    cycle (and at stop). Results: events(), key_averages().table(...), export_chrome_trace(path),
    export_stacks(path). activities: ProfilerActivity.CPU and/or CUDA (default: what supported_activities says);
    record_shapes adds the inputs' shapes, profile_memory the allocator's bytes per range, with_stack the user's
    source lines, with_flops the FLOPs of matmul / linear / conv2d / add-mul, with_modules a range per module
    forward. experimental_config configures PyTorch's Kineto tracer, which gpumemnet has not: ignored with a
    warning; execution_trace_observer is refused (NotImplementedError)."""

    def __init__(self, *, activities=None, schedule=None, on_trace_ready=None, record_shapes=False,
                 profile_memory=False, with_stack=False, with_flops=False, with_modules=False,
                 experimental_config=None, execution_trace_observer=None, acc_events=False,
                 custom_trace_id_callback=None, post_processing_timeout_s=None):
        if activities is not None:
            chosen = set()
            for a in activities:
                if isinstance(a, dict):
                    chosen.update(k for k in a if isinstance(k, ProfilerActivity))
                elif isinstance(a, ProfilerActivity):
                    chosen.add(a)
                else:
                    raise TypeError(f"Expected ProfilerActivity or dict, got {type(a)}")
        else:
            chosen = supported_activities()
        if not chosen:
            raise AssertionError("No valid profiler activities found")
        if schedule is not None and not callable(schedule):
            raise TypeError(f"profile: schedule must be a callable (step -> ProfilerAction), e.g. "
                            f"gm.profiler.schedule(...), got {type(schedule).__name__}")
        if on_trace_ready is not None and not callable(on_trace_ready):
            raise TypeError(f"profile: on_trace_ready must be a callable taking the profile, got "
                            f"{type(on_trace_ready).__name__}")
        if execution_trace_observer is not None:
            raise NotImplementedError("profile: execution_trace_observer records PyTorch's execution graph "
                                      "(ExecutionTraceObserver), which gpumemnet does not have")
        if experimental_config is not None:
            warnings.warn("profile: experimental_config configures PyTorch's Kineto tracer, which gpumemnet does "
                          "not use; it is ignored", UserWarning, stacklevel=2)
        self.activities = chosen
        self.use_device = "cuda" if ProfilerActivity.CUDA in chosen else None
        self.record_shapes, self.profile_memory, self.with_stack = record_shapes, profile_memory, with_stack
        self.with_flops, self.with_modules, self.acc_events = with_flops, with_modules, acc_events
        self.custom_trace_id_callback = custom_trace_id_callback
        self.post_processing_timeout_s = post_processing_timeout_s
        self.record_steps = schedule is not None
        self.schedule = schedule if schedule is not None else _record_every_step
        self.on_trace_ready = on_trace_ready
        self.step_num = 0
        self.step_rec_fn = None
        self.profiler = None      # the session of the current cycle, once prepared (PyTorch's name)
        self._events = None
        self._next_id = 1
        self._metadata = {}
        self._trace_id = None
        action = self.schedule(self.step_num)
        if action == ProfilerAction.DEVICE_STOPPED:
            raise ValueError("ProfilerAction.DEVICE_STOPPED is set internally by the profiler and must not be "
                             "returned by a user-provided schedule")
        self.current_action = action
        A = ProfilerAction
        bad = "Incorrect schedule: {} followed by {}"
        self.action_map = {
            (A.NONE, A.NONE): [], (A.NONE, A.WARMUP): [self.prepare_trace],
            (A.NONE, A.RECORD): [self.prepare_trace, self.start_trace],
            (A.NONE, A.RECORD_AND_SAVE): [self.prepare_trace, self.start_trace],
            (A.WARMUP, A.NONE): [partial(warnings.warn, bad.format("WARMUP", "NONE")), self.start_trace,
                                 self.stop_trace],
            (A.WARMUP, A.WARMUP): [], (A.WARMUP, A.RECORD): [self.start_trace],
            (A.WARMUP, A.RECORD_AND_SAVE): [self.start_trace],
            (A.RECORD, A.NONE): [partial(warnings.warn, bad.format("RECORD", "NONE")), self.stop_trace],
            (A.RECORD, A.WARMUP): [partial(warnings.warn, bad.format("RECORD", "WARMUP")), self.stop_trace],
            (A.RECORD, A.RECORD): [], (A.RECORD, A.RECORD_AND_SAVE): [],
            (A.RECORD_AND_SAVE, A.NONE): [self.stop_trace, self._trace_ready],
            (A.RECORD_AND_SAVE, A.WARMUP): [self.stop_trace, self._trace_ready, self.prepare_trace],
            (A.RECORD_AND_SAVE, A.RECORD): [self.stop_trace, self._trace_ready, self.prepare_trace,
                                            self.start_trace],
            (A.RECORD_AND_SAVE, A.RECORD_AND_SAVE): [self.stop_trace, self._trace_ready, self.prepare_trace,
                                                     self.start_trace],
            (A.WARMUP, None): [self.start_trace, self.stop_trace],
            (A.RECORD, None): [self.stop_trace, self._trace_ready],
            (A.RECORD_AND_SAVE, None): [self.stop_trace, self._trace_ready],
        }

    # ---- the state machine (PyTorch's) ---------------------------------------------------------------------
    def __enter__(self):
        self.start()
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        self.stop()
        return False

    def start(self):
        self._transit_action(ProfilerAction.NONE, self.current_action)
        if self.record_steps:
            self.step_rec_fn = record_function(f"ProfilerStep#{self.step_num}")
            self.step_rec_fn.__enter__()

    def stop(self):
        if self.record_steps and self.step_rec_fn:
            self.step_rec_fn.__exit__(None, None, None)
            self.step_rec_fn = None
        self._transit_action(self.current_action, None)

    def step(self):
        """The current step ends and the next begins: the schedule's action for it takes effect."""
        if self.record_steps and self.step_rec_fn:
            self.step_rec_fn.__exit__(None, None, None)
            self.step_rec_fn = None
        prev = self.current_action
        action = self.schedule(self.step_num + 1)
        if action == ProfilerAction.DEVICE_STOPPED:
            raise ValueError("ProfilerAction.DEVICE_STOPPED is set internally by the profiler and must not be "
                             "returned by a user-provided schedule")
        self.step_num += 1
        self.current_action = action
        self._transit_action(prev, action)
        if self.record_steps:
            self.step_rec_fn = record_function(f"ProfilerStep#{self.step_num}")
            self.step_rec_fn.__enter__()

    def _transit_action(self, prev, current):
        for action in self.action_map.get((prev, current), ()):
            action()

    def _trace_ready(self):
        if self.on_trace_ready:
            self.on_trace_ready(self)

    def prepare_trace(self):
        """A new cycle: its own session (the events of the last cycle stay readable until it stops)."""
        if self.profiler is not None and self.profiler.recording:
            self.stop_trace()
        self.profiler = _Session(self)
        if self.custom_trace_id_callback is not None:
            self._trace_id = self.custom_trace_id_callback()

    def start_trace(self):
        if self.profiler is None:
            self.prepare_trace()
        if not self.profiler.recording:
            self.profiler.frames = []  # each start records afresh, as PyTorch's: a stopped recording is over
            self.profiler.recording = True
            _recorder.start(self.profiler)

    def stop_trace(self):
        session = self.profiler
        if session is None or not session.recording:
            return
        _recorder.stop(session)
        session.recording = False
        new = session.events(self.use_device, self._next_id)
        self._next_id += len(new)
        previous = list(self._events) if (self.acc_events and self._events is not None) else []
        self._events = EventList(previous + new, use_device=self.use_device, profile_memory=self.profile_memory,
                                 with_flops=self.with_flops, trace_meta=self._trace_meta())

    # ---- results ------------------------------------------------------------------------------------------
    def events(self):
        """The ranges of the last recorded cycle (all cycles with acc_events=True), as an EventList."""
        if self.profiler is None:
            raise AssertionError("Profiler must be initialized before accessing events")
        return self._events if self._events is not None else EventList(use_device=self.use_device)

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0, group_by_overload_name=False):
        """The events summed per name (and per input shapes / innermost stack frames where asked)."""
        if self.profiler is None:
            raise AssertionError("Profiler must be initialized before getting key averages")
        return self.events().key_averages(group_by_input_shape, group_by_stack_n, group_by_overload_name)

    def export_chrome_trace(self, path):
        """The last cycle as Chrome trace JSON (gzipped where path ends in .gz)."""
        if self.profiler is None:
            raise AssertionError("Profiler must be initialized before exporting chrome trace")
        write_chrome_trace(self.events(), path, self._trace_meta())

    def export_stacks(self, path, metric="self_cpu_time_total"):
        """Flame-graph lines of the events with stacks (with_stack=True): frames outermost first, ';'-joined,
        then the metric."""
        if self.profiler is None:
            raise AssertionError("Profiler must be initialized before exporting stacks")
        self.events().export_stacks(path, metric)

    def add_metadata(self, key, value):
        """A string entry in the exported trace's top level."""
        self._metadata[key] = str(value)

    def add_metadata_json(self, key, value):
        """A JSON entry (value is JSON text) in the exported trace's top level."""
        self._metadata[key] = json.loads(value)

    def set_custom_trace_id_callback(self, callback):
        self.custom_trace_id_callback = callback

    def get_trace_id(self):
        return self._trace_id if self.profiler is not None else None

    def _trace_meta(self):
        meta = dict(self._metadata)
        if self._trace_id is not None:
            meta["trace_id"] = self._trace_id
        return meta
