"""One direction of an LSTM layer as one graph node (nn/modules/rnn.py runs it where every row runs every step and
there is no projection; elsewhere the per-step nodes of _rnn_fused.py).

Per step the forward is what the per-step nodes do: the hidden state's product by W_hh, the fused cell. What the
single node changes is the backward: with a node per step, the gradient of W_hh was T small products
d_gates_t^T (4H, N) @ h_{t-1} (N, H), one per step, each summed into the weight's gradient; here the steps' gate
gradients land in one (T N, 4H) array, and the weight's gradient is one product over all steps (as cuDNN and oneDNN
compute it), the bias's one column sum. The array of gate gradients is also the input projection's gradient: no cat
of T pieces. Kept: what the per-step nodes kept (each step's activated gates, c and the h the next step read), not
the output, which the caller may change in place as PyTorch's CPU layers allow."""
from .. import _C
from .._core.autograd import Function
from ._functional_conv import _linear_call
from ._rnn_fused import _or_zeros, _zeros


def _rows(t, step, n):
    return t._slice(0, step * n, (step + 1) * n, 1)


class LSTMLayer(Function):
    """(out (T N, H) in time order, h_T, c_T) from the input projection gi (T N, 4H: step t's rows t N .. t N + N),
    the initial h0, c0 (N, H), W_hh (4H, H) and b_hh (4H or None); `reverse` walks the steps from the last."""

    @staticmethod
    def forward(ctx, gi, h0, c0, w_hh, b_hh, steps, reverse):
        n = h0.shape[0]
        order = range(steps - 1, -1, -1) if reverse else range(steps)
        h, c, hs, acts, cs = h0, c0, [], [], []
        for t in order:
            h, c, act = _C.lstm_cell(_rows(gi, t, n), _linear_call(_C.linear, h, w_hh, b_hh), c)
            hs.append(h)
            acts.append(act)
            cs.append(c)
        if any(ctx.needs_input_grad):  # in the order the steps ran; the last h is read by no step
            ctx.save_for_backward(h0, c0, w_hh, *acts, *cs, *hs[:-1])
            ctx.steps, ctx.reverse, ctx.n = steps, reverse, n
        out = _C.cat(hs[::-1] if reverse else hs, 0) if hs else gi[:, :0]
        return out, h, c

    @staticmethod
    def backward(ctx, d_out, d_h=None, d_c=None):
        saved = ctx._unpacked
        h0, c0, w_hh = saved[:3]
        steps, n, reverse = ctx.steps, ctx.n, ctx.reverse
        acts, cs, prevs = saved[3:3 + steps], saved[3 + steps:3 + 2 * steps], (h0,) + saved[3 + 2 * steps:]
        dh_rec, dc = _or_zeros(d_h, h0), _or_zeros(d_c, h0)
        gates = _C.empty((steps * n, w_hh.shape[0]), h0._dtype, h0._device)
        # walked back: k-th processed step is time t(k); its previous c is the (k-1)-th's (c0 first)
        order = list(range(steps - 1, -1, -1) if reverse else range(steps))
        for k in range(steps - 1, -1, -1):
            t = order[k]
            dh = dh_rec if d_out is None else dh_rec + _rows(d_out, t, n)
            d_gates, dc = _C.lstm_cell_backward(dh, dc, acts[k], cs[k - 1] if k else c0, cs[k])
            _rows(gates, t, n).copy_(d_gates)
            dh_rec = _C.matmul(d_gates, w_hh)
            del d_gates, dh
        need = ctx.needs_input_grad
        d_w = d_b = None
        if need[3] and steps:  # each step's previous h, in time order, against its gate gradients
            d_w = _C.matmul(gates.t(), _C.cat(list(prevs[::-1] if reverse else prevs), 0))
        elif need[3]:
            d_w = _zeros(tuple(w_hh.shape), w_hh._dtype, w_hh._device)
        if need[4]:
            d_b = gates.sum(0)
        return (gates if need[0] else None), (dh_rec if need[1] else None), (dc if need[2] else None), d_w, d_b, \
            None, None

    def name(self):
        return "LSTMLayerBackward0"
