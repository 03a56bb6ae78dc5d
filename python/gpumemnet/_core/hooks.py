"""Calls from a lower layer up to a higher one, registered by the higher layer when it is imported.

Imports run down only (DESIGN.md, "Layers"): autograd and the optimizer cannot import the OOM predictor of
gpumemnet.memory, nor gm.cuda the memory reports. Instead gpumemnet.memory registers its functions here when it
is imported (gpumemnet/__init__.py imports it, so they are always set in a running program), and the lower
layer calls them through `hooks.get(name)`. An OOM explanation is optional: `get` returns None before it is
registered and the error is raised unexplained."""

# name -> (what it does, what calls it)
SLOTS = {
    "explain_oom": "fn(error, module, args): attach what would have fitted to an OOM in module's forward "
                   "(nn.Module.__call__)",
    "explain_oom_last_root": "fn(error): the same for an OOM in backward or the optimizer step, for the last "
                             "root module called on this thread (autograd.backward, Optimizer.step)",
    "memory_summary": "fn(device) -> str: gm.memory.memory_summary (gm.cuda.memory_summary)",
    "set_limit": "fn(device, nbytes_or_fraction): gm.memory.set_limit (gm.cuda.set_per_process_memory_fraction)",
    "missing_name": "fn(torch_name): a PyTorch name that exists only so that imports succeed was used "
                    "(_core/unsupported.py); gpumemnet.dropin lists it in `run --report`",
    "backward_starting": "fn(tensors): before a backward() runs (autograd.backward); `python -m gpumemnet run` "
                         "estimates a model's first training step there (gpumemnet.memory.first_step)",
    "zero_grad_called": "fn(set_to_none): an optimizer's or a module's zero_grad() ran (Optimizer.zero_grad, "
                        "Module.zero_grad); `python -m gpumemnet run` notes where the script calls it, which decides "
                        "whether the last step's gradients are alive in the next forward (gpumemnet.memory.first_step)",
    "complex": "the module _core/complex.py itself (ComplexTensor, its factories, cat and einsum), registered when it "
               "is imported: the factories, cat, einsum and is_complex hand complex tensors to it, and complex.py "
               "is made of those functions, so they cannot import it",
    "torch_function_functions": "fn(): wrap the public functions of gm, nn.functional, linalg, special and fft so "
                                "that they dispatch through Tensor subclasses' __torch_function__ "
                                "(gpumemnet.overrides); subclass_dispatch calls it when the first subclass that "
                                "takes part is defined",
    "fft": "the module gpumemnet.fft (layer 2), registered when it is imported: Tensor.stft / istft call it",
    "bessel_i1": "gpumemnet.special's differentiable i1 (layer 2): i0's derivative, for gradients of gradients",
}

_registered = {}


def register(name, fn):
    """Set the function behind a slot; returns the previous one (None if there was none)."""
    if name not in SLOTS:
        raise KeyError(f"hooks.register: unknown slot {name!r}; the slots are {sorted(SLOTS)}")
    prev = _registered.get(name)
    _registered[name] = fn
    return prev


def get(name):
    """The function registered for a slot, or None."""
    return _registered.get(name)


def require(name):
    """The function registered for a slot; a RuntimeError if gpumemnet.memory has not been imported."""
    fn = _registered.get(name)
    if fn is None:
        raise RuntimeError(f"{name} is provided by gpumemnet.memory, which is not imported; import gpumemnet")
    return fn
