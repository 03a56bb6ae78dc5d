"""torch.nn.utils.rnn: PackedSequence and the functions that make and undo it, for the recurrent layers of
nn/modules/rnn.py, and pad_sequence / unpad_sequence, which collate functions use beside any model. A PackedSequence
holds a batch of sequences of different lengths time step by time step: the batch sorted by decreasing length,
`data` the rows of step 0 (every sequence), then those of step 1 (the sequences longer than 1), ...;
`batch_sizes[t]` says how many rows step t has. Packing and unpacking are one gather each, so gradients flow through
both."""
from collections import namedtuple

from .._core.creation import cat, full, stack, tensor
from .._core.dtype import int64
from .._core.functions import is_tensor

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence", "pad_packed_sequence", "pack_sequence",
           "unpack_sequence", "pad_sequence", "unpad_sequence"]


def invert_permutation(permutation):
    """The permutation that undoes `permutation` (None stays None)."""
    if permutation is None:
        return None
    return permutation.argsort()


class PackedSequence(namedtuple("PackedSequence_", ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])):
    """(data, batch_sizes, sorted_indices, unsorted_indices), as PyTorch's: made by pack_padded_sequence and
    pack_sequence, taken and returned by RNN, LSTM and GRU. batch_sizes stays on the CPU."""
    __slots__ = ()

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:  # PyTorch's old form: PackedSequence((data, batch_sizes))
            if not (isinstance(data, (list, tuple)) and len(data) == 2):
                raise AssertionError("Expected data to be a list or tuple of length 2")
            data, batch_sizes = data
        elif batch_sizes.device.type != "cpu":
            raise ValueError("batch_sizes should always be on CPU. Instances of PackedSequence should never be "
                             "created manually. They should be instantiated by functions like pack_sequence and "
                             "pack_padded_sequences in nn.utils.rnn.")
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def _with(self, fn):
        """The same sequence with fn applied to data, and the index tensors moved to data's new device."""
        data = fn(self.data)
        if data is self.data:
            return self
        move = (lambda t: None if t is None else t.to(data.device))
        return type(self)(data, self.batch_sizes, move(self.sorted_indices), move(self.unsorted_indices))

    def to(self, *args, **kwargs):
        return self._with(lambda d: d.to(*args, **kwargs))

    def cuda(self, *args, **kwargs):
        return self._with(lambda d: d.cuda(*args, **kwargs))

    def cpu(self, *args, **kwargs):
        return self._with(lambda d: d.cpu(*args, **kwargs))

    def pin_memory(self):
        return self._with(lambda d: d.pin_memory())

    def double(self):
        return self._with(lambda d: d.double())

    def float(self):
        return self._with(lambda d: d.float())

    def half(self):
        return self._with(lambda d: d.half())

    def long(self):
        return self._with(lambda d: d.long())

    def int(self):
        return self._with(lambda d: d.int())

    def short(self):
        return self._with(lambda d: d.short())

    def char(self):
        return self._with(lambda d: d.char())

    def byte(self):
        return self._with(lambda d: d.byte())

    @property
    def is_cuda(self):
        return self.data.is_cuda

    def is_pinned(self):
        return self.data.is_pinned()


def _lengths_list(lengths):
    if is_tensor(lengths):
        if lengths.ndim != 1 or lengths.device.type != "cpu":
            raise RuntimeError(f"'lengths' argument should be a 1D CPU int64 tensor, but got {lengths.ndim}D "
                               f"{lengths.device} {lengths.dtype} tensor")
        return [int(n) for n in lengths.tolist()]
    return [int(n) for n in lengths]


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Padded sequences (T, B, *) (or (B, T, *) with batch_first) and their lengths as a PackedSequence; with
    enforce_sorted=False the batch is first sorted by decreasing length (stably) and the order kept to undo it."""
    lengths = _lengths_list(lengths)
    batch_dim = 0 if batch_first else 1
    if len(lengths) != input.shape[batch_dim]:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got {len(lengths)} "
                           f"(batch_size={input.shape[batch_dim]})")
    sorted_indices = None
    if not enforce_sorted:
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
        lengths = [lengths[i] for i in order]
        sorted_indices = tensor(order, dtype=int64, device=input.device)
        input = input.index_select(batch_dim, sorted_indices)
    elif any(a < b for a, b in zip(lengths, lengths[1:])):
        raise RuntimeError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You can "
                           "pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to sidestep "
                           "this requirement if you do not need ONNX exportability.")
    if lengths and lengths[-1] <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' that "
                           "is <= 0")
    if batch_first:
        input = input.transpose(0, 1)
    steps, batch = input.shape[0], input.shape[1]
    if lengths and lengths[0] > steps:
        raise RuntimeError(f"pack_padded_sequence: a length of {lengths[0]} is longer than the {steps} time steps "
                           f"of input of shape {tuple(input.shape)}")
    batch_sizes = [sum(1 for n in lengths if n > t) for t in range(lengths[0] if lengths else 0)]
    rows = [t * batch + b for t, bs in enumerate(batch_sizes) for b in range(bs)]
    flat = input.reshape((steps * batch,) + tuple(input.shape[2:]))
    data = flat.index_select(0, tensor(rows, dtype=int64, device=input.device))
    return PackedSequence(data, tensor(batch_sizes, dtype=int64), sorted_indices, None)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """(padded tensor (T, B, *) or (B, T, *), lengths): the inverse of pack_padded_sequence, in the batch's original
    order; total_length pads to that many steps."""
    batch_sizes = [int(n) for n in sequence.batch_sizes.tolist()]
    steps = len(batch_sizes)
    if total_length is not None:
        if total_length < steps:
            raise ValueError(f"Expected total_length to be at least the length of the longest sequence in input, but "
                             f"got total_length={total_length} and max sequence length being {steps}")
        steps = total_length
    data = sequence.data
    batch = batch_sizes[0] if batch_sizes else 0
    rest = tuple(data.shape[1:])
    pad_row = data.shape[0]  # the index of the padding row appended below
    rows, offset = [], 0
    for t in range(steps):
        bs = batch_sizes[t] if t < len(batch_sizes) else 0
        rows.extend(offset + b if b < bs else pad_row for b in range(batch))
        offset += bs
    source = cat([data, full((1,) + rest, padding_value, dtype=data.dtype, device=data.device)], 0)
    padded = source.index_select(0, tensor(rows, dtype=int64, device=data.device)).reshape((steps, batch) + rest)
    lengths = [sum(1 for bs in batch_sizes if bs > b) for b in range(batch)]
    if batch_first:
        padded = padded.transpose(0, 1)
    lengths = tensor(lengths, dtype=int64)
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(0 if batch_first else 1, sequence.unsorted_indices)
        lengths = lengths[sequence.unsorted_indices.cpu()]
    return padded, lengths


def pack_sequence(sequences, enforce_sorted=True):
    """A list of (L_i, *) tensors as one PackedSequence (pad_sequence, then pack_padded_sequence)."""
    return pack_padded_sequence(pad_sequence(sequences), [s.shape[0] for s in sequences],
                                enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """The list of tensors pack_sequence packed, in their original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return [padded[i, :int(n)] for i, n in enumerate(lengths.tolist())]


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
        s = s if s.dtype == first.dtype else s.to(first.dtype)  # the first sequence's dtype, as PyTorch's
        pad = n - s.shape[0]
        if pad:
            filler = full((pad,) + rest, padding_value, dtype=s.dtype, device=s.device)
            s = cat([filler, s] if padding_side == "left" else [s, filler], 0)
        rows.append(s)
    # stacked along the batch dim: a contiguous result either way (seq2seq code calls .view on it)
    return stack(rows, 0 if batch_first else 1)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The sequences pad_sequence padded, each cut back to its length."""
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    return [padded_sequences[i, :int(n)] for i, n in enumerate(lengths)]
