"""torch._dynamo.utils: torchvision asks `is_compile_supported(device_type)` to choose between a compiled and an
eager path; nothing is compiled here."""


def is_compile_supported(device_type):
    return False
