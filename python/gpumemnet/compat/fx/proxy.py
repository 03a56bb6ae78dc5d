"""torch.fx.proxy (see torch.fx)."""


class Proxy:
    pass
