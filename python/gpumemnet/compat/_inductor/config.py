"""torch._inductor.config: the compiler backend's settings (gpt-fast and modded-nanogpt set some at their top:
coordinate_descent_tuning, triton.unique_kernel_names, fx_graph_cache). gpumemnet never compiles: the settings
are kept with PyTorch's defaults, read back, and change nothing; a setting PyTorch lacks is refused on reading as
a module attribute is, and patch() sets some for a block or a function, as torch._dynamo.config's."""
import types

from .._dynamo.config import _patch_module

coordinate_descent_tuning = False
coordinate_descent_check_all_directions = False
epilogue_fusion = True
fx_graph_cache = True
fx_graph_remote_cache = None
max_autotune = False
max_autotune_gemm = False
max_autotune_pointwise = False
freezing = False
force_fuse_int_mm_with_mul = False
use_mixed_mm = True
debug = False
benchmark_kernel = False
aggressive_fusion = False
shape_padding = True
layout_optimization = True
conv_1x1_as_mm = False
split_reductions = True
compile_threads = 1
emulate_precision_casts = False
triton = types.SimpleNamespace(cudagraphs=False, cudagraph_trees=True, unique_kernel_names=True,
                               descriptive_names="original_aten", persistent_reductions=True, divisible_by_16=True,
                               use_block_ptr=False, multi_kernel=0)
cpp = types.SimpleNamespace(threads=-1, simdlen=None, enable_kernel_profile=False, weight_prepack=True)
aot_inductor = types.SimpleNamespace(output_path="", debug_compile=False)
trace = types.SimpleNamespace(enabled=False, debug_log=False, graph_diagram=False)


def patch(arg=None, value=None, **kwargs):
    """patch("name", value), patch({"name": value}) or patch(name=value), as a context manager or a decorator."""
    return _patch_module(globals(), arg, value, kwargs)
