"""Every public callable has at least one case in error_inputs.py's table, or a reasoned exemption here.

The public API is enumerated mechanically (dir() of gpumemnet, nn.functional, nn, optim, optim.lr_scheduler,
utils.data, and the methods of Tensor); which callables a case reaches is recorded, not declared: each case runs
once on the CPU under sys.setprofile, and the public function, method or class whose call raised (the last call
the case's lambda made: the exception leaves the lambda from it) counts as covered (a class by any method called
on an instance of exactly that class; a C method of Tensor, which the profiler does not see, from the lambda's
code: _c_method). Operators (`a + b`, `x[i]`) share their checks with the named methods and are not listed."""
import dis
import re
import sys
import types

import pytest

import gpumemnet as gm
import gpumemnet.nn.functional as F
from gpumemnet._core.subclass_dispatch import WRAPPER_CODE
from error_inputs import CASES, GM
from error_inputs_api import EDGE
from error_inputs_extra import EXEMPT as EXTRA_EXEMPT

NAMESPACES = {"gm": gm, "F": F, "nn": gm.nn, "optim": gm.optim, "lr_scheduler": gm.optim.lr_scheduler,
              "data": gm.utils.data}

# Callables that accept any input, or take none, so no call of them is an error; each with its reason.
ANY_INPUT = "accepts any object (a predicate or a query that never raises)"
NO_ARGS = "takes no arguments: there is no bad input to give"
FLAG = "a context manager / flag over a bool-like value: any object is truthy or not, as in PyTorch"
BASE = "an abstract base or a namespace class, subclassed by users; nothing to validate at construction"
COPY = "a copy, view or conversion of an existing tensor that is valid for every tensor"
HOOK = "registers a user callable; PyTorch checks nothing more at registration either"
EXEMPT = {
    "gm.is_tensor": ANY_INPUT, "gm.is_grad_enabled": NO_ARGS, "gm.get_default_dtype": NO_ARGS,
    "gm.get_num_threads": NO_ARGS, "gm.initial_seed": NO_ARGS, "gm.seed": NO_ARGS, "gm.get_rng_state": NO_ARGS,
    "gm.no_grad": NO_ARGS, "gm.enable_grad": NO_ARGS, "gm.inference_mode": FLAG, "gm.set_grad_enabled": FLAG,
    "gm.passive_openmp_waits": NO_ARGS, "gm.is_anomaly_enabled": NO_ARGS, "gm.is_anomaly_check_nan_enabled": NO_ARGS, "gm.preload_openblas": NO_ARGS,
    "gm.compile": "returns the model unchanged (a stand-in for torch.compile); any object is accepted",
    "gm.dtype": BASE, "gm.memory_format": BASE, "gm.summary": "gm.memory's; tested there",
    "gm.as_torch": "the drop-in switch (gm.dropin), tested in tests/test_dropin*.py",
    "nn.Identity": "accepts and ignores any arguments, as torch.nn.Identity",
    "data.Dataset": BASE, "data.IterableDataset": BASE, "data.Sampler": BASE,
    "data.get_worker_info": NO_ARGS, "optim.Optimizer": BASE, "lr_scheduler.LRScheduler": BASE,
    "optim.NoGradientWarning": "a warning class",
    "Tensor.clone": COPY, "Tensor.contiguous": COPY, "Tensor.cpu": COPY, "Tensor.detach": COPY,
    "Tensor.detach_": COPY, "Tensor.dim": NO_ARGS, "Tensor.element_size": NO_ARGS, "Tensor.is_contiguous": COPY,
    "Tensor.is_floating_point": NO_ARGS, "Tensor.is_pinned": NO_ARGS, "Tensor.numel": NO_ARGS,
    "Tensor.tolist": COPY, "Tensor.numpy": COPY, "Tensor.float": COPY, "Tensor.double": COPY, "Tensor.half": COPY,
    "Tensor.bfloat16": COPY, "Tensor.long": COPY, "Tensor.int": COPY, "Tensor.short": COPY, "Tensor.char": COPY,
    "Tensor.byte": COPY, "Tensor.bool": COPY, "Tensor.register_hook": HOOK,
    "Tensor.register_post_accumulate_grad_hook": HOOK, "Tensor.zero_": COPY,
    "nn.register_module_forward_hook": HOOK,
    "Tensor.cuda": "refused only where CUDA is missing, and the table runs on builds with and without it (the "
                   "CPU-only build refuses it: tests/test_cuda_*.py)",
    "Tensor.pin_memory": "valid for every CPU tensor; where CUDA is missing it is refused as in PyTorch "
                         "(tests/test_cuda_*.py)",
    "data.default_convert": "converts what it can and returns anything else unchanged, as PyTorch's",
    "nn.register_module_forward_pre_hook": HOOK,
    "gm.get_float32_matmul_precision": NO_ARGS, "gm.are_deterministic_algorithms_enabled": NO_ARGS,
    "gm.is_deterministic_algorithms_warn_only_enabled": NO_ARGS, "gm.is_inference_mode_enabled": NO_ARGS,
}
EXEMPT.update(EXTRA_EXEMPT)  # the topic files error_inputs_<topic>.py keep their own


def _public():
    """{"ns.name": object} for every public callable."""
    out = {}
    for ns_name, ns in NAMESPACES.items():
        for n in dir(ns):
            obj = getattr(ns, n)
            if n.startswith("_") or isinstance(obj, (types.ModuleType, gm.dtype)) or not callable(obj):
                continue
            if isinstance(obj, type) and issubclass(obj, BaseException) and ns_name == "gm":
                continue  # gm.OutOfMemoryError, gm.ArgumentError: raised, not called
            out[f"{ns_name}.{n}"] = obj
    for n in dir(gm.Tensor):
        if not n.startswith("_") and callable(getattr(gm.Tensor, n)):
            out[f"Tensor.{n}"] = getattr(gm.Tensor, n)
    return out


PUBLIC = _public()


def _index(public):
    """Ways a call is recognised: by code object (Python functions), by C function identity, by class."""
    by_code, by_obj, by_class = {}, {}, {}
    for key, obj in public.items():
        if isinstance(obj, type):
            by_class.setdefault(obj, set()).add(key)
            continue
        fn = getattr(obj, "__func__", obj)
        fn = fn.__wrapped__ if getattr(fn, "_dispatching", False) else fn  # (wrapped for Tensor subclasses)
        code = getattr(fn, "__code__", None)
        if code is not None:
            by_code.setdefault(code, set()).add(key)
        else:
            by_obj.setdefault(id(fn), set()).add(key)
    return by_code, by_obj, by_class


def _c_method(fn):
    """A method of TensorBase written in C is a method descriptor, which CPython 3.11's profiler does not report,
    and a Python method called with arguments it does not take raises before its frame exists: when the profile
    saw no public call, read the method from the lambda instead, the last Tensor method it names (t.abs(...)) or,
    in a family, the method name bound as a default (lambda d, l, op=op: getattr(t, op)(...))."""
    names = [i.argval for i in dis.get_instructions(fn.__code__) if i.opname in ("LOAD_METHOD", "LOAD_ATTR")]
    names += [v for v in (fn.__defaults__ or ()) if isinstance(v, str)]
    found = [n for n in names if f"Tensor.{n}" in PUBLIC]
    return {f"Tensor.{found[-1]}"} if found else set()


def _covered(cases):
    by_code, by_obj, by_class = _index(PUBLIC)
    hit, last = set(), [set()]

    def direct(frame):
        while frame is not None and frame.f_code is WRAPPER_CODE:  # a public function wrapped for subclasses
            frame = frame.f_back
        return frame is not None and frame.f_code.co_name == "<lambda>" and "error_inputs" in frame.f_code.co_filename

    def profile(frame, event, arg):
        # The exception leaves the lambda from the last call the lambda made: that call is the one that refused.
        if event == "call" and direct(frame.f_back):
            code, keys = frame.f_code, set()
            keys.update(by_code.get(code, ()))
            if "self" in frame.f_locals and code.co_argcount and code.co_varnames[0] == "self":
                keys.update(by_class.get(type(frame.f_locals["self"]), ()))  # a method of exactly that class
            if code.co_name == "__new__" and "cls" in frame.f_locals:
                keys.update(by_class.get(frame.f_locals["cls"], ()))
            last[0] = keys
        elif event == "c_call" and direct(frame):
            keys = set(by_obj.get(id(arg), ()))
            owner = getattr(arg, "__self__", None)
            if isinstance(owner, gm.Tensor):
                keys.add(f"Tensor.{arg.__name__}")
            if isinstance(arg, type):
                keys.update(by_class.get(arg, ()))
            last[0] = keys

    for case in cases:
        last[0] = set()
        sys.setprofile(profile)
        try:
            case.call("cpu", GM) if case.both else case.call("cpu")
        except Exception:  # noqa: BLE001, S110 - test_error_inputs.py checks what each raises
            pass
        finally:
            sys.setprofile(None)
        hit |= last[0] or _c_method(case.call)
    # A name bound to the same object as a covered one (gm.concat is gm.cat) is covered with it.
    for key, obj in PUBLIC.items():
        if any(PUBLIC[h] is obj for h in hit):
            hit.add(key)
    return hit & set(PUBLIC)


def test_every_public_callable_has_an_error_case():
    covered = _covered([c for c in CASES if "cpu" in (c.devices or ("cpu",))])
    missing = sorted(set(PUBLIC) - covered - set(EXEMPT))
    assert not missing, f"{len(missing)} public callables have no error case: {missing}"


def test_exemptions_are_public_and_uncovered():
    """An exemption of a name that no longer exists, or that a case now covers, is stale."""
    covered = _covered([c for c in CASES if "cpu" in (c.devices or ("cpu",))])
    assert not set(EXEMPT) - set(PUBLIC), f"exempt but not public: {sorted(set(EXEMPT) - set(PUBLIC))}"
    assert not set(EXEMPT) & covered, f"exempt but covered: {sorted(set(EXEMPT) & covered)}"


@pytest.mark.parametrize("key", ["F.conv2d", "Tensor.view", "nn.Conv2d", "optim.SGD", "lr_scheduler.StepLR"])
def test_coverage_sees_each_kind_of_call(key):
    """The recorder itself: a Python function, a C method, a module class, an optimizer, a scheduler."""
    assert key in _covered(CASES)


# Issue 17's categories of bad input, each found among the cases' names (or the IEEE/empty table's).
CATEGORIES = {
    "ranks": r"rank|\d-D input|0-d|on a \d-D", "broadcast shapes": r"do(es)? not broadcast|shapes differ",
    "zero-sized": r"zero-height|empty|no output channel|size 0", "negative sizes": r"negative size",
    "bytes overflow 64 bits": r"overflow", "kernel/stride/padding/dilation/groups": r"kernel|stride|padding|"
    r"dilation|groups", "int into float ops": r"int64 input|of int64", "float class indices": r"float class indices",
    "negative integer powers": r"negative int", "mixed devices": r"mixed-device",
    "overlapping views for in-place ops": r"through an expanded view", "NaN/Inf": r"NaN|inf",
    "empty batches": r"empty batch", "self-referencing save": r"contains itself", "deeply nested load": r"nested",
}


@pytest.mark.parametrize("category", sorted(CATEGORIES))
def test_every_category_of_issue_17_is_in_the_table(category):
    names = [c.name for c in CASES] + [name for name, _ in EDGE]
    assert any(re.search(CATEGORIES[category], n) for n in names), f"no case of {category}"
