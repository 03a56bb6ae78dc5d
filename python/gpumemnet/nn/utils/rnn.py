"""torch.nn.utils.rnn's padding helpers, which collate functions use for sequences of different lengths beside any
model: pad_sequence and unpad_sequence. gpumemnet has no recurrent layers, so the packed-sequence half of the
module (PackedSequence, pack_padded_sequence, ...) is not here."""
from ..._core.creation import cat, full, stack

__all__ = ["pad_sequence", "unpad_sequence"]


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Tensors of shape (L_i, *) stacked into (max L, B, *) (or (B, max L, *) with batch_first), padded with
    padding_value on the right (or the left)."""
    if padding_side not in ("left", "right"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    first = sequences[0]
    rest = tuple(first.shape[1:])
    for i, s in enumerate(sequences):
        if tuple(s.shape[1:]) != rest:
            raise RuntimeError(f"The size of tensor {i} ({tuple(s.shape)}) must match the first's {tuple(first.shape)} "
                               f"beyond its first dimension")
    n = max(s.shape[0] for s in sequences)
    rows = []
    for s in sequences:
        pad = n - s.shape[0]
        if pad:
            filler = full((pad,) + rest, padding_value, dtype=s.dtype, device=s.device)
            s = cat([filler, s] if padding_side == "left" else [s, filler], 0)
        rows.append(s)
    out = stack(rows, 0)
    return out if batch_first else out.transpose(0, 1)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The sequences pad_sequence padded, each cut back to its length."""
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    return [padded_sequences[i, :int(n)] for i, n in enumerate(lengths)]
