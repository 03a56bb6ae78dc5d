/* kernels/cuda/optim.cu — fused multi-tensor SGD, Adam/AdamW, RMSprop, Adagrad and Adadelta steps (optim.h),
 * the CUDA twin of kernels/cpu/optim.c, whose formulas (PyTorch's single-tensor reference) are repeated here
 * operation for operation.
 *
 * Multi-tensor launch: the tensors of one dtype go into a table passed BY VALUE in the kernel's parameters (room
 * for CAP tensors in the 4 KiB every CUDA device accepts; a larger group takes one launch per CAP tensors, as
 * PyTorch's multi_tensor_apply does). Each tensor is cut into chunks of MT_CHUNK elements and the blocks share out
 * all chunks of all tensors, so one launch updates a list of many small and a few huge tensors evenly. A table
 * in kernel parameters needs no device memory: the step allocates nothing (test_optim checks that) and needs no
 * host-to-device copy.
 *
 * Bit-identical to the CPU: every multiply and add goes through mul()/add()/sub(), which on the GPU are the
 * round-to-nearest intrinsics that nvcc never fuses into an FMA (the CPU build has no FMA contraction either);
 * division and sqrt are IEEE-exact on both (nvcc's default -prec-div/-prec-sqrt). */
#include <math.h>

#include "cuda_common.cuh"
#include "optim.h"

#ifdef GM_CUDA_EMU
#define MT_CHUNK 1000 /* small, so the emulator's tests cross chunk boundaries */
#else
#define MT_CHUNK 65536
#endif

/* ---- exact arithmetic --------------------------------------------------------------------------------- */
#ifdef __CUDA_ARCH__
__device__ __forceinline__ float mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ float sub(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ double mul(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ double add(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ double sub(double a, double b) { return __dsub_rn(a, b); }
#else
template <typename T> __device__ __forceinline__ T mul(T a, T b) { return a * b; }
template <typename T> __device__ __forceinline__ T add(T a, T b) { return a + b; }
template <typename T> __device__ __forceinline__ T sub(T a, T b) { return a - b; }
#endif
__device__ __forceinline__ float sqrt_(float a) { return sqrtf(a); }
__device__ __forceinline__ double sqrt_(double a) { return sqrt(a); }

/* Storage value <-> compute value, rounding like common.h (what kernels/cpu/optim.c's LD/ST do). */
template <int DT> __device__ __forceinline__ typename gm_cu_type<DT>::acc dec(typename gm_cu_type<DT>::st v) {
    return gm_cu_ld<DT>(&v);
}
template <int DT> __device__ __forceinline__ typename gm_cu_type<DT>::st enc(typename gm_cu_type<DT>::acc v) {
    typename gm_cu_type<DT>::st s;
    gm_cu_st<DT>(&s, v);
    return s;
}

/* ---- the tensor table ------------------------------------------------------------------------------------ */
/* NP pointers per tensor, X per-tensor extras; chunk0[t] is tensor t's first chunk, chunk0[n] the total. */
template <int NP, int CAP, typename X> struct mt_table {
    enum { cap = CAP };
    int n;
    int64_t chunk0[CAP + 1];
    int64_t numel[CAP];
    void *ptr[NP][CAP];
    X x[CAP];
};

/* The tensor that holds chunk c: the last t with chunk0[t] <= c (empty tensors are never added). */
template <int NP, int CAP, typename X>
__device__ __forceinline__ int mt_find(const mt_table<NP, CAP, X> &L, int64_t c) {
    int lo = 0, hi = L.n - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (L.chunk0[mid] <= c) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* Blocks share out the chunks; in a chunk the threads take consecutive elements (coalesced). The body sees t (the
 * tensor) and i (the element). */
#define MT_FOR_EACH(L, ...)                                                                                  \
    for (int64_t c_ = blockIdx.x; c_ < (L).chunk0[(L).n]; c_ += gridDim.x) {                                 \
        const int t = mt_find(L, c_);                                                                        \
        const int64_t lo_ = (c_ - (L).chunk0[t]) * MT_CHUNK;                                                 \
        const int64_t hi_ = gm_cu_min<int64_t>(lo_ + MT_CHUNK, (L).numel[t]);                                \
        for (int64_t i = lo_ + threadIdx.x; i < hi_; i += blockDim.x) __VA_ARGS__                            \
    }

template <typename Table> static void mt_add(Table &L, int64_t numel) {
    L.numel[L.n] = numel;
    L.chunk0[L.n + 1] = L.chunk0[L.n] + (numel + MT_CHUNK - 1) / MT_CHUNK;
    L.n++;
}

template <typename Table> static void mt_reset(Table &L) {
    L.n = 0;
    L.chunk0[0] = 0;
}

template <typename Table> static unsigned mt_grid(const Table &L, const gm_cuda_ctx *ctx) {
    return gm_cu_blocks(L.chunk0[L.n] * GM_CU_THREADS, ctx); /* at most one block per chunk */
}

/* A step's kernels, one per float dtype, indexed by the dtype's code (GM_F32, GM_F64, GM_F16, GM_BF16 are 0..3). */
template <typename Table, typename Consts> using mt_kernels = void (*const[4])(Table, Consts);

template <typename Table, typename Consts>
static void mt_flush(Table &L, void (*kern)(Table, Consts), const Consts &k, gm_cuda_ctx *ctx) {
    if (L.n == 0) return;
    GM_LAUNCH(kern, mt_grid(L, ctx), GM_CU_THREADS, ctx, L, k);
    mt_reset(L);
}

/* One step over a parameter group: the non-empty tensors of each float dtype in turn go into L (fill(j, t) sets
 * table row j from tensor t), and kern[dtype] runs whenever L is full and after the dtype's last tensor. */
template <typename Table, typename Consts, typename Fill>
static void mt_step(Table &L, const Consts &k, mt_kernels<Table, Consts> &kern, const int64_t *numel,
                    const gm_dtype *dt, int ntensors, Fill fill, gm_cuda_ctx *ctx) {
    for (int q = GM_F32; q <= GM_BF16; q++) {
        mt_reset(L);
        for (int t = 0; t < ntensors; t++) {
            if (dt[t] != q || numel[t] == 0) continue;
            fill(L.n, t);
            mt_add(L, numel[t]);
            if (L.n == Table::cap) mt_flush(L, kern[q], k, ctx);
        }
        mt_flush(L, kern[q], k, ctx);
    }
}

/* ---- SGD ------------------------------------------------------------------------------------------------ */
struct sgd_x {
    int fresh;
};
#define SGD_CAP 64
typedef mt_table<3, SGD_CAP, sgd_x> sgd_table;
struct sgd_consts {
    double lr, momentum, damp1, weight_decay, sign;
    int nesterov;
};
static_assert(sizeof(sgd_table) + sizeof(sgd_consts) <= 4000, "kernel parameters must fit 4 KiB");

/* HAS_BUF: momentum buffers in use (a buffer marked fresh starts as the decayed gradient). */
template <int DT, int HAS_BUF> __global__ void sgd_kernel(sgd_table L, sgd_consts k) {
    typedef typename gm_cu_type<DT>::st S;
    typedef typename gm_cu_type<DT>::acc A;
    const A lr = (A)k.lr, mom = (A)k.momentum, damp1 = (A)k.damp1, wd = (A)k.weight_decay, sign = (A)k.sign;
    const A neg_lr = -lr;
    MT_FOR_EACH(L, {
        S *p = (S *)L.ptr[0][t];
        const S *g = (const S *)L.ptr[1][t];
        A w = dec<DT>(p[i]);
        A d = add(mul(sign, dec<DT>(g[i])), mul(wd, w));
        if (HAS_BUF) {
            S *buf = (S *)L.ptr[2][t];
            S bs = enc<DT>(L.x[t].fresh ? d : add(mul(dec<DT>(buf[i]), mom), mul(damp1, d)));
            buf[i] = bs;
            A b = dec<DT>(bs);
            d = k.nesterov ? add(d, mul(mom, b)) : b;
        }
        p[i] = enc<DT>(add(w, mul(neg_lr, d)));
    })
}

static mt_kernels<sgd_table, sgd_consts> sgd_kernels[2] = { /* [HAS_BUF][dtype] */
    {sgd_kernel<GM_F32, 0>, sgd_kernel<GM_F64, 0>, sgd_kernel<GM_F16, 0>, sgd_kernel<GM_BF16, 0>},
    {sgd_kernel<GM_F32, 1>, sgd_kernel<GM_F64, 1>, sgd_kernel<GM_F16, 1>, sgd_kernel<GM_BF16, 1>}};

/* ---- Adam / AdamW ---------------------------------------------------------------------------------------- */
struct adam_x {
    double step_size, bc2_sqrt; /* the tensor's bias corrections (its own step count) */
};
#define ADAM_CAP 48
typedef mt_table<5, ADAM_CAP, adam_x> adam_table;
struct adam_consts {
    double sign, w1, beta2, one_b2, eps, l2, decay;
};
static_assert(sizeof(adam_table) + sizeof(adam_consts) <= 4000, "kernel parameters must fit 4 KiB");

template <int DT, int AMSGRAD> __global__ void adam_kernel(adam_table L, adam_consts k) {
    typedef typename gm_cu_type<DT>::st S;
    typedef typename gm_cu_type<DT>::acc A;
    const A sign = (A)k.sign, w1 = (A)k.w1, w1c = sub((A)1, w1), b2 = (A)k.beta2, one_b2 = (A)k.one_b2,
            eps = (A)k.eps, l2 = (A)k.l2, decay = (A)k.decay;
    const int low = w1 < (A)0.5;
    MT_FOR_EACH(L, {
        S *p = (S *)L.ptr[0][t], *m = (S *)L.ptr[2][t], *v = (S *)L.ptr[3][t];
        const S *g = (const S *)L.ptr[1][t];
        const A neg_step = (A)(-L.x[t].step_size), bc2_sqrt = (A)L.x[t].bc2_sqrt;
        A w = dec<DT>(p[i]);
        A d = add(mul(sign, dec<DT>(g[i])), mul(l2, w)); /* Adam's L2 term (l2 = 0 for AdamW) */
        w = mul(w, decay);                                 /* AdamW's decoupled decay (1 for Adam) */
        A m0 = dec<DT>(m[i]);
        S ms = enc<DT>(low ? add(m0, mul(w1, sub(d, m0))) : sub(d, mul(sub(d, m0), w1c)));
        S vs = enc<DT>(add(mul(dec<DT>(v[i]), b2), mul(mul(one_b2, d), d)));
        m[i] = ms;
        v[i] = vs;
        A mm = dec<DT>(ms), vv = dec<DT>(vs);
        if (AMSGRAD) {
            S *vmax = (S *)L.ptr[4][t];
            A vm = dec<DT>(vmax[i]);
            vm = (vv > vm || vv != vv) ? vv : vm; /* torch.maximum propagates nan */
            S vms = enc<DT>(vm);
            vmax[i] = vms;
            vv = dec<DT>(vms);
        }
        A denom = add(sqrt_(vv) / bc2_sqrt, eps);
        p[i] = enc<DT>(add(w, mul(neg_step, mm / denom)));
    })
}

static mt_kernels<adam_table, adam_consts> adam_kernels[2] = { /* [AMSGRAD][dtype] */
    {adam_kernel<GM_F32, 0>, adam_kernel<GM_F64, 0>, adam_kernel<GM_F16, 0>, adam_kernel<GM_BF16, 0>},
    {adam_kernel<GM_F32, 1>, adam_kernel<GM_F64, 1>, adam_kernel<GM_F16, 1>, adam_kernel<GM_BF16, 1>}};

/* ---- RMSprop, Adagrad, Adadelta (kernels/cpu/optim.c's loops, operation for operation) ------------------------ */
struct no_x {
    int unused;
};
#define RMSPROP_CAP 48
typedef mt_table<5, RMSPROP_CAP, no_x> rmsprop_table;
struct rmsprop_consts {
    double neg_lr, alpha, one_a, eps, wd, mom, sign;
};
static_assert(sizeof(rmsprop_table) + sizeof(rmsprop_consts) <= 4000, "kernel parameters must fit 4 KiB");

template <int DT, int HAS_BUF, int CENTERED> __global__ void rmsprop_kernel(rmsprop_table L, rmsprop_consts k) {
    typedef typename gm_cu_type<DT>::st S;
    typedef typename gm_cu_type<DT>::acc A;
    const A neg_lr = (A)k.neg_lr, alpha = (A)k.alpha, one_a = (A)k.one_a, eps = (A)k.eps, wd = (A)k.wd,
            mom = (A)k.mom, sign = (A)k.sign, w1 = one_a, w1c = sub((A)1, one_a);
    const int low = w1 < (A)0.5;
    MT_FOR_EACH(L, {
        S *p = (S *)L.ptr[0][t], *sq = (S *)L.ptr[2][t];
        const S *g = (const S *)L.ptr[1][t];
        A w = dec<DT>(p[i]);
        A d = add(mul(sign, dec<DT>(g[i])), mul(wd, w));
        S ss = enc<DT>(add(mul(dec<DT>(sq[i]), alpha), mul(mul(one_a, d), d)));
        sq[i] = ss;
        A avg = dec<DT>(ss);
        if (CENTERED) {
            S *ga = (S *)L.ptr[4][t];
            A a0 = dec<DT>(ga[i]);
            S gs = enc<DT>(low ? add(a0, mul(w1, sub(d, a0))) : sub(d, mul(sub(d, a0), w1c)));
            ga[i] = gs;
            A gg = dec<DT>(gs);
            avg = sub(avg, mul(gg, gg));
        }
        avg = add(sqrt_(avg), eps);
        if (HAS_BUF) {
            S *buf = (S *)L.ptr[3][t];
            S bs = enc<DT>(add(mul(dec<DT>(buf[i]), mom), d / avg));
            buf[i] = bs;
            p[i] = enc<DT>(add(w, mul(neg_lr, dec<DT>(bs))));
        } else {
            p[i] = enc<DT>(add(w, mul(neg_lr, d / avg)));
        }
    })
}

#define RMSPROP_ROW(B, C) {rmsprop_kernel<GM_F32, B, C>, rmsprop_kernel<GM_F64, B, C>, \
                           rmsprop_kernel<GM_F16, B, C>, rmsprop_kernel<GM_BF16, B, C>}
static mt_kernels<rmsprop_table, rmsprop_consts> rmsprop_kernels[4] = { /* [HAS_BUF * 2 + CENTERED][dtype] */
    RMSPROP_ROW(0, 0), RMSPROP_ROW(0, 1), RMSPROP_ROW(1, 0), RMSPROP_ROW(1, 1)};

struct adagrad_x {
    double neg_clr; /* -lr / (1 + (step - 1) * lr_decay): the tensor's own step count */
};
#define ADAGRAD_CAP 64
typedef mt_table<3, ADAGRAD_CAP, adagrad_x> adagrad_table;
struct adagrad_consts {
    double eps, wd, sign;
};
static_assert(sizeof(adagrad_table) + sizeof(adagrad_consts) <= 4000, "kernel parameters must fit 4 KiB");

template <int DT> __global__ void adagrad_kernel(adagrad_table L, adagrad_consts k) {
    typedef typename gm_cu_type<DT>::st S;
    typedef typename gm_cu_type<DT>::acc A;
    const A eps = (A)k.eps, wd = (A)k.wd, sign = (A)k.sign;
    MT_FOR_EACH(L, {
        S *p = (S *)L.ptr[0][t], *sum = (S *)L.ptr[2][t];
        const S *g = (const S *)L.ptr[1][t];
        const A neg_clr = (A)L.x[t].neg_clr;
        A w = dec<DT>(p[i]);
        A d = add(mul(sign, dec<DT>(g[i])), mul(wd, w));
        S ss = enc<DT>(add(dec<DT>(sum[i]), mul(d, d)));
        sum[i] = ss;
        A std = add(sqrt_(dec<DT>(ss)), eps);
        p[i] = enc<DT>(add(w, mul(neg_clr, d / std)));
    })
}

static mt_kernels<adagrad_table, adagrad_consts> adagrad_kernels = {
    adagrad_kernel<GM_F32>, adagrad_kernel<GM_F64>, adagrad_kernel<GM_F16>, adagrad_kernel<GM_BF16>};

#define ADADELTA_CAP 64
typedef mt_table<4, ADADELTA_CAP, no_x> adadelta_table;
struct adadelta_consts {
    double neg_lr, rho, one_rho, eps, wd, sign;
};
static_assert(sizeof(adadelta_table) + sizeof(adadelta_consts) <= 4000, "kernel parameters must fit 4 KiB");

template <int DT> __global__ void adadelta_kernel(adadelta_table L, adadelta_consts k) {
    typedef typename gm_cu_type<DT>::st S;
    typedef typename gm_cu_type<DT>::acc A;
    const A neg_lr = (A)k.neg_lr, rho = (A)k.rho, one_rho = (A)k.one_rho, eps = (A)k.eps, wd = (A)k.wd,
            sign = (A)k.sign;
    MT_FOR_EACH(L, {
        S *p = (S *)L.ptr[0][t], *sq = (S *)L.ptr[2][t], *acc = (S *)L.ptr[3][t];
        const S *g = (const S *)L.ptr[1][t];
        A w = dec<DT>(p[i]);
        A d = add(mul(sign, dec<DT>(g[i])), mul(wd, w));
        S ss = enc<DT>(add(mul(dec<DT>(sq[i]), rho), mul(mul(one_rho, d), d)));
        sq[i] = ss;
        A std = sqrt_(add(dec<DT>(ss), eps));
        A a0 = dec<DT>(acc[i]);
        A delta = mul(sqrt_(add(a0, eps)) / std, d);
        acc[i] = enc<DT>(add(mul(a0, rho), mul(mul(one_rho, delta), delta)));
        p[i] = enc<DT>(add(w, mul(neg_lr, delta)));
    })
}

static mt_kernels<adadelta_table, adadelta_consts> adadelta_kernels = {
    adadelta_kernel<GM_F32>, adadelta_kernel<GM_F64>, adadelta_kernel<GM_F16>, adadelta_kernel<GM_BF16>};

/* ---- entry points (argument checks as kernels/cpu/optim.c) ------------------------------------------------ */
static int check_group(void *const *param, const void *const *grad, const int64_t *numel, const gm_dtype *dt,
                       int ntensors) {
    if (ntensors < 0 || (ntensors > 0 && (!param || !grad || !numel || !dt))) return GM_ERR_ARG;
    for (int t = 0; t < ntensors; t++) {
        if (numel[t] < 0 || (numel[t] > 0 && (!param[t] || !grad[t]))) return GM_ERR_ARG;
        if (!gm_dtype_is_float(dt[t])) return GM_ERR_UNSUPPORTED;
    }
    return GM_OK;
}

extern "C" int cuda_sgd_step(void *const *param, const void *const *grad, void *const *momentum_buf,
                             const uint8_t *buf_fresh, const int64_t *numel, const gm_dtype *dt, int ntensors,
                             const sgd_hparams *h, gm_cuda_ctx *ctx) {
    int st = check_group(param, grad, numel, dt, ntensors);
    if (st != GM_OK) return st;
    const int use_buf = h->momentum != 0.0;
    if (use_buf) {
        if (!momentum_buf && ntensors > 0) return GM_ERR_ARG;
        for (int t = 0; t < ntensors; t++)
            if (numel[t] > 0 && !momentum_buf[t]) return GM_ERR_ARG;
    }
    sgd_consts k;
    k.lr = h->lr;
    k.momentum = h->momentum;
    k.damp1 = 1.0 - h->dampening;
    k.weight_decay = h->weight_decay;
    k.sign = h->maximize ? -1.0 : 1.0;
    k.nesterov = h->nesterov;
    sgd_table L;
    mt_step(L, k, sgd_kernels[use_buf], numel, dt, ntensors, [&](int j, int t) {
        L.ptr[0][j] = param[t];
        L.ptr[1][j] = (void *)grad[t];
        L.ptr[2][j] = use_buf ? momentum_buf[t] : NULL;
        L.x[j].fresh = buf_fresh ? buf_fresh[t] != 0 : 0;
    }, ctx);
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}

extern "C" int cuda_adam_step(void *const *param, const void *const *grad, void *const *exp_avg,
                              void *const *exp_avg_sq, void *const *max_exp_avg_sq, const int64_t *step,
                              const int64_t *numel, const gm_dtype *dt, int ntensors, const adam_hparams *h,
                              gm_cuda_ctx *ctx) {
    int st = check_group(param, grad, numel, dt, ntensors);
    if (st != GM_OK) return st;
    if (ntensors > 0 && (!exp_avg || !exp_avg_sq || !step || (h->amsgrad && !max_exp_avg_sq))) return GM_ERR_ARG;
    for (int t = 0; t < ntensors; t++) {
        if (step[t] < 1) return GM_ERR_ARG; /* step 0 would divide by a zero bias correction */
        if (numel[t] > 0 && (!exp_avg[t] || !exp_avg_sq[t] || (h->amsgrad && !max_exp_avg_sq[t])))
            return GM_ERR_ARG;
    }
    adam_consts k; /* as kernels/cpu/optim.c's adam_consts, computed in double on the host */
    k.sign = h->maximize ? -1.0 : 1.0;
    k.w1 = 1.0 - h->beta1;
    k.beta2 = h->beta2;
    k.one_b2 = 1.0 - h->beta2;
    k.eps = h->eps;
    k.l2 = h->decoupled ? 0.0 : h->weight_decay;
    k.decay = h->decoupled ? 1.0 - h->lr * h->weight_decay : 1.0;
    adam_table L;
    mt_step(L, k, adam_kernels[h->amsgrad != 0], numel, dt, ntensors, [&](int j, int t) {
        L.ptr[0][j] = param[t];
        L.ptr[1][j] = (void *)grad[t];
        L.ptr[2][j] = exp_avg[t];
        L.ptr[3][j] = exp_avg_sq[t];
        L.ptr[4][j] = h->amsgrad ? max_exp_avg_sq[t] : NULL;
        L.x[j].step_size = h->lr / (1.0 - pow(h->beta1, (double)step[t]));
        L.x[j].bc2_sqrt = sqrt(1.0 - pow(h->beta2, (double)step[t]));
    }, ctx);
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}

static int check_state(void *const *state, const int64_t *numel, int ntensors) {
    if (ntensors > 0 && !state) return GM_ERR_ARG;
    for (int t = 0; t < ntensors; t++)
        if (numel[t] > 0 && !state[t]) return GM_ERR_ARG;
    return GM_OK;
}

extern "C" int cuda_rmsprop_step(void *const *param, const void *const *grad, void *const *square_avg,
                                 void *const *momentum_buf, void *const *grad_avg, const int64_t *numel,
                                 const gm_dtype *dt, int ntensors, const rmsprop_hparams *h, gm_cuda_ctx *ctx) {
    const int has_buf = h->momentum > 0.0, centered = h->centered != 0;
    int st = check_group(param, grad, numel, dt, ntensors);
    if (st == GM_OK) st = check_state(square_avg, numel, ntensors);
    if (st == GM_OK && has_buf) st = check_state(momentum_buf, numel, ntensors);
    if (st == GM_OK && centered) st = check_state(grad_avg, numel, ntensors);
    if (st != GM_OK) return st;
    rmsprop_consts k;
    k.neg_lr = -h->lr;
    k.alpha = h->alpha;
    k.one_a = 1.0 - h->alpha;
    k.eps = h->eps;
    k.wd = h->weight_decay;
    k.mom = h->momentum;
    k.sign = h->maximize ? -1.0 : 1.0;
    rmsprop_table L;
    mt_step(L, k, rmsprop_kernels[has_buf * 2 + centered], numel, dt, ntensors, [&](int j, int t) {
        L.ptr[0][j] = param[t];
        L.ptr[1][j] = (void *)grad[t];
        L.ptr[2][j] = square_avg[t];
        L.ptr[3][j] = has_buf ? momentum_buf[t] : NULL;
        L.ptr[4][j] = centered ? grad_avg[t] : NULL;
    }, ctx);
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}

extern "C" int cuda_adagrad_step(void *const *param, const void *const *grad, void *const *sum, const int64_t *step,
                                 const int64_t *numel, const gm_dtype *dt, int ntensors, const adagrad_hparams *h,
                                 gm_cuda_ctx *ctx) {
    int st = check_group(param, grad, numel, dt, ntensors);
    if (st == GM_OK) st = check_state(sum, numel, ntensors);
    if (st != GM_OK) return st;
    if (ntensors > 0 && !step) return GM_ERR_ARG;
    for (int t = 0; t < ntensors; t++)
        if (step[t] < 1) return GM_ERR_ARG;
    adagrad_consts k;
    k.eps = h->eps;
    k.wd = h->weight_decay;
    k.sign = h->maximize ? -1.0 : 1.0;
    adagrad_table L;
    mt_step(L, k, adagrad_kernels, numel, dt, ntensors, [&](int j, int t) {
        L.ptr[0][j] = param[t];
        L.ptr[1][j] = (void *)grad[t];
        L.ptr[2][j] = sum[t];
        L.x[j].neg_clr = -(h->lr / (1.0 + (double)(step[t] - 1) * h->lr_decay));
    }, ctx);
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}

extern "C" int cuda_adadelta_step(void *const *param, const void *const *grad, void *const *square_avg,
                                  void *const *acc_delta, const int64_t *numel, const gm_dtype *dt, int ntensors,
                                  const adadelta_hparams *h, gm_cuda_ctx *ctx) {
    int st = check_group(param, grad, numel, dt, ntensors);
    if (st == GM_OK) st = check_state(square_avg, numel, ntensors);
    if (st == GM_OK) st = check_state(acc_delta, numel, ntensors);
    if (st != GM_OK) return st;
    adadelta_consts k;
    k.neg_lr = -h->lr;
    k.rho = h->rho;
    k.one_rho = 1.0 - h->rho;
    k.eps = h->eps;
    k.wd = h->weight_decay;
    k.sign = h->maximize ? -1.0 : 1.0;
    adadelta_table L;
    mt_step(L, k, adadelta_kernels, numel, dt, ntensors, [&](int j, int t) {
        L.ptr[0][j] = param[t];
        L.ptr[1][j] = (void *)grad[t];
        L.ptr[2][j] = square_avg[t];
        L.ptr[3][j] = acc_delta[t];
    }, ctx);
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}
