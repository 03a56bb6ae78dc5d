"""Public functions pickle by their public name. Many are made by factories (`_unary.<locals>.fn` for torch.abs),
wrapped (NumPy's axis= forms, Tensor subclasses' dispatch) or defined in a private module under another name, so
pickle's lookup of `__module__.__qualname__` missed them: `pickle.dumps(torch.abs)` failed, and with it every
model holding a function (transformers' GELUActivation keeps F.gelu) in torch.save or multiprocessing. publish()
gives each public function of gpumemnet's function namespaces the first public place it is found at (also those
that pickled from a private module: torch.save under the alias writes them as torch's of that public name)."""
import sys
import types

_NAMESPACES = ("", ".nn.functional", ".nn.init", ".linalg", ".special", ".fft")


def publish():
    pkg = __name__.rsplit(".", 1)[0]
    public = {pkg + suffix for suffix in _NAMESPACES}
    for suffix in _NAMESPACES:
        module = sys.modules.get(pkg + suffix)
        if module is None:
            continue
        for attr, value in list(vars(module).items()):
            if attr.startswith("_") or not isinstance(value, types.FunctionType):
                continue
            home = getattr(value, "__module__", None) or ""
            if home in public and getattr(sys.modules[home], value.__qualname__, None) is value:
                continue  # already under a public name
            value.__module__, value.__qualname__ = module.__name__, attr
