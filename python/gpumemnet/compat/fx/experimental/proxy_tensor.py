"""torch.fx.experimental.proxy_tensor: the tracing mode of make_fx. gpumemnet never traces, so no mode is active
(kornia asks before choosing an implementation)."""


def get_proxy_mode():
    return None


def make_fx(*args, **kwargs):
    raise NotImplementedError("torch.fx.experimental.proxy_tensor.make_fx: gpumemnet does not trace programs")
