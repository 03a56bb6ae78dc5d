/* kernels/cpu/conv_internal.h — private to the CPU convolution kernels (conv.c and the files it lists): the index
 * arithmetic, how a pass shares its work (conv_plan, hb_plan and the tile constants), the OpenBLAS thread guard,
 * and the functions one file of the family calls in another, declared once for each element type. Nothing
 * outside kernels/cpu/conv*.c and linear.c includes it. */
#ifndef GM_KERNELS_CPU_CONV_INTERNAL_H
#define GM_KERNELS_CPU_CONV_INTERNAL_H

#include "conv.h"
#include "blas_threads.h"

#include <cblas.h>
#include <limits.h>
#include <omp.h>
#include <string.h>

/* Elements touched below which a loop stays on one thread: a fork/join costs a few microseconds. */
#define CONV_PARALLEL_GRAIN 32768

static inline int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* [*qa, *qb): the output columns q whose input column q*stride + off lies in [0, W), clipped to [0, Q). */
static inline void valid_cols(int64_t off, int64_t stride, int64_t W, int64_t Q, int64_t *qa, int64_t *qb) {
    int64_t lo = max64(0, -floor_div(off, stride)); /* ceil(-off / stride) */
    int64_t hi = min64(Q, floor_div(W - 1 - off, stride) + 1);
    *qa = min64(lo, Q);
    *qb = max64(hi, *qa);
}

static inline int use_threads(int nthreads, double work) {
    return nthreads > 1 && work >= CONV_PARALLEL_GRAIN ? nthreads : 1;
}


static inline int64_t ceil_div64(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Multiply-adds below which a pass runs on one thread. */
#define CONV_GEMM_GRAIN (1 << 20)

/* How a pass shares its work: nt threads; tiles of `tile` output positions; for the input-gradient, each
 * (item, group) split into `nchunk` blocks of channels. The im2col buffer is `slots` x tile columns. */
typedef struct {
    int nt;
    int64_t tile, nchunk, slots;
    /* 0: tiles of output positions within one item. >= 2 (float32/float64 forward and input-gradient, im2col):
     * a tile is `items` whole items side by side (tile = items * P * Q columns), so a deep layer with a small
     * image still feeds gemm CONV_TILE_MIN_COLS columns or more; each thread's buffer then also holds the tile's
     * gemm output (forward) or its gathered grad_output (input-gradient): K/G rows beside the C/G*R*S of the
     * columns (conv_item_col_nbytes). */
    int64_t items;
} conv_plan;

/* The most columns a thread's tile takes, whatever the limit allows: about CONV_TILE_TARGET bytes (the columns
 * then stay in L2 between im2col and gemm, and the buffer shrinks with the image, so a smaller micro-batch
 * or image needs less), but at least CONV_TILE_MIN_COLS columns, below which gemm runs short of its peak
 * (benchmarks/conv_gflops.py), rounded up to whole output rows. A constant of the geometry: deterministic, and
 * the same on meta as on the CPU. 256 KiB rather than the 1 MiB of earlier versions: the workspace is a fixed
 * cost that gradient accumulation cannot divide (2 MiB of a 23 MiB UNet step at 4 micro-batches), and the
 * step time did not move beyond the machine's noise (benchmarks/memory_techniques.py). */
#define CONV_TILE_TARGET ((size_t)256 << 10)
#define CONV_TILE_MIN_COLS 256
/* The half-precision passes' target (see hb_plan below). */
#define CONV_HALF_TILE_TARGET ((size_t)256 << 10)

/* The half-precision forward (conv2d_forward_half below) keeps the weight and bias widened to float32 at the
 * start of its workspace, then per thread a float32 column buffer and a float32 output tile (Kg rows): its
 * "column" is CRS + Kg floats. */
static inline int is_half(gm_dtype dt) { return dt == GM_F16 || dt == GM_BF16; }

static inline size_t half_fixed_nbytes(const conv_geom *g) {
    size_t n = (size_t)(g->K * (g->C / g->G) * g->R * g->S + g->K) * sizeof(float);
    return (n + 63) & ~(size_t)63; /* the buffers after it start on a cache line */
}

static inline size_t half_col_nbytes(const conv_geom *g) {
    return (size_t)((g->C / g->G) * g->R * g->S + g->K / g->G) * sizeof(float);
}


/* The half-precision backward passes (conv2d_backward_*_half below) keep the same shape of workspace: widened
 * weight (and bias) or the float32 weight-gradient first, then per thread a float32 plane block and tile
 * buffers. hb_plan says how a pass shares them.
 *   input-gradient: a unit is (item, group, block of `chunk` channels); its thread sums the block's gradient in a
 *     float32 plane buffer (chunk x H x W) and rounds it once; per position of a tile it needs the widened
 *     grad_output column (Kg) and the block's columns (chunk x R x S).
 *   weight-gradient: thread t owns rows [CRS t / nt, CRS (t+1) / nt) of the columns, so its share of the float32
 *     weight-gradient, and builds them `chunk` rows at a time; per position it needs those rows of the columns
 *     and the widened grad_output column (Kg).
 * The plane block is at most CONV_HALF_PLANE_TARGET bytes (at least one channel): the float32 scratch of the
 * input-gradient follows the image, not the batch or the channel count. A thread's tile buffers aim at
 * CONV_HALF_TILE_TARGET bytes (the half forward's too), as the float32 passes': these passes are what autocast
 * runs when memory is short, and gemm keeps near its peak with CONV_TILE_MIN_COLS columns
 * (benchmarks/conv_gflops.py). */
#define CONV_HALF_PLANE_TARGET ((size_t)256 << 10)

typedef struct {
    int nt;
    int64_t tile, chunk;  /* chunk: channels per unit (input-gradient) or the most rows per thread (weight) */
    size_t fixed, plane;  /* bytes before the per-thread buffers; bytes of one thread's plane block */
    size_t col;           /* bytes per position of one thread's tile buffers */
} hb_plan;


/* ---- conv_plan.c ------------------------------------------------------------------------------------------ */

/* The plan for at most `budget` bytes of workspace, `col` bytes per column of a thread's buffer. Applied to
 * the workspace it returns (the kernels do), it gives the same plan again. tile is 0 when one column does not
 * fit. */
conv_plan conv_plan_cols(const conv_geom *g, conv_pass pass, conv_algo algo, size_t col, size_t target, size_t budget,
                         int nthreads);
/* conv_plan_cols for a float32/float64 pass of element size es, with its own algorithm and tile target. */
conv_plan conv_plan_pass(const conv_geom *g, conv_pass pass, size_t es, size_t budget, int nthreads);
/* Bytes per column of a thread's buffer in a plan of whole items (items >= 2): the columns and K/G more. */
static inline size_t conv_item_col_nbytes(const conv_geom *g, size_t es) {
    return (size_t)((g->C / g->G) * g->R * g->S + g->K / g->G) * es;
}
/* The half-precision backward plan for at most `budget` bytes; 0 when it fits, else the least workspace the pass
 * needs. */
size_t conv_hb_plan_for(const conv_geom *g, conv_pass pass, size_t budget, int nthreads, hb_plan *hp);
/* Checks shared by the conv entry points: sizes, and what BLAS's 32-bit integers can index. */
int conv_check_geom(const conv_geom *g);
/* Whether a float32 pass runs the direct kernel (conv_direct.c): a stride-1 "same"-size geometry of more than
 * one tap on a CPU with AVX-512, the forward and weight-gradient reading planes of contiguous rows, the
 * weight-gradient of nine taps only; or the forward and input-gradient at stride 2. The forward and
 * input-gradient also need ws_nbytes >= their workspace (conv_direct_ws_nbytes: the repacked weight, and at
 * stride 2 one item's input or input-gradient in four phases), the weight-gradient none. */
int conv_direct_use(const conv_geom *g, conv_pass pass);

/* Whether a float32 forward or input-gradient runs Winograd F(2x2, 3x3) (conv_winograd.c): 3x3, stride 1,
 * dilation 1, one group, at least 64 channels each way, AVX-512, where it measured faster (or as
 * GPUMEMNET_CONV_WINOGRAD=0/1 forces); it also needs ws_nbytes >= conv_winograd_ws_nbytes. */
int conv_winograd_use(const conv_geom *g, conv_pass pass, int nthreads);

/* ---- conv_winograd.c: float32 only, AVX-512 only (call after conv_winograd_use) -------------------------- */
size_t conv_winograd_ws_nbytes(const conv_geom *g, conv_pass pass, int nthreads);
void conv_winograd_forward(float *out, const float *x, const float *w, const float *bias, const conv_geom *g,
                           float *ws, int nthreads);
void conv_winograd_backward_data(float *dx, const float *dout, const float *w, const float *bias,
                                 const conv_geom *g, float *ws, int nthreads);

/* ---- conv_direct.c: float32 only, AVX-512 only (call after conv_direct_use) ------------------------------ */
/* The whole packed weight (and phases): enough for any thread count (conv_half.c sizes its buffer with it). */
size_t conv_direct_ws_nbytes(const conv_geom *g, conv_pass pass);
/* What a float32 pass on nthreads uses, exactly: a block of the weight per thread for a deep stride-1 layer. */
size_t conv_direct_ws_nbytes_threads(const conv_geom *g, conv_pass pass, int nthreads);
void conv_direct_forward(float *out, const float *x, const float *w, const float *bias, const conv_geom *g,
                         float *ws, int nthreads);
void conv_direct_backward_data(float *dx, const float *dout, const float *w, const float *bias, const conv_geom *g,
                               float *ws, int nthreads);
/* The weight-gradient of a nine-tap (3x3) geometry the forward takes too: no workspace. */
void conv_direct_backward_weight(float *dw, const float *dout, const float *x, const conv_geom *g, int nthreads);

/* ---- conv_wgrad.c: the float32 weight-gradient's outer-product kernel (AVX-512) ------------------------- */
/* Whether a float32 weight-gradient may run conv_wgrad_backward_weight (an AVX-512 CPU, one group, K a multiple
 * of 16, C >= 16, at most 16 taps per row); it runs when conv_wgrad_fits its workspace (grad_output transposed,
 * 256 positions or more per group of items: below that the gemm routes win) and the sum is not empty (N, K,
 * C*R*S, P*Q > 0). */
int conv_wgrad_use(const conv_geom *g);
int conv_wgrad_fits(const conv_geom *g, size_t budget);
/* The workspace it asks for within `limit` (0 when it does not fit). */
size_t conv_wgrad_ws_nbytes(const conv_geom *g, size_t limit);
void conv_wgrad_backward_weight(float *dw, const float *dout, const float *x, const conv_geom *g, float *ws,
                                size_t ws_nbytes, int nthreads);

/* ---- conv_half.c: the float16/bfloat16 passes (conv.c dispatches to them) ------------------------------- */
int conv2d_forward_half(uint16_t *out, const uint16_t *x, const uint16_t *w, const uint16_t *bias, const conv_geom *g,
                        gm_dtype dt, void *ws, size_t ws_nbytes, int nthreads);
int conv2d_backward_data_half(uint16_t *dx, const uint16_t *dout, const uint16_t *w, const uint16_t *bias,
                              const conv_geom *g, gm_dtype dt, void *ws, size_t ws_nbytes, int nthreads);
int conv2d_backward_weight_half(uint16_t *dw, const uint16_t *dout, const uint16_t *x, const conv_geom *g,
                                gm_dtype dt, void *ws, size_t ws_nbytes, int nthreads);
/* Workspace bytes of the half passes' direct route (conv_half.c), 0 where it does not run; conv_plan.c gives it
 * these bytes when the limit allows, and a pass given as many takes it. */
size_t conv_half_direct_nbytes(const conv_geom *g, gm_dtype dt, conv_pass pass, int nthreads);
/* ---- conv_depthwise.c: the float16/bfloat16 depthwise passes (conv_half.c dispatches to them) ------------ */
/* Workspace bytes within `limit` (per thread one widened input plane, output plane and channel's taps; fewer
 * threads when the limit holds fewer; more than limit when it holds not even one), 0 when there is no work. */
size_t conv_depthwise_half_nbytes(const conv_geom *g, conv_pass pass, size_t limit, int nthreads);
int conv_depthwise_half_forward(uint16_t *out, const uint16_t *x, const uint16_t *w, const uint16_t *bias,
                                const conv_geom *g, gm_dtype dt, void *ws, size_t ws_nbytes, int nthreads);
int conv_depthwise_half_backward_data(uint16_t *dx, const uint16_t *dout, const uint16_t *w, const uint16_t *bias,
                                      const conv_geom *g, gm_dtype dt, void *ws, size_t ws_nbytes, int nthreads);
int conv_depthwise_half_backward_weight(uint16_t *dw, const uint16_t *dout, const uint16_t *x, const conv_geom *g,
                                        gm_dtype dt, void *ws, size_t ws_nbytes, int nthreads);
/* ---- conv_half_amx.c: bfloat16 passes of stride-1 and -2 convolutions on the AMX tile unit ------------- */
int conv_half_amx_usable(void); /* the CPU has AMX-BF16 and Linux grants its tile state */
int conv_half_amx_use(const conv_geom *g, conv_pass pass);
size_t conv_half_amx_nbytes(const conv_geom *g, conv_pass pass, int nthreads); /* 0 where it does not run */
int conv_half_amx_forward(uint16_t *out, const uint16_t *x, const uint16_t *w, const uint16_t *bias,
                          const conv_geom *g, void *ws, int nthreads);
int conv_half_amx_backward_data(uint16_t *dx, const uint16_t *dout, const uint16_t *w, const uint16_t *bias,
                                const conv_geom *g, void *ws, int nthreads);
int conv_half_amx_backward_weight(uint16_t *dw, const uint16_t *dout, const uint16_t *x, const conv_geom *g, void *ws,
                                  int nthreads);
/* ---- conv_half_small.c: bfloat16 passes of at most 32 output positions in the whole batch (AVX-512 BF16) -- */
int conv_half_small_use(const conv_geom *g, conv_pass pass);
/* conv_half_few.c: the same layers' bfloat16 passes on CPUs without bfloat16 products (float32 weights too:
 * conv_geom.wf32); nbytes is 0 where the route does not run */
int conv_half_few_use(const conv_geom *g);
size_t conv_half_few_nbytes(const conv_geom *g, conv_pass pass, int nthreads);
int conv_half_few_forward(uint16_t *out, const uint16_t *x, const void *w, const void *bias, const conv_geom *g,
                          void *ws, int nthreads);
int conv_half_few_backward_data(uint16_t *dx, const uint16_t *dout, const void *w, const void *bias,
                                const conv_geom *g, void *ws, int nthreads);
int conv_half_few_backward_weight(uint16_t *dw, const uint16_t *dout, const uint16_t *x, const conv_geom *g,
                                  void *ws, int nthreads);
size_t conv_half_small_nbytes(const conv_geom *g, conv_pass pass); /* 0 where it does not run */
int conv_half_small_forward(uint16_t *out, const uint16_t *x, const uint16_t *w, const uint16_t *bias,
                            const conv_geom *g, void *ws, int nthreads);
int conv_half_small_backward_data(uint16_t *dx, const uint16_t *dout, const uint16_t *w, const uint16_t *bias,
                                  const conv_geom *g, void *ws, int nthreads);
int conv_half_small_backward_weight(uint16_t *dw, const uint16_t *dout, const uint16_t *x, const conv_geom *g,
                                    void *ws, int nthreads);
int conv_bias_backward_half(uint16_t *db, const uint16_t *t, int64_t N, int64_t K, int64_t L, const int64_t ts[3],
                            gm_dtype dt, int nthreads);

/* ---- per element type (T float: suffix f32; T double: f64) ----------------------------------------------- */

/* Row-major gemm C (M, N) = alpha op(A) op(B) + beta C, sizes already checked against INT_MAX. */
#define CONV_DEFINE_GEMM(T, SUF, GEMM)                                                                          \
    static inline void conv_gemm_##SUF(int ta, int tb, int64_t M, int64_t N, int64_t K, T alpha, const T *A,      \
                                       int64_t lda, const T *B, int64_t ldb, T beta, T *C, int64_t ldc) {          \
        GEMM(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (blasint)M, (blasint)N, \
             (blasint)K, alpha, A, (blasint)(lda > 0 ? lda : 1), B, (blasint)(ldb > 0 ? ldb : 1), beta, C,         \
             (blasint)(ldc > 0 ? ldc : 1));                                                                     \
    }
CONV_DEFINE_GEMM(float, f32_whole, scipy_cblas_sgemm)
CONV_DEFINE_GEMM(double, f64, scipy_cblas_dgemm)

/* float32: the sum over K in chunks of CONV_KCHUNK (conv_geom.h), each chunk's gemm adding onto C. A whole-K
 * OpenBLAS sgemm rounds one running total per output at every term: on a 3x3 conv (K = C*9) or a deep 1x1 conv
 * (K = C) it landed 1.4-1.7x further from float64 than PyTorch's oneDNN convolutions (rms per output), and a
 * drop-in script (tests/dropin: fast_neural_style) failed issue 12's 3x rule on it. Chunked: 0.5-0.9x PyTorch's
 * (tests/test_conv_accuracy.py), for +1% instructions. float64 needs no chunking, half precision gains nothing
 * from it (conv_half.c). */
static inline void conv_gemm_f32(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                                 int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (K <= CONV_KCHUNK) {
        conv_gemm_f32_whole(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    for (int64_t k0 = 0; k0 < K; k0 += CONV_KCHUNK) {
        const int64_t kc = K - k0 < CONV_KCHUNK ? K - k0 : CONV_KCHUNK;
        /* op(A) (M, K) is A[m][k] (ta = 0) or A[k][m] (ta = 1); op(B) (K, N) is B[k][n] or B[n][k] */
        const float *a = ta ? A + k0 * lda : A + k0, *b = tb ? B + k0 : B + k0 * ldb;
        conv_gemm_f32_whole(ta, tb, M, N, kc, alpha, a, lda, b, ldb, k0 ? 1.0f : beta, C, ldc);
    }
}

#define CONV_DECLARE_TYPED(T, SUF)                                                                              \
    /* conv_im2col.c (see there) */                                                                             \
    void conv_im2col_##SUF(T *col, int64_t ld, const T *x, const conv_geom *g, int64_t n, int64_t grp, int64_t s0, \
                           int64_t cnt, int64_t j0, int64_t j1);                                                \
    void conv_col2im_##SUF(T *dx, const T *col, const conv_geom *g, int64_t c0, int64_t c1, int64_t s0,          \
                           int64_t cnt);                                                                        \
    void conv_col2im_ld_##SUF(T *dx, const T *col, int64_t ld, const conv_geom *g, int64_t c0, int64_t c1,       \
                              int64_t s0, int64_t cnt);                                                         \
    void conv_fill_rows_##SUF(T *dst, const T *vals, int64_t n, int64_t len, int64_t ld);                       \
    /* conv_depthwise.c (see there) */                                                                          \
    void conv_depthwise_forward_##SUF(T *out, const T *x, const T *w, const T *bias, const conv_geom *g,         \
                                      int nthreads);                                                            \
    void conv_depthwise_backward_data_##SUF(T *dx, const T *dout, const T *w, const T *bias, const conv_geom *g, \
                                            int nthreads);                                                      \
    void conv_depthwise_backward_weight_##SUF(T *dw, const T *dout, const T *x, const conv_geom *g, int nthreads);
CONV_DECLARE_TYPED(float, f32)
CONV_DECLARE_TYPED(double, f64)

#endif
