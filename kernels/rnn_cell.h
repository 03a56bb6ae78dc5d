/* kernels/rnn_cell.h — the fused LSTM and GRU cells, one step of a recurrent layer as one kernel each way
 * (kernels/cpu/rnn_cell.h and kernels/cuda/rnn_cell.h declare them; python/gpumemnet/nn/_rnn_fused.py runs them).
 *
 * Written as separate ops, an LSTM step is about fifteen kernels forward and twenty-five backward, each one pass
 * over the step's (N, 4H) gates; here it is one pass each way, as PyTorch's fused cells are on CUDA.
 *
 * Layouts (all contiguous, one float dtype, N rows of the batch, H the hidden size):
 *   LSTM  gi, gh (N, 4H): the input and hidden projections, biases included, gates in PyTorch's order i, f, g, o;
 *         c (N, H) the previous cell. act (N, 4H) keeps the activated gates sigmoid(i), sigmoid(f), tanh(g),
 *         sigmoid(o) for backward, which recomputes tanh(c') from c' rather than keeping it (N*H fewer elements a
 *         step).
 *   GRU   gi, gh (N, 3H): gates r, z, n; h (N, H) the previous state. ws (N, 4H) keeps r, z, n and n_h (the hidden
 *         projection's n part, which backward needs: keeping a copy lets gh itself go).
 * The arithmetic is in double from each dtype's values (transcendentals in single precision below float64), as the
 * other nn kernels: the helpers below are that arithmetic, shared by both backends. */
#ifndef GM_KERNELS_RNN_CELL_H
#define GM_KERNELS_RNN_CELL_H

#include "common.h"

/* One LSTM element's gradients: those of the gates' pre-activations i, f, g, o and of the previous cell, from dh and
 * dc (0 for an output that got no gradient), the activated gates, the previous cell c and tc = tanh(c'). A struct
 * returned by value, not pointers: a CPU loop around it stays vectorisable. */
typedef struct {
    double i, f, g, o, c_prev;
} rnn_lstm_grad;

GM_HD static inline rnn_lstm_grad rnn_lstm_grads(double dh, double dc, double i, double f, double g, double o,
                                                 double c, double tc) {
    const double dct = dc + dh * o * (1.0 - tc * tc); /* the gradient reaching c', also through h = o tanh(c') */
    rnn_lstm_grad d;
    d.i = dct * g * i * (1.0 - i);
    d.f = dct * c * f * (1.0 - f);
    d.g = dct * i * (1.0 - g * g);
    d.o = dh * tc * o * (1.0 - o);
    d.c_prev = dct * f;
    return d;
}

/* One GRU element's gradients for h' = n + z (h - n), n = tanh(gi_n + r n_h): those of the pre-activations of r, z
 * and n (the input projection's; the hidden projection's n part is n * r) and of the previous state, through z. */
typedef struct {
    double r, z, n, h_prev;
} rnn_gru_grad;

GM_HD static inline rnn_gru_grad rnn_gru_grads(double dh, double r, double z, double n, double n_h, double h) {
    rnn_gru_grad d;
    d.n = dh * (1.0 - z) * (1.0 - n * n);
    d.z = dh * (h - n) * z * (1.0 - z);
    d.r = d.n * n_h * r * (1.0 - r);
    d.h_prev = dh * z;
    return d;
}

#endif
