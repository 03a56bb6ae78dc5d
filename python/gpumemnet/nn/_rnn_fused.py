"""The recurrent layers' per-step work as single graph nodes (nn/modules/rnn.py runs them).

Written with recorded ops, an LSTM step is about fifteen nodes, and the backward of each of the four gate slices
fills a gradient the size of all four gates; over a sequence that cost, not the GEMMs, dominated (13x PyTorch's
time on a 2-layer LSTM). Here an LSTM or GRU step is one node whose backward writes the gates' gradient once, as
PyTorch's fused cells do, and the input projection of all steps (one GEMM) is cut into steps by one node whose
backward is one cat. The math runs on raw C ops: nothing inside these forwards is recorded."""
from .. import _C
from .._core.autograd import Function
from .._core.functions import ADD, MUL, SUB

SIGMOID, TANH = 2, 3  # kernels/activation_ops.h


def _act(op, x):
    return _C.activation(op, x, 0.0, None, 0.0)


def _mul(a, b):
    return _C.binary(MUL, a, b)


def _add(a, b):
    return _C.binary(ADD, a, b)


def _one_minus(a):
    return _C.binary(SUB, 1.0, a)


def _cols(x, k, n):
    """Columns [k*n, (k+1)*n) of a 2-D tensor (a view)."""
    return x._slice(1, k * n, (k + 1) * n, 1)


class Steps(Function):
    """x (rows of all steps) cut into consecutive row blocks of the given sizes: views; backward is one cat, with
    zeros for the blocks whose output got no gradient."""

    @staticmethod
    def forward(ctx, x, sizes):
        out, start = [], 0
        for n in sizes:
            out.append(x._slice(0, start, start + n, 1))
            start += n
        if ctx.needs_input_grad:
            ctx.shapes = [tuple(o.shape) for o in out]
        return tuple(out)

    @staticmethod
    def backward(ctx, *grads):
        parts = []
        grads = grads + (None,) * (len(ctx.shapes) - len(grads))  # the engine leaves out trailing outputs' Nones
        for g, shape in zip(grads, ctx.shapes):
            if g is None:
                dtype, device = next((h._dtype, h._device) for h in grads if h is not None)
                g = _C.fill_(_C.empty(shape, dtype, device), 0.0)
            parts.append(g)
        return _C.cat(parts, 0), None


class LSTMStep(Function):
    """(h', c') from the input and hidden projections gi, gh (N, 4H: gates i, f, g, o) and c (N, H)."""

    @staticmethod
    def forward(ctx, gi, gh, c):
        n = c.shape[1]
        gates = _add(gi, gh)
        act = _C.empty(gates.shape, gates._dtype, gates._device)
        for k in range(4):
            _C.copy_(_cols(act, k, n), _act(TANH if k == 2 else SIGMOID, _cols(gates, k, n)))
        i, f, g, o = (_cols(act, k, n) for k in range(4))
        c_new = _add(_mul(f, c), _mul(i, g))
        tc = _act(TANH, c_new)
        h = _mul(o, tc)
        if ctx.needs_input_grad:
            ctx.save_for_backward(act, c, tc)
        return h, c_new

    @staticmethod
    def backward(ctx, dh, dc=None):  # the engine passes no gradient for trailing outputs that got none
        act, c, tc = ctx.saved_tensors
        n = c.shape[1]
        i, f, g, o = (_cols(act, k, n) for k in range(4))
        dct = dc  # the gradient reaching c': from the next step's c and through h = o * tanh(c')
        d_gates = _C.empty(act.shape, act._dtype, act._device)
        if dh is not None:
            dct_h = _mul(_mul(dh, o), _one_minus(_mul(tc, tc)))
            dct = dct_h if dct is None else _add(dct, dct_h)
            _C.copy_(_cols(d_gates, 3, n), _mul(_mul(dh, tc), _mul(o, _one_minus(o))))
        else:
            _C.fill_(_cols(d_gates, 3, n), 0.0)
        if dct is None:
            dct = _C.fill_(_C.empty(c.shape, c._dtype, c._device), 0.0)
        _C.copy_(_cols(d_gates, 0, n), _mul(_mul(dct, g), _mul(i, _one_minus(i))))
        _C.copy_(_cols(d_gates, 1, n), _mul(_mul(dct, c), _mul(f, _one_minus(f))))
        _C.copy_(_cols(d_gates, 2, n), _mul(_mul(dct, i), _one_minus(_mul(g, g))))
        dc_prev = _mul(dct, f) if ctx.needs_input_grad[2] else None
        return d_gates, d_gates, dc_prev


class GRUStep(Function):
    """h' from the input and hidden projections gi, gh (N, 3H: r, z, n) and h (N, H):
    r = sigmoid(r_i + r_h), z = sigmoid(z_i + z_h), n = tanh(n_i + r * n_h), h' = n + z * (h - n)."""

    @staticmethod
    def forward(ctx, gi, gh, h):
        k = h.shape[1]
        r = _act(SIGMOID, _add(_cols(gi, 0, k), _cols(gh, 0, k)))
        z = _act(SIGMOID, _add(_cols(gi, 1, k), _cols(gh, 1, k)))
        n_h = _cols(gh, 2, k)
        n = _act(TANH, _add(_cols(gi, 2, k), _mul(r, n_h)))
        h_minus_n = _C.binary(SUB, h, n)
        out = _add(n, _mul(z, h_minus_n))
        if ctx.needs_input_grad:
            ctx.save_for_backward(r, z, n, n_h, h_minus_n)
        return out

    @staticmethod
    def backward(ctx, dh):
        r, z, n, n_h, h_minus_n = ctx.saved_tensors
        k = r.shape[1]
        dn = _mul(_mul(dh, _one_minus(z)), _one_minus(_mul(n, n)))
        dz = _mul(_mul(dh, h_minus_n), _mul(z, _one_minus(z)))
        dr = _mul(_mul(dn, n_h), _mul(r, _one_minus(r)))
        d_gi = _C.cat([dr, dz, dn], 1)
        d_gh = None
        if ctx.needs_input_grad[1]:  # n_h enters through r * n_h
            d_gh = _C.empty(d_gi.shape, d_gi._dtype, d_gi._device)
            _C.copy_(_cols(d_gh, 0, k), dr)
            _C.copy_(_cols(d_gh, 1, k), dz)
            _C.copy_(_cols(d_gh, 2, k), _mul(dn, r))
        dh_prev = _mul(dh, z) if ctx.needs_input_grad[2] else None
        return d_gi, d_gh, dh_prev
