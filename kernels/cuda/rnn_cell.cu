/* kernels/cuda/rnn_cell.cu — the fused LSTM and GRU cells on CUDA (layouts and math: kernels/rnn_cell.h; the CPU
 * twin is kernels/cpu/rnn_cell.c, which these match to the last ulp of the libm difference). One thread per
 * (row, hidden unit): it reads that unit's gates and writes its outputs. */
#include "../rnn_cell.h"
#include "nn_common.cuh"
#include "rnn_cell.h"

template <int DT> NN_DEV double rnn_sigmoid(double v) { return 1.0 / (1.0 + nn_exp<DT>(-v)); }

/* Element e of the (N, H) outputs is row e / H, unit e % H; its gate k in an (N, G*H) array: */
#define AT_GATE(G, e, k) ((e) / H * (G) * H + (k) * H + (e) % H)

template <int DT>
__global__ void lstm_fwd_kernel(void *h, void *c_new, void *act, const void *gi, const void *gh, const void *c,
                                int64_t N, int64_t H) {
    GM_CU_GRID_STRIDE(e, N * H) {
        double a[4];
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const double v = nn_ld<DT>(gi, AT_GATE(4, e, k)) + nn_ld<DT>(gh, AT_GATE(4, e, k));
            a[k] = k == 2 ? nn_tanh<DT>(v) : rnn_sigmoid<DT>(v);
            nn_st<DT>(act, AT_GATE(4, e, k), a[k]);
        }
        const double cn = a[1] * nn_ld<DT>(c, e) + a[0] * a[2];
        nn_st<DT>(c_new, e, cn);
        nn_st<DT>(h, e, a[3] * nn_tanh<DT>(cn));
    }
}

template <int DT>
__global__ void lstm_bwd_kernel(void *d_gates, void *dc_prev, const void *dh, const void *dc, const void *act,
                                const void *c, const void *c_new, int64_t N, int64_t H) {
    GM_CU_GRID_STRIDE(e, N * H) {
        const rnn_lstm_grad d = rnn_lstm_grads(
            nn_ld<DT>(dh, e), nn_ld<DT>(dc, e), nn_ld<DT>(act, AT_GATE(4, e, 0)), nn_ld<DT>(act, AT_GATE(4, e, 1)),
            nn_ld<DT>(act, AT_GATE(4, e, 2)), nn_ld<DT>(act, AT_GATE(4, e, 3)), nn_ld<DT>(c, e),
            nn_tanh<DT>(nn_ld<DT>(c_new, e)));
        nn_st<DT>(d_gates, AT_GATE(4, e, 0), d.i);
        nn_st<DT>(d_gates, AT_GATE(4, e, 1), d.f);
        nn_st<DT>(d_gates, AT_GATE(4, e, 2), d.g);
        nn_st<DT>(d_gates, AT_GATE(4, e, 3), d.o);
        nn_st<DT>(dc_prev, e, d.c_prev);
    }
}

template <int DT>
__global__ void gru_fwd_kernel(void *h_new, void *ws, const void *gi, const void *gh, const void *h, int64_t N,
                               int64_t H) {
    GM_CU_GRID_STRIDE(e, N * H) {
        const double r = rnn_sigmoid<DT>(nn_ld<DT>(gi, AT_GATE(3, e, 0)) + nn_ld<DT>(gh, AT_GATE(3, e, 0)));
        const double z = rnn_sigmoid<DT>(nn_ld<DT>(gi, AT_GATE(3, e, 1)) + nn_ld<DT>(gh, AT_GATE(3, e, 1)));
        const double n_h = nn_ld<DT>(gh, AT_GATE(3, e, 2));
        const double n = nn_tanh<DT>(nn_ld<DT>(gi, AT_GATE(3, e, 2)) + r * n_h);
        nn_st<DT>(ws, AT_GATE(4, e, 0), r);
        nn_st<DT>(ws, AT_GATE(4, e, 1), z);
        nn_st<DT>(ws, AT_GATE(4, e, 2), n);
        nn_st<DT>(ws, AT_GATE(4, e, 3), n_h);
        nn_st<DT>(h_new, e, n + z * (nn_ld<DT>(h, e) - n));
    }
}

template <int DT>
__global__ void gru_bwd_kernel(void *d_gi, void *d_gh, void *dh_prev, const void *dh, const void *ws, const void *h,
                               int64_t N, int64_t H) {
    GM_CU_GRID_STRIDE(e, N * H) {
        const double r = nn_ld<DT>(ws, AT_GATE(4, e, 0));
        const rnn_gru_grad d = rnn_gru_grads(nn_ld<DT>(dh, e), r, nn_ld<DT>(ws, AT_GATE(4, e, 1)),
                                             nn_ld<DT>(ws, AT_GATE(4, e, 2)), nn_ld<DT>(ws, AT_GATE(4, e, 3)),
                                             nn_ld<DT>(h, e));
        nn_st<DT>(d_gi, AT_GATE(3, e, 0), d.r);
        nn_st<DT>(d_gi, AT_GATE(3, e, 1), d.z);
        nn_st<DT>(d_gi, AT_GATE(3, e, 2), d.n);
        nn_st<DT>(d_gh, AT_GATE(3, e, 0), d.r);
        nn_st<DT>(d_gh, AT_GATE(3, e, 1), d.z);
        nn_st<DT>(d_gh, AT_GATE(3, e, 2), d.n * r);
        nn_st<DT>(dh_prev, e, d.h_prev);
    }
}

/* The CPU kernels' checks, then KERNEL<dt> over the N * H elements with the arguments that follow. */
#define RNN_LAUNCH(KERNEL, ...)                                                                              \
    do {                                                                                                     \
        if (!gm_dtype_is_float(dt) || N < 0 || H < 0) return GM_ERR_ARG;                                     \
        if (N * H == 0) return GM_OK;                                                                        \
        const unsigned grid = gm_cu_blocks(N * H, ctx);                                                      \
        switch (dt) {                                                                                        \
        case GM_F32: GM_LAUNCH(KERNEL<GM_F32>, grid, GM_CU_THREADS, ctx, __VA_ARGS__); break;                \
        case GM_F64: GM_LAUNCH(KERNEL<GM_F64>, grid, GM_CU_THREADS, ctx, __VA_ARGS__); break;                \
        case GM_F16: GM_LAUNCH(KERNEL<GM_F16>, grid, GM_CU_THREADS, ctx, __VA_ARGS__); break;                \
        default: GM_LAUNCH(KERNEL<GM_BF16>, grid, GM_CU_THREADS, ctx, __VA_ARGS__); break;                   \
        }                                                                                                    \
        GM_CU_LAUNCHED(ctx);                                                                                 \
        return GM_OK;                                                                                        \
    } while (0)

extern "C" int cuda_lstm_cell_forward(void *h, void *c_new, void *act, const void *gi, const void *gh, const void *c,
                                      int64_t N, int64_t H, gm_dtype dt, gm_cuda_ctx *ctx) {
    RNN_LAUNCH(lstm_fwd_kernel, h, c_new, act, gi, gh, c, N, H);
}

extern "C" int cuda_lstm_cell_backward(void *d_gates, void *dc_prev, const void *dh, const void *dc, const void *act,
                                       const void *c, const void *c_new, int64_t N, int64_t H, gm_dtype dt,
                                       gm_cuda_ctx *ctx) {
    RNN_LAUNCH(lstm_bwd_kernel, d_gates, dc_prev, dh, dc, act, c, c_new, N, H);
}

extern "C" int cuda_gru_cell_forward(void *h_new, void *ws, const void *gi, const void *gh, const void *h, int64_t N,
                                     int64_t H, gm_dtype dt, gm_cuda_ctx *ctx) {
    RNN_LAUNCH(gru_fwd_kernel, h_new, ws, gi, gh, h, N, H);
}

extern "C" int cuda_gru_cell_backward(void *d_gi, void *d_gh, void *dh_prev, const void *dh, const void *ws,
                                      const void *h, int64_t N, int64_t H, gm_dtype dt, gm_cuda_ctx *ctx) {
    RNN_LAUNCH(gru_bwd_kernel, d_gi, d_gh, dh_prev, dh, ws, h, N, H);
}
