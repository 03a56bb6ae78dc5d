"""torch.compiler: gpumemnet does not compile graphs; code runs eagerly, as `torch.compiler.disable` asks, and the
decorators and switches that steer PyTorch's compiler (allow_in_graph, set_stance, ...) hand back what they get."""
import contextlib


def is_compiling():
    return False


is_dynamo_compiling = is_compiling


def is_exporting():
    return False


def disable(fn=None, recursive=True):
    return fn if fn is not None else (lambda f: f)


def allow_in_graph(fn):
    return fn


assume_constant_result = nonstrict_trace = wrap_numpy = allow_in_graph


def substitute_in_graph(original_fn, *, can_constant_fold_through=False, skip_signature_check=False):
    return lambda fn: fn


def reset():
    pass


cudagraph_mark_step_begin = reset


def list_backends(exclude_tags=("debug", "experimental")):
    return []


@contextlib.contextmanager
def _no_stance():
    yield


def set_stance(stance="default", *, skip_guard_eval_unsafe=False, force_backend=None):
    """A context manager (and decorator) that changes nothing: there is no compiler whose stance it could set."""
    return _no_stance()
