"""torch.nn.utils.rnn: PackedSequence and its packing functions, which the recurrent layers (nn.RNN, nn.LSTM, nn.GRU)
take, and pad_sequence / unpad_sequence, which collate functions use for sequences of different lengths beside any
model. They live in nn/_packed.py, where the recurrent layers import them from."""
from .._packed import (PackedSequence, invert_permutation, pack_padded_sequence, pack_sequence, pad_packed_sequence,
                       pad_sequence, unpack_sequence, unpad_sequence)

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence", "pad_packed_sequence", "pack_sequence",
           "unpack_sequence", "pad_sequence", "unpad_sequence"]
