"""Error cases of the recurrent layers (nn/modules/rnn.py), torch.nn.utils.rnn's packing (nn/_packed.py) and the CTC
loss (nn/_functional_ctc.py), which sequence models train with: B(...) is
run against PyTorch too, E(...) names something PyTorch has not (error_inputs.py explains both). EXEMPT: public
callables with no bad input, each with its reason (test_error_coverage.py)."""
from error_inputs import HOST, B, ix, z
from error_inputs_api import E


def _ctc(d, l, input_lengths=(5, 5), target_lengths=(2, 2), targets=((1, 2), (1, 2))):
    """ctc_loss's four arguments: log_probs (5, 2, 4), the targets and the two lists of lengths."""
    return z(d, l, 5, 2, 4), ix(d, l, list(targets)), list(input_lengths), list(target_lengths)


def _packed(d, l, lengths, **kw):
    return l.nn.utils.rnn.pack_padded_sequence(z(d, l, 5, len(lengths), 2), lengths, **kw)


CASES = [
    B("RNNBase unknown mode", lambda d, l: l.nn.RNNBase("XYZ", 2, 3), ValueError, r"Unrecognized RNN mode: XYZ"),
    B("RNN unknown nonlinearity", lambda d, l: l.nn.RNN(2, 3, nonlinearity="sigmoid"), ValueError,
      r"Unknown nonlinearity 'sigmoid'. Select from 'tanh' or 'relu'."),
    B("RNN proj_size", lambda d, l: l.nn.RNN(2, 3, proj_size=1), ValueError,
      r"proj_size argument is only supported for LSTM, not RNN or GRU"),
    B("RNN input of rank 4", lambda d, l: l.nn.RNN(2, 3, device=d)(z(d, l, 1, 2, 3, 2)), ValueError,
      r"RNN: Expected input to be 2D or 3D, got 4D tensor instead"),
    B("RNN input features differ from input_size", lambda d, l: l.nn.RNN(2, 3, device=d)(z(d, l, 4, 1, 5)),
      RuntimeError, r"input.size\(-1\) must be equal to input_size. Expected 2, got 5"),
    B("RNN hidden state of the wrong batch", lambda d, l: l.nn.RNN(2, 3, device=d)(z(d, l, 4, 2, 2), z(d, l, 1, 3, 3)),
      RuntimeError, r"Expected hidden size \(1, 2, 3\), got \[1, 3, 3\]"),
    B("RNN 2-D hidden state with batched input", lambda d, l: l.nn.RNN(2, 3, device=d)(z(d, l, 4, 2, 2),
      z(d, l, 2, 3)), RuntimeError, r"For batched 3-D input, hx should also be 3-D but got 2-D tensor"),
    B("RNN input dtype differs from the weights'", lambda d, l: l.nn.RNN(2, 3, device=d)(z(d, l, 4, 1, 2,
      dtype="float64")), ValueError, r"RNN input dtype \((torch|gpumemnet).float64\) does not match weight dtype"),
    B("LSTM dropout above 1", lambda d, l: l.nn.LSTM(2, 3, num_layers=2, dropout=1.5), ValueError,
      r"dropout should be a number in range \[0, 1\]"),
    B("LSTM hidden_size zero", lambda d, l: l.nn.LSTM(2, 0), ValueError, r"hidden_size must be greater than zero"),
    B("LSTM input_size not an int", lambda d, l: l.nn.LSTM(2.0, 3), TypeError,
      r"input_size should be of type int, got: float"),
    B("LSTM proj_size not below hidden_size", lambda d, l: l.nn.LSTM(2, 3, proj_size=3), ValueError,
      r"proj_size has to be smaller than hidden_size"),
    B("LSTM cell state of the wrong size", lambda d, l: l.nn.LSTM(2, 3, device=d)(z(d, l, 4, 2, 2), (
      z(d, l, 1, 2, 3), z(d, l, 1, 2, 4))), RuntimeError, r"Expected hidden\[1\] size \(1, 2, 3\), got \[1, 2, 4\]"),
    B("LSTM unbatched input with 3-D states", lambda d, l: l.nn.LSTM(2, 3, device=d)(z(d, l, 4, 2), (
      z(d, l, 1, 1, 3), z(d, l, 1, 1, 3))), RuntimeError,
      r"For unbatched 2-D input, hx and cx should also be 2-D but got \(3-D, 3-D\) tensors"),
    B("GRU num_layers zero", lambda d, l: l.nn.GRU(2, 3, num_layers=0), ValueError,
      r"num_layers must be greater than zero"),
    B("GRU input of rank 1", lambda d, l: l.nn.GRU(2, 3, device=d)(z(d, l, 2)), ValueError,
      r"GRU: Expected input to be 2D or 3D, got 1D instead"),
    B("GRU packed input of the wrong width", lambda d, l: l.nn.GRU(3, 3, device=d)(_packed(d, l, [3, 2])),
      RuntimeError, r"input.size\(-1\) must be equal to input_size. Expected 3, got 2"),
    B("RNNCell input of rank 3", lambda d, l: l.nn.RNNCell(2, 3, device=d)(z(d, l, 1, 1, 2)), ValueError,
      r"RNNCell: Expected input to be 1D or 2D, got 3D instead"),
    B("LSTMCell input features differ", lambda d, l: l.nn.LSTMCell(2, 3, device=d)(z(d, l, 4, 5)), RuntimeError,
      r"input has inconsistent input_size: got 5 expected 2"),
    B("GRUCell hidden batch differs", lambda d, l: l.nn.GRUCell(2, 3, device=d)(z(d, l, 2, 2), z(d, l, 3, 3)),
      RuntimeError, r"Input batch size 2 doesn't match hidden0 batch size 3"),
    B("GRUCell hidden size differs", lambda d, l: l.nn.GRUCell(2, 3, device=d)(z(d, l, 2, 2), z(d, l, 2, 4)),
      RuntimeError, r"hidden0 has inconsistent hidden_size: got 4, expected 3"),
    B("pack_padded_sequence lengths not sorted", lambda d, l: _packed(d, l, [2, 3]), RuntimeError,
      r"`lengths` array must be sorted in decreasing order when `enforce_sorted` is True"),
    B("pack_padded_sequence lengths of another batch", lambda d, l: l.nn.utils.rnn.pack_padded_sequence(
      z(d, l, 5, 2, 2), [3, 2, 1]), RuntimeError,
      r"Expected `len\(lengths\)` to be equal to batch_size, but got 3 \(batch_size=2\)"),
    B("pack_padded_sequence a zero length", lambda d, l: _packed(d, l, [3, 0]), RuntimeError,
      r"Length of all samples has to be greater than 0"),
    B("pad_packed_sequence total_length too short", lambda d, l: l.nn.utils.rnn.pad_packed_sequence(
      _packed(d, l, [4, 2]), total_length=3), ValueError,
      r"Expected total_length to be at least the length of the longest sequence in input, but got total_length=3 "
      r"and max sequence length being 4"),
    B("ctc_loss input length beyond the steps", lambda d, l: l.F.ctc_loss(*_ctc(d, l, input_lengths=(6, 5))),
      RuntimeError, r"Expected input_lengths to have value at most 5, but got value 6"),
    B("ctc_loss targets narrower than a target length", lambda d, l: l.F.ctc_loss(*_ctc(d, l, target_lengths=(3, 2))),
      RuntimeError, r"Expected tensor to have size at least 3 at dimension 1, but got size 2 for argument #2 "
                    r"'targets'"),
    B("ctc_loss input_lengths of another batch", lambda d, l: l.F.ctc_loss(*_ctc(d, l, input_lengths=(5, 5, 5))),
      RuntimeError, r"input_lengths must be of size batch_size"),
    B("ctc_loss unknown reduction", lambda d, l: l.F.ctc_loss(*_ctc(d, l), reduction="avg"), ValueError,
      r"avg is not a valid value for reduction"),
    B("CTCLoss input length beyond the steps", lambda d, l: l.nn.CTCLoss()(*_ctc(d, l, input_lengths=(5, 9))),
      RuntimeError, r"Expected input_lengths to have value at most 5, but got value 9"),
    E("ctc_loss a label out of range", lambda d, l: l.F.ctc_loss(*_ctc(d, l, targets=((1, 7), (1, 2)))), RuntimeError,
      r"ctc_loss: target label 7 is out of range for 4 classes", devices=HOST),
    E("pack_padded_sequence length beyond the steps", lambda d, l: _packed(d, l, [7, 2]), RuntimeError,
      r"pack_padded_sequence: a length of 7 is longer than the 5 time steps of input of shape \(5, 2, 2\)"),
]
EXEMPT = {"nn.RNNCellBase": "the cells' abstract base (PyTorch's too): its constructor takes what the cells "
                            "pass, and it has no forward of its own"}
