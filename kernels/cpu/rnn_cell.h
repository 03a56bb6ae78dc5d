/* kernels/cpu/rnn_cell.h — the fused LSTM and GRU cells on the CPU (layouts and math: kernels/rnn_cell.h). Any
 * float dtype; pure compute, nothing allocated; GM_ERR_ARG for a non-float dtype or a negative size. */
#ifndef GM_KERNELS_CPU_RNN_CELL_H
#define GM_KERNELS_CPU_RNN_CELL_H

#include "../rnn_cell.h"

/* h, c_new (N, H) and act (N, 4H) from gi, gh (N, 4H) and c (N, H). */
int lstm_cell_forward(void *h, void *c_new, void *act, const void *gi, const void *gh, const void *c, int64_t N,
                      int64_t H, gm_dtype dt, int nthreads);

/* d_gates (N, 4H), the gradient of gi and of gh alike, and dc_prev (N, H) from dh and dc (N, H; zeros where no
 * gradient reached that output) and what forward kept: act, c and c_new. No pointer may be NULL: a loop without
 * branches is one that vectorises. */
int lstm_cell_backward(void *d_gates, void *dc_prev, const void *dh, const void *dc, const void *act, const void *c,
                       const void *c_new, int64_t N, int64_t H, gm_dtype dt, int nthreads);

/* h_new (N, H) and ws (N, 4H) from gi, gh (N, 3H) and h (N, H). */
int gru_cell_forward(void *h_new, void *ws, const void *gi, const void *gh, const void *h, int64_t N, int64_t H,
                     gm_dtype dt, int nthreads);

/* d_gi (N, 3H), d_gh (N, 3H) and dh_prev (N, H) from dh (N, H), ws and h. */
int gru_cell_backward(void *d_gi, void *d_gh, void *dh_prev, const void *dh, const void *ws, const void *h, int64_t N,
                      int64_t H, gm_dtype dt, int nthreads);

#endif
