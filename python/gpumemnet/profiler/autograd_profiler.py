"""torch.autograd.profiler's names (layer 3): the older profile context manager (enabled, use_device=...) over
gm.profiler's recorder, with record_function, EventList, FunctionEvent shared with gm.profiler. For
gm.autograd.profiler (which the package face wires to this module's names)."""
from ._events import DeviceType, EventList, FunctionEvent, FunctionEventAvg
from ._recorder import record_function
from . import ProfilerActivity, profile as _profile

__all__ = ["profile", "record_function", "EventList", "FunctionEvent", "FunctionEventAvg", "DeviceType", "emit_nvtx",
           "emit_itt"]


class profile:
    """torch.autograd.profiler.profile: records every op while the block runs (enabled=False: nothing), then
    table(), key_averages(), function_events, export_chrome_trace(path), export_stacks(path), total_average().
    use_device="cuda" counts CUDA memory too (profile_memory=True); the options are gm.profiler.profile's."""

    def __init__(self, enabled=True, *, use_device=None, record_shapes=False, with_flops=False, profile_memory=False,
                 with_stack=False, with_modules=False, use_kineto=False, use_cpu=True, experimental_config=None,
                 acc_events=False, custom_trace_id_callback=None, post_processing_timeout_s=None,
                 activity_filters=None, _profiler_extensions=None):
        self.enabled = enabled
        self.entered = False
        self._inner = None
        if not enabled:
            return
        if not use_cpu and not (use_kineto and use_device):
            raise AssertionError("Device-only events supported only with Kineto (use_kineto=True)")
        if use_device not in (None, "cuda"):
            raise AssertionError(f"Legacy {use_device} profiling is not supported: gpumemnet profiles the CPU and "
                                 "CUDA (use_device='cuda')")
        if post_processing_timeout_s is not None and post_processing_timeout_s < 0:
            raise ValueError("post_processing_timeout_s must be non-negative")
        activities = ([ProfilerActivity.CPU] if use_cpu else []) + \
            ([ProfilerActivity.CUDA] if use_device == "cuda" else [])
        self.use_device, self.profile_memory, self.with_stack = use_device, profile_memory, with_stack
        self._inner = _profile(activities=activities, record_shapes=record_shapes, profile_memory=profile_memory,
                               with_stack=with_stack, with_flops=with_flops, with_modules=with_modules,
                               experimental_config=experimental_config, acc_events=acc_events,
                               custom_trace_id_callback=custom_trace_id_callback,
                               post_processing_timeout_s=post_processing_timeout_s)

    def __enter__(self):
        if not self.enabled:
            return self
        if self.entered:
            raise RuntimeError("Profiler context manager is not reentrant")
        self.entered = True
        self._inner.start()
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        if self.enabled:
            self._inner.stop()
        return False

    def _results(self):
        if not self.enabled:
            raise AssertionError("Expected profiling results: this profile was made with enabled=False")
        if self._inner.profiler is None:  # not run yet: no events
            return EventList(use_device=self.use_device, profile_memory=self.profile_memory)
        return self._inner.events()

    @property
    def function_events(self):
        return self._results()

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75, max_name_column_width=55,
              max_shapes_column_width=80, header=None, top_level_events_only=False):
        return self._results().table(sort_by=sort_by, row_limit=row_limit,
                                     max_src_column_width=max_src_column_width,
                                     max_name_column_width=max_name_column_width,
                                     max_shapes_column_width=max_shapes_column_width, header=header,
                                     top_level_events_only=top_level_events_only)

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0, group_by_overload_name=False):
        return self._results().key_averages(group_by_input_shape, group_by_stack_n, group_by_overload_name)

    def total_average(self):
        return self._results().total_average()

    @property
    def self_cpu_time_total(self):
        return self._results().self_cpu_time_total

    def export_chrome_trace(self, path):
        self._results().export_chrome_trace(path)

    def export_stacks(self, path, metric="self_cpu_time_total"):
        if not self.with_stack:
            raise AssertionError("export_stacks() requires with_stack=True")
        self._results().export_stacks(path, metric)

    def __str__(self):
        return self.table()


class emit_nvtx:  # noqa: N801 (PyTorch's name)
    """NVTX ranges around each op for NVIDIA's profilers: gpumemnet emits none, so this context changes nothing."""

    def __init__(self, enabled=True, record_shapes=False):
        self.enabled = enabled

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


emit_itt = emit_nvtx
