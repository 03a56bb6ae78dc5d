"""List the PyTorch names that torchvision's model builders (or a script) need and gpumemnet lacks, in one run.

    pip install --no-deps torchvision pillow         # torchvision's Python files; PyTorch itself is not needed
    python tools/dropin_discover.py                  # every CNN builder of torchvision.models and .segmentation
    python tools/dropin_discover.py --models resnet18,vgg11
    python tools/dropin_discover.py train.py args    # a script

Under the alias a missing name fails where it is looked up (gpumemnet/dropin.py). Here it gives a stand-in
instead, so that the run goes on and meets every missing name: the list is what to implement next. A stand-in
computes nothing, so a builder that met one counts as "needs", whatever happened after.

Each builder runs one step of tests/dropin's training loop (dropin_steps.train: torchvision's reference recipe)
at the input its table gives (dropin_models.SPECS), so what this lists is what the conformance suite will meet.
`GPUMEMNET_DROPIN_STANDINS=1 pytest tests/dropin` runs the whole suite with these stand-ins (tests/dropin/README.md).
"""
import argparse
import os
import runpy
import sys
import traceback
import types
from collections import defaultdict

import gpumemnet as gm
from gpumemnet import dropin

_current = []            # the names the builder being run met
_needed_by = defaultdict(set)   # name -> builders that met it


class _StandInMeta(type):
    """A class that is every missing thing at once: attribute, callable, decorator, base class, type hint."""

    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _stand_in(f"{cls._torch_name}.{name}")

    def __call__(cls, *args, **kwargs):
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]  # used as a decorator: keep the function
        return cls

    def __getitem__(cls, key):
        return cls

    def __or__(cls, other):
        return cls

    __ror__ = __or__

    def __iter__(cls):
        return iter(())

    def __bool__(cls):
        return False


def _stand_in(torch_name):
    return _StandInMeta(torch_name.rsplit(".", 1)[-1], (), {"_torch_name": torch_name})


class _StandInModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _stand_in(f"{self.__name__}.{name}")


class _StandInLoader:
    @staticmethod
    def create_module(spec):
        return _StandInModule(spec.name)

    @staticmethod
    def exec_module(module):
        pass


def _install_stand_ins():
    import importlib.util
    record = dropin._record

    def recording(name, kind):
        record(name, kind)
        for builder in _current:
            _needed_by[name].add(builder)

    dropin._record = recording
    dropin._missing_attribute = _stand_in
    dropin._missing_module = lambda name: importlib.util.spec_from_loader(name, _StandInLoader(), is_package=True)


def _builders(selected):
    import torchvision.models as tvm
    names = [(n, tvm.get_model_builder(n)) for n in tvm.list_models(module=tvm)]
    names += [(n, tvm.get_model_builder(n)) for n in tvm.list_models(module=tvm.segmentation)]
    names = [(n, b) for n, b in names if "vit" not in n and "swin" not in n and "maxvit" not in n]  # not CNNs
    return [(n, b) for n, b in names if not selected or n in selected]


def _train_step(name, builder, torch):
    """One step of tests/dropin's training loop (torchvision's reference recipe, dropin_steps.train) at the input
    size its table gives (dropin_models.SPECS); builders the table does not know get 2 x 3 x 64 x 64."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "dropin"))
    import dropin_models
    import dropin_steps
    spec = dropin_models.SPECS.get(name) or dropin_models.Spec(name, input=(2, 3, 64, 64))
    dropin_steps.train(torch, spec, None, "float32", 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="", help="comma-separated builder names (default: all CNNs)")
    parser.add_argument("script", nargs="?", help="a PyTorch script to run instead of the builders")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    opts = parser.parse_args()

    _install_stand_ins()
    torch = gm.as_torch()
    outcome = {}
    if opts.script:
        sys.argv = [opts.script] + opts.args
        _current.append(opts.script)
        try:
            runpy.run_path(opts.script, run_name="__main__")
            outcome[opts.script] = "ran"
        except BaseException as e:  # noqa: BLE001 - a survey: report and go on
            outcome[opts.script] = f"{type(e).__name__}: {e}"
    else:
        _current.append("import torchvision")
        try:
            builders = _builders(set(filter(None, opts.models.split(","))))
            outcome["import torchvision"] = "imports"
        except BaseException as e:  # noqa: BLE001
            traceback.print_exc()
            outcome["import torchvision"] = f"{type(e).__name__}: {e}"
            builders = []
        _current.clear()
        for name, builder in builders:
            _current[:] = [name]
            try:
                _train_step(name, builder, torch)
                outcome[name] = "trains"
            except BaseException as e:  # noqa: BLE001
                outcome[name] = f"{type(e).__name__}: {str(e).splitlines()[0][:100] if str(e) else ''}"
            _current.clear()
    needs = defaultdict(list)
    for missing, who in _needed_by.items():
        for w in who:
            needs[w].append(missing)
    print(f"{'builder':28} outcome")
    for name, result in outcome.items():
        met = needs.get(name, [])
        verdict = f"needs {len(met)} missing name(s)" if met else result
        if met and result != "trains":
            verdict += f"; then {result}"
        print(f"{name:28} {verdict}")
    print(f"\n{len(_needed_by)} missing PyTorch names met, by how many runs met them:")
    for missing, who in sorted(_needed_by.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        print(f"  {len(who):3d}  {missing}")


if __name__ == "__main__":
    main()
