"""The recurrent layers, with PyTorch's names, parameters and semantics: RNN (tanh or relu), LSTM (with proj_size),
GRU, and their one-step cells RNNCell, LSTMCell, GRUCell. A PyTorch state_dict loads unchanged.

The layers are built from recorded ops (linear, and one fused cell per step: nn/_rnn_fused.py), so autograd,
autocast and the allocator's accounting work as for any other layer; there is no cuDNN RNN. The input's projection
is one GEMM over all time steps per layer and direction; only the hidden state's projection runs step by step.
Padded input and a PackedSequence take the same path: a padded batch is a packed one whose every step has the whole
batch, and a step of a packed one runs on its first batch_sizes[t] rows (the batch is sorted by decreasing length),
so each sequence's last state is the one its own last step left."""
import math
import numbers
import warnings

from .. import functional as F
from .. import init
from ..._core.autocast import _applies, _state as _autocast_state
from ..._core.creation import cat, stack, zeros
from ..._core.tensor_misc import promote_types
from .._packed import PackedSequence
from ..._core.indexing import SplitFn
from .._rnn_fused import GRUStep, LSTMStep
from .._rnn_layer import LSTMLayer
from ..parameter import Parameter
from ._utils import new_tensor
from .module import Module

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _autocast_on(t):
    """Whether autocast applies to t: its device's, or any for a meta tensor (the estimate's replay runs the
    model on meta under the script's CPU or CUDA autocast)."""
    return _autocast_state.enabled and _applies(t)


def _as(dtype, *ts):
    return tuple(t if t.dtype == dtype else t.to(dtype) for t in ts)


def _step(mode, gi, states, w_hh, b_hh, w_hr):
    """The states after one step, from this step's input projection gi = x W_ih^T + b_ih.

    The fused cells take one dtype. Under autocast the projections come out in the autocast dtype while the states
    may not; as PyTorch does there, the LSTM then runs in the projections' dtype (its output and states come out in
    it) and the GRU in the wider of the two."""
    gh = F.linear(states[0], w_hh, b_hh)
    if mode == "LSTM":
        gh, c = _as(gi.dtype, gh, states[1])
        h, c = LSTMStep.apply(gi, gh, c)
        return (h if w_hr is None else F.linear(h, w_hr)), c
    if mode == "GRU":
        wide = promote_types(promote_types(gi.dtype, gh.dtype), states[0].dtype)
        return (GRUStep.apply(*_as(wide, gi, gh, states[0])),)
    pre = gi + gh
    return (pre.tanh() if mode == "RNN_TANH" else F.relu(pre),)


def _check_dims(name, what, t, dims):
    if t.ndim not in dims:
        raise ValueError(f"{name}: Expected {what} to be 1D or 2D, got {t.ndim}D instead")


class RNNBase(Module):
    """The common part of RNN, LSTM and GRU: PyTorch's parameters (weight_ih_l{k}[_reverse], weight_hh_l{k},
    bias_ih_l{k}, bias_hh_l{k}, weight_hr_l{k} with proj_size), their checks and initialisation, and the run over a
    (packed) sequence."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        if not isinstance(dropout, numbers.Number) or isinstance(dropout, bool) or not 0 <= dropout <= 1:
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an "
                             "element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn(f"dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and num_layers={num_layers}",
                          stacklevel=2)
        for name, value, kind in (("bias", bias, bool), ("batch_first", batch_first, bool),
                                  ("input_size", input_size, int), ("hidden_size", hidden_size, int)):
            if not isinstance(value, kind):
                raise TypeError(f"{name} should be of type {kind.__name__}, got: {type(value).__name__}")
        if input_size <= 0:
            raise ValueError("input_size must be greater than zero")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if mode not in _GATES:
            raise ValueError("Unrecognized RNN mode: " + mode)
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        gate_size = _GATES[mode] * hidden_size
        out_size = proj_size if proj_size > 0 else hidden_size
        self._flat_weights_names = []
        self._all_weights = []
        for layer in range(num_layers):
            for direction in range(self._directions):
                suffix = "_reverse" if direction == 1 else ""
                shapes = [("weight_ih", (gate_size, input_size if layer == 0 else out_size * self._directions)),
                          ("weight_hh", (gate_size, out_size))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size > 0:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                names = []
                for stem, shape in shapes:
                    names.append(f"{stem}_l{layer}{suffix}")
                    setattr(self, names[-1], Parameter(new_tensor(shape, device, dtype)))
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    @property
    def _directions(self):
        return 2 if self.bidirectional else 1

    @property
    def _flat_weights(self):
        # looked up on every use, so that .to(), load_state_dict(assign=True) and functional_call are seen; a list
        # assigned to it (higher's fast weights) is what the forward runs with, as PyTorch's
        given = self.__dict__.get("_flat_weights_given")
        return list(given) if given is not None else [getattr(self, n, None) for n in self._flat_weights_names]

    @_flat_weights.setter
    def _flat_weights(self, weights):
        self.__dict__["_flat_weights_given"] = list(weights)

    @property
    def all_weights(self):
        flat = dict(zip(self._flat_weights_names, self._flat_weights))
        return [[flat[n] for n in names] for names in self._all_weights]

    def flatten_parameters(self):
        """A no-op: PyTorch packs the weights into one buffer for cuDNN; gpumemnet's layers use them as they are."""

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size)
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    # ---- forward ----------------------------------------------------------------------------------------------
    def _state_sizes(self):
        """The last dims of the states: (h,) or, for an LSTM, (h, c)."""
        out = self.proj_size if self.proj_size > 0 else self.hidden_size
        return (out, self.hidden_size) if self.mode == "LSTM" else (self.hidden_size,)

    def _check_input(self, data, packed):
        weight = self._flat_weights[0]
        if data.dtype != weight.dtype and not _autocast_on(data):
            raise ValueError(f"RNN input dtype ({data.dtype}) does not match weight dtype ({weight.dtype}). Convert "
                             f"input: input.to({weight.dtype}), or convert model: model.to({data.dtype})")
        expected = 2 if packed else 3
        if data.ndim != expected:
            raise RuntimeError(f"input must have {expected} dimensions, got {data.ndim}")
        if data.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, got "
                               f"{data.shape[-1]}")

    def _check_states(self, states, batch):
        for i, (s, size) in enumerate(zip(states, self._state_sizes())):
            expected = (self.num_layers * self._directions, batch, size)
            if tuple(s.shape) != expected:
                which = f"hidden[{i}]" if self.mode == "LSTM" else "hidden"
                raise RuntimeError(f"Expected {which} size {expected}, got {list(s.shape)}")

    def forward(self, input, hx=None):
        """input: (L, N, H_in) ((N, L, H_in) with batch_first), (L, H_in) unbatched, or a PackedSequence; hx: the
        initial state(s) (D * num_layers, N, H), zeros when None. Returns (output, h_n), or (output, (h_n, c_n))
        for an LSTM, with output of the input's kind."""
        lstm = self.mode == "LSTM"
        packed = isinstance(input, PackedSequence)
        batched = True
        if packed:
            data, batch_sizes = input.data, [int(n) for n in input.batch_sizes.tolist()]
            batch = batch_sizes[0]
            self._check_input(data, True)
        else:
            if input.ndim not in (2, 3):
                rnn = self.mode.startswith("RNN")
                name, got = ("RNN", f"{input.ndim}D tensor") if rnn else (self.mode, f"{input.ndim}D")
                raise ValueError(f"{name}: Expected input to be 2D or 3D, got {got} instead")
            batched = input.ndim == 3
            if not batched:
                input = input.unsqueeze(0 if self.batch_first else 1)
            self._check_input(input, False)
            if self.batch_first:
                input = input.transpose(0, 1)
            steps, batch = input.shape[0], input.shape[1]
            data, batch_sizes = input.reshape(steps * batch, input.shape[2]), [batch] * steps
        states = self._initial_states(hx, data, batch, batched, packed, input)
        out, finals = self._run(data, batch_sizes, states)
        finals = tuple(stack(f, 0) for f in finals)
        if packed:
            output = PackedSequence(out, input.batch_sizes, input.sorted_indices, input.unsorted_indices)
            if input.unsorted_indices is not None:
                finals = tuple(f.index_select(1, input.unsorted_indices) for f in finals)
        else:
            output = out.reshape(steps, batch, out.shape[1])
            if self.batch_first:
                output = output.transpose(0, 1)
            if not batched:
                output = output.squeeze(0 if self.batch_first else 1)
                finals = tuple(f.squeeze(1) for f in finals)
        return output, (finals if lstm else finals[0])

    def _initial_states(self, hx, data, batch, batched, packed, input):
        """hx as a tuple of (D * num_layers, N, H) states in the packed batch's order, checked."""
        if hx is None:
            rows = self.num_layers * self._directions
            return tuple(zeros((rows, batch, size), dtype=data.dtype, device=data.device)
                         for size in self._state_sizes())
        states = tuple(hx) if self.mode == "LSTM" else (hx,)
        if not packed:
            want = 3 if batched else 2
            if any(s.ndim != want for s in states):
                kind = "batched 3-D" if batched else "unbatched 2-D"
                if self.mode == "LSTM":
                    dims = ", ".join(f"{s.ndim}-D" for s in states)
                    raise RuntimeError(f"For {kind} input, hx and cx should also be {want}-D but got ({dims}) tensors")
                raise RuntimeError(f"For {kind} input, hx should also be {want}-D but got {states[0].ndim}-D tensor")
            if not batched:
                states = tuple(s.unsqueeze(1) for s in states)
        self._check_states(states, batch)
        if packed and input.sorted_indices is not None:
            states = tuple(s.index_select(1, input.sorted_indices) for s in states)
        return states

    def _run(self, data, batch_sizes, states):
        """All layers over the packed rows `data`: (output rows, [final states of each kind, one per layer and
        direction])."""
        weights = self.all_weights
        finals = [[] for _ in states]
        for layer in range(self.num_layers):
            outs = []
            for direction in range(self._directions):
                k = layer * self._directions + direction
                ws = weights[k]
                w_ih, w_hh = ws[0], ws[1]
                b_ih, b_hh = (ws[2], ws[3]) if self.bias else (None, None)
                w_hr = ws[-1] if self.proj_size > 0 else None
                gi = F.linear(data, w_ih, b_ih)
                out, last = self._direction(gi, batch_sizes, tuple(s[k] for s in states), w_hh, b_hh, w_hr,
                                            direction == 1)
                outs.append(out)
                for f, s in zip(finals, last):
                    f.append(s)
            data = outs[0] if len(outs) == 1 else cat(outs, 1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                data = F.dropout(data, self.dropout, True)
        return data, finals

    def _one_node(self, gi, batch_sizes, init_states, w_hh, b_hh, w_hr):
        """Whether an LSTM direction runs as one node (_rnn_layer.py): every row runs every step, no projection, one
        dtype throughout (autocast's casts stay with the per-step path)."""
        if self.mode != "LSTM" or w_hr is not None or not batch_sizes or _autocast_on(gi):
            return False
        n = batch_sizes[0]
        return all(b == n for b in batch_sizes) and init_states[0].shape[0] == n and \
            all(t is None or t.dtype == gi.dtype for t in (*init_states, w_hh, b_hh))

    def _direction(self, gi, batch_sizes, init_states, w_hh, b_hh, w_hr, reverse):
        """One direction of one layer: the output rows (in data's packed order) and each sequence's last states."""
        if self._one_node(gi, batch_sizes, init_states, w_hh, b_hh, w_hr):
            out, h, c = LSTMLayer.apply(gi, *init_states, w_hh, b_hh, len(batch_sizes), reverse)
            return out, (h, c)
        steps = SplitFn.apply(gi, batch_sizes) if batch_sizes else ()
        order = range(len(batch_sizes) - 1, -1, -1) if reverse else range(len(batch_sizes))
        # The live states hold the rows still running. Forward, the batch shrinks: rows that end leave their last
        # state in `done`. Backward, it grows: rows that start join with their initial state.
        live = tuple(s[:batch_sizes[order[0]]] if order else s for s in init_states)
        done, outs = [], []
        for t in order:
            bs, rows = batch_sizes[t], live[0].shape[0]
            if bs < rows:
                done.append(tuple(s[bs:] for s in live))
                live = tuple(s[:bs] for s in live)
            elif bs > rows:
                live = tuple(cat([s, s0[rows:bs]], 0) for s, s0 in zip(live, init_states))
            live = _step(self.mode, steps[t], live, w_hh, b_hh, w_hr)
            outs.append(live[0])
        if reverse:
            outs.reverse()
        last = tuple(cat([s] + [d[i] for d in reversed(done)], 0) if done else s for i, s in enumerate(live))
        out = cat(outs, 0) if outs else gi[:, :0]
        return out, last


class RNN(RNNBase):
    """An Elman RNN: h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh) (or relu with nonlinearity="relu").
    RNN(input_size, hidden_size, num_layers=1, nonlinearity='tanh', bias=True, batch_first=False, dropout=0.0,
    bidirectional=False, device=None, dtype=None)."""

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            self.nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            self.nonlinearity = kwargs.pop("nonlinearity", "tanh")
        modes = {"tanh": "RNN_TANH", "relu": "RNN_RELU"}
        if self.nonlinearity not in modes:
            raise ValueError(f"Unknown nonlinearity '{self.nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__(modes[self.nonlinearity], *args, **kwargs)


class LSTM(RNNBase):
    """A long short-term memory layer; forward returns (output, (h_n, c_n)). With proj_size > 0 the hidden state
    is projected to proj_size by weight_hr."""

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)


class GRU(RNNBase):
    """A gated recurrent unit layer, PyTorch's (and cuDNN's) form: n = tanh(W_in x + b_in + r * (W_hn h + b_hn))."""

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)


class RNNCellBase(Module):
    """The parameters of a one-step cell: weight_ih (chunks * hidden, input), weight_hh, bias_ih, bias_hh."""

    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = Parameter(new_tensor((num_chunks * hidden_size, input_size), device, dtype))
        self.weight_hh = Parameter(new_tensor((num_chunks * hidden_size, hidden_size), device, dtype))
        if bias:
            self.bias_ih = Parameter(new_tensor((num_chunks * hidden_size,), device, dtype))
            self.bias_hh = Parameter(new_tensor((num_chunks * hidden_size,), device, dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size)
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def _prepare(self, input, states):
        """input and states as 2-D batches (a 1-D input is one sample), checked as PyTorch's cells check them;
        zeros for missing states. Returns (input, states, batched)."""
        name = type(self).__name__
        _check_dims(name, "input", input, (1, 2))
        batched = input.ndim == 2
        if not batched:
            input = input.unsqueeze(0)
        if input.shape[1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.shape[1]} expected {self.input_size}")
        out = []
        for i, s in enumerate(states):
            if s is None:
                s = zeros((input.shape[0], self.hidden_size), dtype=input.dtype, device=input.device)
            elif not batched:
                s = s.unsqueeze(0)
            if s.shape[0] != input.shape[0]:
                raise RuntimeError(f"Input batch size {input.shape[0]} doesn't match hidden{i} batch size "
                                   f"{s.shape[0]}")
            if s.shape[1] != self.hidden_size:
                raise RuntimeError(f"hidden{i} has inconsistent hidden_size: got {s.shape[1]}, expected "
                                   f"{self.hidden_size}")
            out.append(s)
        return input, out, batched

    def _input_gates(self, input):
        return F.linear(input, self.weight_ih, self.bias_ih)


class RNNCell(RNNCellBase):
    """One step of an Elman RNN: h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (or relu)."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        if hx is not None:
            _check_dims("RNNCell", "hidden", hx, (1, 2))
        if self.nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        input, (h,), batched = self._prepare(input, (hx,))
        mode = "RNN_TANH" if self.nonlinearity == "tanh" else "RNN_RELU"
        h, = _step(mode, self._input_gates(input), (h,), self.weight_hh, self.bias_hh, None)
        return h if batched else h.squeeze(0)


class LSTMCell(RNNCellBase):
    """One step of an LSTM: (h', c') from input and (h, c)."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        if hx is not None:
            for i, s in enumerate(hx):
                _check_dims("LSTMCell", f"hx[{i}]", s, (1, 2))
        input, (h, c), batched = self._prepare(input, (None, None) if hx is None else tuple(hx))
        gi = self._input_gates(input)
        if gi.dtype != c.dtype:
            # under autocast: PyTorch's lstm_cell is composed of ops there, the gates in the autocast dtype and the
            # cell state widened by c's dtype (float32 states give float32 outputs), which the fused step is not
            i, f, g, o = (gi + F.linear(h, self.weight_hh, self.bias_hh)).chunk(4, 1)
            c = f.sigmoid() * c + i.sigmoid() * g.tanh()
            h = o.sigmoid() * c.tanh()
        else:
            h, c = _step("LSTM", gi, (h, c), self.weight_hh, self.bias_hh, None)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """One step of a GRU."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        if hx is not None:
            _check_dims("GRUCell", "hidden", hx, (1, 2))
        input, (h,), batched = self._prepare(input, (hx,))
        h, = _step("GRU", self._input_gates(input), (h,), self.weight_hh, self.bias_hh, None)
        return h if batched else h.squeeze(0)
