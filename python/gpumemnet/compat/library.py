"""torch.library: registrations of custom operators' fake (meta) kernels and autograd formulas. gpumemnet's
meta device infers shapes in C for its own ops, so these registrations are accepted and unused."""


def _accept(*args, **kwargs):
    def register(fn):
        return fn
    # used both as @register_fake("ns::op") and as register_fake("ns::op", fn)
    return args[1] if len(args) > 1 and callable(args[1]) else register


register_fake = impl_abstract = register_autograd = register_kernel = impl = _accept


class Library:
    def __init__(self, ns, kind, dispatch_key=""):
        self.ns, self.kind = ns, kind

    def define(self, schema, *args, **kwargs):
        return schema.split("(")[0]

    def impl(self, *args, **kwargs):
        return _accept(*args, **kwargs)
