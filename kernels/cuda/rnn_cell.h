/* kernels/cuda/rnn_cell.h — CUDA entry points of kernels/cpu/rnn_cell.h (same arguments and results, with
 * `int nthreads` replaced by the device context; pointers are device pointers; see kernels/cuda/README.md). */
#ifndef GM_KERNELS_CUDA_RNN_CELL_H
#define GM_KERNELS_CUDA_RNN_CELL_H

#include "../common.h"
#include "cuda_ctx.h"

#ifdef __cplusplus
extern "C" {
#endif

int cuda_lstm_cell_forward(void *h, void *c_new, void *act, const void *gi, const void *gh, const void *c, int64_t N,
                           int64_t H, gm_dtype dt, gm_cuda_ctx *ctx);
int cuda_lstm_cell_backward(void *d_gates, void *dc_prev, const void *dh, const void *dc, const void *act,
                            const void *c, const void *c_new, int64_t N, int64_t H, gm_dtype dt, gm_cuda_ctx *ctx);
int cuda_gru_cell_forward(void *h_new, void *ws, const void *gi, const void *gh, const void *h, int64_t N, int64_t H,
                          gm_dtype dt, gm_cuda_ctx *ctx);
int cuda_gru_cell_backward(void *d_gi, void *d_gh, void *dh_prev, const void *dh, const void *ws, const void *h,
                           int64_t N, int64_t H, gm_dtype dt, gm_cuda_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif
