"""torch.nn.attention.flex_attention, computed densely: a score_mod(score, b, h, q_idx, kv_idx) and a mask_mod(b, h,
q_idx, kv_idx) are called once with broadcasting index tensors (b (B,1,1,1), h (1,H,1,1), q_idx (1,1,L,1),
kv_idx (1,1,1,S)), which is what PyTorch's vmap over them computes for mods written with tensor arithmetic and
where(). The BlockMask keeps the dense (B or 1, H or 1, L, S) mask (PyTorch keeps block indices and skips empty
blocks: its memory grows with the kept blocks, this one's with L x S, as the math attention's weights already do).
A query row that keeps no key gets zeros, and a log-sum-exp of -inf, as PyTorch's."""
import math
from typing import NamedTuple

from ..._core.creation import arange
from .._functional_more import gqa_repeated, kept_scores

__all__ = ["BlockMask", "create_block_mask", "flex_attention", "and_masks", "or_masks", "noop_mask", "AuxRequest",
           "AuxOutput"]

_DEFAULT_SPARSE_BLOCK_SIZE = 128


class AuxRequest(NamedTuple):
    lse: bool = False
    max_scores: bool = False


class AuxOutput(NamedTuple):
    lse: object = None
    max_scores: object = None


def _indices(B, H, L, S, device):
    idx = [arange(n, device=device) for n in (B, H, L, S)]
    return (idx[0].reshape(B, 1, 1, 1), idx[1].reshape(1, H, 1, 1), idx[2].reshape(1, 1, L, 1),
            idx[3].reshape(1, 1, 1, S))


def noop_mask(b, h, q_idx, kv_idx):
    return q_idx >= 0  # keeps every key (an all-True tensor of the broadcast shape)


def and_masks(*mods):
    def mask(b, h, q, kv):
        out = noop_mask(b, h, q, kv)
        for m in mods:
            out = out & m(b, h, q, kv)
        return out
    return mask


def or_masks(*mods):
    def mask(b, h, q, kv):
        out = ~noop_mask(b, h, q, kv)
        for m in mods:
            out = out | m(b, h, q, kv)
        return out
    return mask


class BlockMask:
    """The keep-mask of create_block_mask, dense: mask (B or 1, H or 1, Q_LEN, KV_LEN), bool."""

    def __init__(self, mask, mask_mod, block_size=(_DEFAULT_SPARSE_BLOCK_SIZE, _DEFAULT_SPARSE_BLOCK_SIZE)):
        self.mask, self.mask_mod = mask, mask_mod
        self.BLOCK_SIZE = block_size
        self.seq_lengths = tuple(mask.shape[-2:])
        self.shape = tuple(mask.shape)

    def to_dense(self):
        return self.mask

    def to(self, device):
        return BlockMask(self.mask.to(device), self.mask_mod, self.BLOCK_SIZE)

    def __repr__(self):
        return f"BlockMask(shape={self.shape}, dense)"


def create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN, device=None, BLOCK_SIZE=_DEFAULT_SPARSE_BLOCK_SIZE,
                      _compile=False, **kwargs):
    """The mask mask_mod gives at every (b, h, q_idx, kv_idx); B or H None: shared by every batch entry or head."""
    b, h, q, kv = _indices(B or 1, H or 1, Q_LEN, KV_LEN, device)
    mask = mask_mod(b, h, q, kv).expand(B or 1, H or 1, Q_LEN, KV_LEN)
    size = (BLOCK_SIZE, BLOCK_SIZE) if isinstance(BLOCK_SIZE, int) else tuple(BLOCK_SIZE)
    return BlockMask(mask, mask_mod, size)


def flex_attention(query, key, value, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
                   return_lse=False, kernel_options=None, *, return_aux=None):
    """softmax(score_mod(q k^T * scale) where block_mask keeps, -inf elsewhere) @ v on (B, H, L, E) tensors."""
    if query.ndim != 4:
        raise ValueError(f"flex_attention: expected 4-D (B, H, L, E) query, got shape {tuple(query.shape)}")
    B, H, L, E = query.shape
    if enable_gqa:
        key, value = gqa_repeated(query, key, value)
    S = key.shape[-2]
    s = 1.0 / math.sqrt(E) if scale is None else scale
    scores = query.matmul(key.transpose(-2, -1)) * s
    if score_mod is not None:
        scores = score_mod(scores, *_indices(B, H, L, S, query.device)).expand(B, H, L, S)
    keep = block_mask.mask if block_mask is not None else None
    if keep is not None:
        scores, empty = kept_scores(scores, keep)
    lse = scores.logsumexp(-1)
    weights = (scores - lse.unsqueeze(-1)).exp()
    if keep is not None:
        weights = weights.masked_fill(empty, 0.0)
        lse = lse.masked_fill(empty.squeeze(-1), float("-inf"))
    out = weights.matmul(value)
    if return_aux is not None:
        return out, AuxOutput(lse=lse if return_aux.lse else None,
                              max_scores=scores.amax(-1) if return_aux.max_scores else None)
    return (out, lse) if return_lse else out
