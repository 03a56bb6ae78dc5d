"""torch.utils.data._utils.worker: get_worker_info, and _generate_state, the 4 x 32-bit NumPy seed PyTorch's
workers derive from the loader's base seed and their id (NumPy's SeedSequence hashing), which libraries call to
seed NumPy the way PyTorch's workers would (tensordict)."""
from ..dataloader import get_worker_info  # noqa: F401

__all__ = ["get_worker_info"]

_MASK32 = 0xFFFFFFFF
_INIT_A, _MULT_A, _INIT_B, _MULT_B = 0x43B0D7E5, 0x931E8875, 0x8B51F9DD, 0x58F38DED
_MIX_L, _MIX_R, _XSHIFT = 0xCA01F9DD, 0x4973F715, 16


def _generate_state(base_seed, worker_id):
    """The seed state of worker worker_id: its entropy (id, base seed's two halves) hashed into a pool, the pool
    mixed so every word depends on every other, then hashed out."""
    const_a = [_INIT_A]

    def hash_a(value):
        value = (value ^ const_a[0]) & _MASK32
        const_a[0] = (const_a[0] * _MULT_A) & _MASK32
        value = (value * const_a[0]) & _MASK32
        return (value ^ (value >> _XSHIFT)) & _MASK32

    def mix(x, y):
        r = ((_MIX_L * x) - (_MIX_R * y)) & _MASK32
        return (r ^ (r >> _XSHIFT)) & _MASK32

    pool = [hash_a(e) for e in (worker_id, base_seed & _MASK32, base_seed >> 32, 0)]
    for src in range(4):
        for dst in range(4):
            if src != dst:
                pool[dst] = mix(pool[dst], hash_a(pool[src]))
    state, const_b = [], _INIT_B
    for value in pool:
        value = (value ^ const_b) & _MASK32
        const_b = (const_b * _MULT_B) & _MASK32
        value = (value * const_b) & _MASK32
        state.append((value ^ (value >> _XSHIFT)) & _MASK32)
    return state
