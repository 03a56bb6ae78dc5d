/* kernels/cuda/ctc.cu — the CTC loss on CUDA (the CPU twin and its layouts: kernels/cpu/ctc.c, ctc.h). One block
 * per sample walks its time steps in order, its threads across the extended sequence's states (forward: alpha;
 * backward: beta, in two rows of the scratch), with a __syncthreads() between steps; the backward's threads then
 * take the classes of the step, each summing alpha * beta over the states of its label, as PyTorch's kernel does. */
#include "../ctc.h"
#include "ctc.h"
#include "nn_common.cuh"

/* Whether sample n's lengths and labels are in range (else its outputs are NaN: see ctc.h). */
NN_DEV bool ctc_sample_ok(const int64_t *tg, int64_t Tn, int64_t Ln, int64_t T, int64_t C, int64_t L) {
    if (Tn < 0 || Tn > T || Ln < 0 || Ln > L) return false;
    for (int64_t i = 0; i < Ln; i++)
        if (tg[i] < 0 || tg[i] >= C) return false;
    return true;
}

template <int DT>
__global__ void ctc_fwd_kernel(void *nll, void *log_alpha, const void *lp, const int64_t *targets,
                               const int64_t *in_lens, const int64_t *tg_lens, int64_t T, int64_t N, int64_t C,
                               int64_t L, int64_t blank) {
    const int64_t W = 2 * L + 1;
    for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
        const int64_t Tn = in_lens[n], S = 2 * tg_lens[n] + 1, a0 = n * T * W;
        const int64_t *tg = targets + n * L;
        const bool ok = ctc_sample_ok(tg, Tn, tg_lens[n], T, C, L);
        if (!ok || Tn == 0) { /* the same for every thread of the block: none waits at a barrier alone */
            if (threadIdx.x == 0) nn_st<DT>(nll, n, !ok ? NAN : tg_lens[n] == 0 ? 0.0 : INFINITY);
            continue;
        }
        for (int64_t s = threadIdx.x; s < S; s += blockDim.x)
            nn_st<DT>(log_alpha, a0 + s, s < 2 ? nn_ld<DT>(lp, n * C + ctc_label(tg, s, blank)) : -INFINITY);
        __syncthreads();
        for (int64_t t = 1; t < Tn; t++) {
            const int64_t prev = a0 + (t - 1) * W, cur = prev + W, row = (t * N + n) * C;
            for (int64_t s = threadIdx.x; s < S; s += blockDim.x) {
                const double stay = nn_ld<DT>(log_alpha, prev + s);
                const double step = s > 0 ? nn_ld<DT>(log_alpha, prev + s - 1) : -INFINITY;
                const double skip = ctc_can_skip(tg, s) ? nn_ld<DT>(log_alpha, prev + s - 2) : -INFINITY;
                const double a = ctc_log_add3(stay, step, skip, DT != GM_F64);
                const double emit = nn_ld<DT>(lp, row + ctc_label(tg, s, blank));
                nn_st<DT>(log_alpha, cur + s, a == -INFINITY ? a : a + emit);
            }
            __syncthreads();
        }
        if (threadIdx.x == 0) {
            const int64_t last = a0 + (Tn - 1) * W;
            const double end = S > 1 ? ctc_log_add(nn_ld<DT>(log_alpha, last + S - 1),
                                                   nn_ld<DT>(log_alpha, last + S - 2), DT != GM_F64)
                                     : nn_ld<DT>(log_alpha, last);
            nn_st<DT>(nll, n, -end);
        }
        __syncthreads(); /* the next sample of this block starts from a finished one */
    }
}

template <int DT>
__global__ void ctc_bwd_kernel(void *grad, const void *gout, const void *lp, const int64_t *targets,
                               const int64_t *in_lens, const int64_t *tg_lens, const void *log_alpha, const void *nll,
                               int64_t T, int64_t N, int64_t C, int64_t L, int64_t blank, int zero_infinity,
                               double *scratch) {
    const int64_t W = 2 * L + 1;
    for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
        const int64_t *tg = targets + n * L;
        const bool ok = ctc_sample_ok(tg, in_lens[n], tg_lens[n], T, C, L);
        const int64_t Tn = ok ? in_lens[n] : 0, S = 2 * tg_lens[n] + 1;
        const double g = nn_ld<DT>(gout, n), nl = nn_ld<DT>(nll, n);
        for (int64_t i = threadIdx.x; i < (T - Tn) * C; i += blockDim.x)
            nn_st<DT>(grad, ((Tn + i / C) * N + n) * C + i % C, ok ? 0.0 : NAN);
        if (nl == INFINITY) { /* impossible alignment: PyTorch's NaN, or zero_infinity's 0 */
            for (int64_t i = threadIdx.x; i < Tn * C; i += blockDim.x)
                nn_st<DT>(grad, ((i / C) * N + n) * C + i % C, zero_infinity ? 0.0 : NAN);
            continue;
        }
        double *beta = scratch + n * (2 * W + C), *next = beta + W;
        for (int64_t t = Tn - 1; t >= 0; t--) {
            const int64_t row = (t * N + n) * C, a = (n * T + t) * W;
            for (int64_t s = threadIdx.x; s < S; s += blockDim.x) {
                double b;
                if (t == Tn - 1) {
                    b = s >= S - 2 ? 0.0 : -INFINITY;
                } else {
                    b = ctc_log_add3(next[s], s + 1 < S ? next[s + 1] : -INFINITY,
                                     s + 2 < S && ctc_can_skip(tg, s + 2) ? next[s + 2] : -INFINITY, DT != GM_F64);
                }
                beta[s] = b == -INFINITY ? b : b + nn_ld<DT>(lp, row + ctc_label(tg, s, blank));
            }
            __syncthreads();
            for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
                /* the states of label c, in the CPU's order: a label's are odd; the blank's every even one (and any
                 * odd one where a target names the blank) */
                double lcab = -INFINITY;
                for (int64_t s = c == blank ? 0 : 1; s < S; s += c == blank ? 1 : 2)
                    if (ctc_label(tg, s, blank) == c)
                        lcab = ctc_log_add(lcab, nn_ld<DT>(log_alpha, a + s) + beta[s], DT != GM_F64);
                const double v = nn_ld<DT>(lp, row + c);
                nn_st<DT>(grad, row + c, g * (nn_exp<DT>(v) - nn_exp<DT>(lcab + nl - v)));
            }
            __syncthreads(); /* beta becomes next: every thread has read it */
            double *swap = beta;
            beta = next;
            next = swap;
        }
    }
}

/* The CPU kernels' argument checks (the values live on the device: see ctc.h). */
static bool ctc_args_ok(int64_t T, int64_t N, int64_t C, int64_t L, int64_t blank, gm_dtype dt) {
    return gm_dtype_is_float(dt) && T >= 0 && N >= 0 && C >= 1 && L >= 0 && blank >= 0 && blank < C;
}

/* One block per sample, grid-strided past the grid's cap. */
static unsigned ctc_grid(int64_t N) { return (unsigned)gm_cu_min<int64_t>(N, GM_CU_MAX_BLOCKS); }

extern "C" int cuda_ctc_loss_forward(void *nll, void *log_alpha, const void *log_probs, const int64_t *targets,
                                     const int64_t *in_lens, const int64_t *tg_lens, int64_t T, int64_t N, int64_t C,
                                     int64_t L, int64_t blank, gm_dtype dt, gm_cuda_ctx *ctx) {
    if (!ctc_args_ok(T, N, C, L, blank, dt)) return GM_ERR_ARG;
    if (N == 0) return GM_OK;
#define CALL(DT)                                                                                             \
    GM_LAUNCH(ctc_fwd_kernel<DT>, ctc_grid(N), GM_CU_THREADS, ctx, nll, log_alpha, log_probs, targets, in_lens,  \
              tg_lens, T, N, C, L, blank)
    NN_CU_DISPATCH(dt, CALL)
#undef CALL
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}

extern "C" int cuda_ctc_loss_backward(void *grad, const void *gout, const void *log_probs, const int64_t *targets,
                                      const int64_t *in_lens, const int64_t *tg_lens, const void *log_alpha,
                                      const void *nll, int64_t T, int64_t N, int64_t C, int64_t L, int64_t blank,
                                      int zero_infinity, double *scratch, gm_dtype dt, gm_cuda_ctx *ctx) {
    if (!ctc_args_ok(T, N, C, L, blank, dt)) return GM_ERR_ARG;
    if (N == 0) return GM_OK;
#define CALL(DT)                                                                                             \
    GM_LAUNCH(ctc_bwd_kernel<DT>, ctc_grid(N), GM_CU_THREADS, ctx, grad, gout, log_probs, targets, in_lens, tg_lens, \
              log_alpha, nll, T, N, C, L, blank, zero_infinity, scratch)
    NN_CU_DISPATCH(dt, CALL)
#undef CALL
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}
