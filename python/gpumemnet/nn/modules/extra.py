"""The layers over nn/_functional_extra.py (MultiheadAttention, RMSNorm, LocalResponseNorm, Bilinear, RReLU,
LPPool, MaxUnpool, the margin losses) and the Lazy modules; nn imports __all__."""

__all__ = []
