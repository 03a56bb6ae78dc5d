"""torch.onnx.symbolic_helper: decorators for exporter symbolic functions, accepted and unused (no export here)."""


def parse_args(*arg_descriptors):
    def decorator(fn):
        return fn
    return decorator
