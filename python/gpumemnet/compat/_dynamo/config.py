"""torch._dynamo.config: the compiler's settings, which scripts set at import (k-diffusion's suppress_errors,
cache_size_limit for models compiled per shape). gpumemnet never compiles: the settings are kept, with PyTorch's
defaults, and read back, and change nothing; patch() sets some for a block or a function, as PyTorch's."""
import contextlib

suppress_errors = False
verbose = False
cache_size_limit = recompile_limit = 8
accumulated_cache_size_limit = 256
optimize_ddp = True
capture_scalar_outputs = False
capture_dynamic_output_shape_ops = False
automatic_dynamic_shapes = True
assume_static_by_default = True
specialize_int = False
dynamic_shapes = True
inline_inbuilt_nn_modules = True


@contextlib.contextmanager
def _patched(here, changes):
    saved = {k: here[k] for k in changes if k in here}
    here.update(changes)
    try:
        yield
    finally:
        for k in changes:
            if k in saved:
                here[k] = saved[k]
            else:
                del here[k]


def _patch_module(here, arg, value, kwargs):
    """A settings module's patch (here: its globals()): the changes set inside the block, restored after."""
    changes = dict(kwargs)
    if isinstance(arg, dict):
        changes.update(arg)
    elif arg is not None:
        changes[arg] = value
    return _patched(here, changes)


def patch(arg=None, value=None, **kwargs):
    """patch("name", value), patch({"name": value}) or patch(name=value): a context manager that is also a
    decorator (contextlib's), setting the values inside and restoring them after."""
    return _patch_module(globals(), arg, value, kwargs)
