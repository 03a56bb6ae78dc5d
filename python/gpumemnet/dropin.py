"""Code written for PyTorch runs on gpumemnet: `import torch` (and its submodules) resolve to gpumemnet.

    python -m gpumemnet run train.py [args...]   # a script, unchanged
    gm.as_torch()                                 # in a notebook, before the first `import torch`

`torch.X.Y` is gpumemnet's `gpumemnet.X.Y` (`torch.nn.functional` is `gm.nn.functional`, `torch.cuda.amp` is
`gm.cuda.amp`, ...): the objects are gpumemnet's own, so `isinstance(x, torch.Tensor)` holds for gpumemnet
tensors and a flag set through the alias (`torch.backends.cuda.matmul.allow_tf32 = True`) reaches gpumemnet.

A name gpumemnet lacks fails where it is looked up, with an AttributeError (or, for a module,
ModuleNotFoundError) that says it is a PyTorch name gpumemnet does not have yet, instead of a confusing error
later. Every such name is recorded: `missing_names()` lists them, and `run --report` prints them at the end.
Some are probes the script handles (`getattr(torch, "compile", None)`), so the list is what the script asked
for, not only what stopped it.

This module is the package's top layer: it may import any part of gpumemnet, and nothing imports it but the
package's face (`gpumemnet.as_torch`, `python -m gpumemnet run`).
"""
import importlib
import importlib.abc
import importlib.util
import os
import sys
import threading
import types

from ._core import dtype as _dtype, hooks as _hooks

__all__ = ["as_torch", "is_active", "missing_names"]

# torch submodules that live elsewhere in gpumemnet; every other torch.X.Y is gpumemnet.X.Y. PyTorch's
# infrastructure modules are stand-ins in gpumemnet.compat (what PyTorch does where the feature is off).
_RENAMED = {f"torch.{name}": f"gpumemnet.compat.{name}"
            for name in ("jit", "hub", "ops", "library", "fx", "compiler", "version", "_custom_ops", "_dynamo",
                         "_inductor", "onnx", "ao", "_subclasses", "export", "nested", "_ops",
                         "_functorch", "torch_version", "quantization")}
_RENAMED["torch._C"] = "gpumemnet.compat._torch_c"
# PyTorch modules whose classes gpumemnet keeps in a module of another name: the package that exports them
# (`from torch.optim.adamax import Adamax`: pykeen; `from torch.nn.modules.flatten import Flatten`: avalanche)
_MOVED = {**{f"torch.optim.{name}": "gpumemnet.optim" for name in ("adamw", "adamax", "asgd", "nadam", "radam")},
          **{f"torch.nn.modules.{name}": "gpumemnet.nn.modules"
             for name in ("flatten", "upsampling", "fold", "distance", "channelshuffle")},
          "torch.distributed.distributed_c10d": "gpumemnet.distributed"}

# What `torch.__version__` says under the alias: the PyTorch release whose API gpumemnet follows (scripts and
# torchvision compare it), marked as gpumemnet's in PEP 440's local part so that nobody mistakes it for PyTorch.
TORCH_API_VERSION = "2.15.0"  # the release its tests compare against

_missing = {}          # "torch.nn.GroupNorm" -> how it was asked for ("attribute" / "module")
# fn(torch_name, value) -> value, applied to every attribute read through the alias; `python -m gpumemnet run`
# sets it (gpumemnet.memory.first_step.wrap_torch_attribute: sees which loss function a script applies).
_attribute_hook = None


def set_attribute_hook(fn):
    """Set (or, with None, remove) the function every attribute read through the alias passes through."""
    global _attribute_hook
    _attribute_hook = fn
_missing_lock = threading.Lock()


def _record(name, kind):
    with _missing_lock:
        _missing.setdefault(name, kind)


# The names that exist only so that imports succeed (_core/unsupported.py) report here when they are used.
_hooks.register("missing_name", lambda torch_name: _record(torch_name, "call"))


def missing_names():
    """The PyTorch names looked up under the alias that gpumemnet does not have, sorted."""
    with _missing_lock:
        return sorted(_missing)


def _gm_name(torch_name):
    """gpumemnet's module for a torch module name, or None when gpumemnet has no such module."""
    if torch_name in _MOVED:
        return _MOVED[torch_name]
    top = ".".join(torch_name.split(".")[:2])
    if top in _RENAMED:  # torch.jit.annotations -> gpumemnet.compat.jit.annotations
        name = _RENAMED[top] + torch_name[len(top):]
    else:
        name = "gpumemnet" + torch_name[len("torch"):]
    try:
        found = importlib.util.find_spec(name)
    except (ImportError, ValueError):  # a parent is missing, or is a module rather than a package
        found = None
    return name if found is not None else None


def _not_yet(torch_name):
    return f"{torch_name} is a PyTorch name gpumemnet does not have yet (running PyTorch code on gpumemnet)"


# What looking up a missing name gives. tools/dropin_discover.py swaps these two for stand-ins, to list every
# name a script needs in one run instead of one failure at a time.
def _missing_attribute(torch_name):
    raise AttributeError(_not_yet(torch_name))


def _missing_module(torch_name):
    raise ModuleNotFoundError(_not_yet(torch_name), name=torch_name)


class _TorchModule(types.ModuleType):
    """`torch.X` under the alias: reads and writes of public names go to the gpumemnet module behind it."""

    def __init__(self, name, target):
        super().__init__(name, target.__doc__)
        object.__setattr__(self, "_gm_target", target)

    def __getattr__(self, attr):  # only reached for names not in this module's own dict
        if attr in ("__file__", "__cached__", "__builtins__"):  # print(torch.__file__), version sniffing; the
            return getattr(object.__getattribute__(self, "_gm_target"), attr, None)  # others: dir() lists them
        if attr.startswith("__") and attr.endswith("__") and attr not in ("__all__", "__config__"):
            raise AttributeError(attr)  # import machinery and hasattr(__file__)-style probes, not API names
        target = object.__getattribute__(self, "_gm_target")
        full = f"{self.__name__}.{attr}"
        value = getattr(target, attr, _MISSING)
        if isinstance(value, types.ModuleType) and value.__name__.startswith("gpumemnet."):
            return _alias_of(value, full)  # the submodule's alias, so its missing names are reported too
        if value is not _MISSING:
            return value if _attribute_hook is None else _attribute_hook(full, value)
        if _gm_name(full) is not None:  # a submodule not imported yet
            return importlib.import_module(full)
        _record(full, "attribute")
        return _missing_attribute(full)

    def __setattr__(self, attr, value):
        # The import machinery's own attributes and submodule aliases stay here; a flag a script sets
        # (torch.backends.cudnn.benchmark = True) is gpumemnet's.
        if isinstance(value, _TorchModule) and not isinstance(getattr(object.__getattribute__(
                self, "_gm_target"), attr, value), types.ModuleType):
            return  # the package binds the name to a function (torch.nn.utils.spectral_norm), as PyTorch's does
        if (attr.startswith("__") and attr.endswith("__")) or isinstance(value, _TorchModule):
            object.__setattr__(self, attr, value)
        else:
            setattr(object.__getattribute__(self, "_gm_target"), attr, value)
            if attr in self.__dict__:  # a public class or function copied here by _fill: the new one
                object.__setattr__(self, attr, value)

    def __dir__(self):
        return sorted(set(dir(object.__getattribute__(self, "_gm_target"))) | set(self.__dict__))

    def __repr__(self):
        return f"<module {self.__name__!r} (gpumemnet's {self._gm_target.__name__})>"


_MISSING = object()


def _alias_of(module, full):
    """The alias of gpumemnet module `module`, read as attribute `full` (torch.nn.modules.activation.F is
    torch.nn.functional: aliased under its own name, not the path it was read by)."""
    own = "torch" + module.__name__[len("gpumemnet"):]
    if _gm_name(own) == module.__name__:
        return importlib.import_module(own)
    return importlib.import_module(full) if _gm_name(full) is not None else module


def _fill(module, target):
    """Copy target's public classes and functions into the alias's own dict, so that vars(torch.nn.modules.
    activation) and inspect.getmembers see them (PyG's activation resolver reads vars()). Values that are not
    callable (flags: torch.backends.cudnn.benchmark) stay behind __getattr__, where reads see writes."""
    for attr, value in list(vars(target).items()):
        if attr.startswith("_") or isinstance(value, types.ModuleType) or not callable(value):
            continue
        full = f"{module.__name__}.{attr}"
        object.__setattr__(module, attr, value if _attribute_hook is None else _attribute_hook(full, value))


class _Loader(importlib.abc.Loader):
    def __init__(self, gm_name):
        self.gm_name = gm_name

    def create_module(self, spec):
        target = importlib.import_module(self.gm_name)
        module = _TorchModule(spec.name, target)
        _fill(module, target)
        if spec.name == "torch":
            from .compat.torch_version import TorchVersion  # (a str that compares as a version, as PyTorch's)
            module.__version__ = TorchVersion(f"{TORCH_API_VERSION}+gpumemnet.{target.__version__}")
        if spec.name in ("torch", "torch.serialization"):
            # PyTorch code's torch.save writes PyTorch's own format, which PyTorch loads (gm.save: safetensors)
            from ._serialization_torch_write import save
            object.__setattr__(module, "save", save)
        return module

    def exec_module(self, module):
        pass  # the gpumemnet module behind it ran when it was imported


class _Finder(importlib.abc.MetaPathFinder):
    """Answers for `torch` and every `torch.*` before any installed PyTorch can."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch" and not fullname.startswith("torch."):
            return None
        gm_name = _gm_name(fullname)
        if gm_name is None:
            _record(fullname, "module")
            return _missing_module(fullname)
        # Every alias is a package (an empty path), so `import torch.a.b` comes back here for torch.a.b.
        return importlib.util.spec_from_loader(fullname, _Loader(gm_name), is_package=True)


_finder = _Finder()


def is_active():
    return _finder in sys.meta_path


def as_torch():
    """Make `import torch` give gpumemnet from now on, in this process, and return the `torch` module.

    Call it before anything imports torch: a PyTorch already imported stays what the names already bound to it
    are, so mixing the two is refused."""
    if is_active():
        return importlib.import_module("torch")
    real = sys.modules.get("torch")
    if real is not None and not isinstance(real, _TorchModule):
        raise RuntimeError("as_torch: PyTorch is already imported in this process; call gm.as_torch() (or use "
                           "`python -m gpumemnet run`) before anything imports torch")
    sys.meta_path.insert(0, _finder)
    _dtype.DISPLAY[0] = "torch"  # str(x.dtype) == "torch.float16" in the user's code holds
    # and str(type(x)) == "<class 'torch.Tensor'>": tensorboardX's make_np and wandb's type checks read the class's
    # module name ("torch" in str(type(x))) to tell a tensor from other objects
    from ._core.tensor import Tensor  # noqa: PLC0415
    from .nn.parameter import Parameter  # noqa: PLC0415
    Tensor.__module__, Parameter.__module__ = "torch", "torch.nn.parameter"
    _children_alias_too()
    return importlib.import_module("torch")


# A child started with the spawn or forkserver start method is a fresh interpreter that re-imports the main module
# (as __mp_main__) before it unpickles its target: there `import torch` would be PyTorch. Its command line
# (`python -c "from multiprocessing.spawn import spawn_main; ..."`) is prefixed, while the alias is active, with
# this program, which installs the alias first. The child's sys.path is the parent's only once multiprocessing's
# prepare() has run, so the directory gpumemnet came from is put first for that one import.
_CHILD_PROGRAMS = ("from multiprocessing.spawn import", "from multiprocessing.forkserver import")
_hooked = []


def _child_program(prog):
    if not is_active() or not prog.startswith(_CHILD_PROGRAMS):
        return prog
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return (f"import sys; sys.path.insert(0, {root!r}); import gpumemnet.dropin; del sys.path[0]; "
            f"gpumemnet.dropin.as_torch(); {prog}")


def _with_child_program(args):
    args = list(args)
    if "-c" in args[:-1]:
        i = args.index("-c") + 1
        args[i] = _child_program(args[i])
    return args


def _children_alias_too():
    """Wrap multiprocessing's spawn command line (spawn children, on every platform) and the POSIX launcher
    (forkserver's server, whose forks inherit the alias), once."""
    if _hooked:
        return
    import multiprocessing.spawn as mp_spawn
    import multiprocessing.util as mp_util
    get_command_line, spawnv_passfds = mp_spawn.get_command_line, mp_util.spawnv_passfds

    def spawn_command_line(**kwds):
        return _with_child_program(get_command_line(**kwds))

    def spawnv_with_alias(path, args, passfds):  # spawn's command is already prefixed: _child_program skips it
        return spawnv_passfds(path, _with_child_program(args), passfds)

    mp_spawn.get_command_line, mp_util.spawnv_passfds = spawn_command_line, spawnv_with_alias
    _hooked.append(True)
