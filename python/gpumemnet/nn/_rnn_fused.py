"""The recurrent layers' per-step work as single graph nodes (nn/modules/rnn.py runs them).

Written with recorded ops, an LSTM step is about fifteen nodes, and the backward of each of the four gate slices
fills a gradient the size of all four gates; over a sequence that cost, not the GEMMs, dominated (13x PyTorch's
time on a 2-layer LSTM). Here an LSTM or GRU step is one node running one fused kernel each way (_C.lstm_cell,
_C.gru_cell: kernels/rnn_cell.h), as PyTorch's fused cells do, and the input projection of all steps (one GEMM) is
cut into steps by one node whose backward is one cat (_core/indexing.py's SplitFn). Nothing inside these forwards is
recorded."""
from .. import _C
from .._core.autograd import Function


def _zeros(shape, dtype, device):
    """The gradient of an output no gradient reached, where the backward needs a tensor."""
    return _C.fill_(_C.empty(shape, dtype, device), 0.0)


def _or_zeros(g, like):
    """g, or zeros shaped like `like` (the fused kernels take no None: their loops have no branch, so they
    vectorise)."""
    return g if g is not None else _zeros(tuple(like.shape), like._dtype, like._device)


class LSTMStep(Function):
    """(h', c') from the input and hidden projections gi, gh (N, 4H: gates i, f, g, o) and c (N, H): one fused kernel
    each way (kernels/rnn_cell.h). Saved: the activated gates and c, c' (which the next step and the caller hold
    anyway)."""

    @staticmethod
    def forward(ctx, gi, gh, c):
        h, c_new, act = _C.lstm_cell(gi, gh, c)
        if ctx.needs_input_grad:
            ctx.save_for_backward(act, c, c_new)
        return h, c_new

    @staticmethod
    def backward(ctx, dh, dc=None):  # the engine passes no gradient for trailing outputs that got none
        act, c, c_new = ctx._unpacked
        d_gates, dc_prev = _C.lstm_cell_backward(_or_zeros(dh, c), _or_zeros(dc, c), act, c, c_new)
        return d_gates, d_gates, dc_prev if ctx.needs_input_grad[2] else None


class GRUStep(Function):
    """h' from the input and hidden projections gi, gh (N, 3H: r, z, n) and h (N, H), one fused kernel each way:
    r = sigmoid(r_i + r_h), z = sigmoid(z_i + z_h), n = tanh(n_i + r * n_h), h' = n + z * (h - n). Saved: r, z, n
    and a copy of n_h (N, 4H), and h."""

    @staticmethod
    def forward(ctx, gi, gh, h):
        h_new, ws = _C.gru_cell(gi, gh, h)
        if ctx.needs_input_grad:
            ctx.save_for_backward(ws, h)
        return h_new

    @staticmethod
    def backward(ctx, dh):
        ws, h = ctx._unpacked
        return _C.gru_cell_backward(dh, ws, h)
