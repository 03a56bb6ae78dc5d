/* kernels/cuda/reduce.cu — CUDA reductions (contract: reduce.h; reference: kernels/cpu/reduce.c).
 *
 * The geometry is simplified on the host by the code the CPU runs too (kernels/reduce_common.h: size-1 dims
 * dropped, the reduced dims of order-insensitive reductions sorted by stride, contiguous neighbours merged), then
 * one kernel template runs every reduction, parametrised by a "reducer" (accumulator type, identity, step,
 * combine, store).
 *
 * Work split: a block of 256 threads takes a tile of TX consecutive outputs and gives each TY = 256/TX threads;
 * those TY threads stride through the output's reduced elements, then combine their partials in shared memory.
 *  - reduced elements adjacent in memory (a row sum): TX = 1, TY = 256 — one block per output, the threads of a
 *    warp read consecutive elements;
 *  - outputs adjacent in memory (a column sum, the batch dim of (N, C)): TX up to 32 neighbouring outputs, so a
 *    warp reads 32 consecutive elements, and the remaining threads split the reduced extent;
 *  - a short reduced extent: TY shrinks to it and the block takes more outputs.
 * Accumulators are the CPU's: double whenever a float is involved, wrapping uint64 for integer sums/products,
 * int64 for integer extremes, so results agree with the CPU up to summation order. Arg reductions keep
 * (value, index) pairs and break ties on the index, so "first index" and "first NaN wins" hold whatever order
 * the partials are combined in.
 *
 * Few outputs over a long extent (x.sum() of 10^8 elements: one tile, one block) are split (csrc/ops_reduce.c
 * decides, from the shapes): each of `parts` blocks per tile reduces a contiguous piece of the reduced indices into a
 * partial in scratch memory that the op allocated (on every device alike, for exact estimates), and a second
 * kernel combines each output's partials in piece order. Elements keep their global reduced index k, so arg
 * reductions still find the first index. Variance is not split (its two passes would need two rounds). */
#include <math.h>

#include "cuda_common.cuh"
#include "reduce.h"

#include "../reduce_common.h"

/* ---- geometry: the shared rd_simplify (kernels/reduce_common.h) on the host, walked on the device ------- */
/* Byte offset of row-major linear index i over d: a multiply for one dim, 32-bit divisions when they suffice. */
__device__ __forceinline__ int64_t rd_offset(const rd_dims &d, int64_t i) {
    if (d.n == 1) return i * d.stride[0];
    int64_t off = 0;
    if (d.total <= (int64_t)0xffffffffu) {
        uint32_t u = (uint32_t)i;
        for (int k = d.n - 1; k > 0; k--) {
            const uint32_t s = (uint32_t)d.shape[k], q = u / s;
            off += (int64_t)(u - q * s) * d.stride[k];
            u = q;
        }
        return off + (int64_t)u * d.stride[0];
    }
    for (int k = d.n - 1; k > 0; k--) {
        const int64_t s = d.shape[k], q = i / s;
        off += (i - q * s) * d.stride[k];
        i = q;
    }
    return off + i * d.stride[0];
}

/* ---- loads (the stores are reduce_common.h's rd_store_*) ---------------------------------------------------- */
template <int DT> __device__ __forceinline__ double rd_ld_d(const char *p) {
    if (DT == GM_BOOL) return *(const uint8_t *)p != 0 ? 1.0 : 0.0;
    if (DT == GM_I64) return (double)*(const int64_t *)p;
    return (double)gm_cu_ld<DT>(p);
}
template <int DT> __device__ __forceinline__ int64_t rd_ld_i(const char *p) {
    if (DT == GM_BOOL) return *(const uint8_t *)p != 0;
    return *(const int64_t *)p;
}

/* ---- reducers ----------------------------------------------------------------------------------------------
 * A: accumulator (plain data: it lives in __shared__); init(): the identity; step(a, p, k): fold in the element
 * at p, whose linear index in the reduced dims is k (each thread sees its k in increasing order);
 * comb(a, b): merge two partials; store(out, o, a, prm): write output o. */
template <int DT> struct rd_sum_d {
    typedef double A;
    static __device__ __forceinline__ A init() { return 0.0; }
    static __device__ __forceinline__ A step(A a, const char *p, int64_t) { return a + rd_ld_d<DT>(p); }
    static __device__ __forceinline__ A comb(A a, A b) { return a + b; }
    static __device__ __forceinline__ void store(char *out, int64_t o, A a, const rd_params &c) {
        rd_store_f64(out + o * c.out_size, c.out_dt, a / c.div);
    }
};
template <int DT> struct rd_prod_d {
    typedef double A;
    static __device__ __forceinline__ A init() { return 1.0; }
    static __device__ __forceinline__ A step(A a, const char *p, int64_t) { return a * rd_ld_d<DT>(p); }
    static __device__ __forceinline__ A comb(A a, A b) { return a * b; }
    static __device__ __forceinline__ void store(char *out, int64_t o, A a, const rd_params &c) {
        rd_store_f64(out + o * c.out_size, c.out_dt, a);
    }
};
/* Integer sums and products wrap (unsigned arithmetic keeps that defined), like PyTorch's int64. */
template <int DT> struct rd_sum_i {
    typedef unsigned long long A;
    static __device__ __forceinline__ A init() { return 0; }
    static __device__ __forceinline__ A step(A a, const char *p, int64_t) { return a + (A)rd_ld_i<DT>(p); }
    static __device__ __forceinline__ A comb(A a, A b) { return a + b; }
    static __device__ __forceinline__ void store(char *out, int64_t o, A a, const rd_params &c) {
        rd_store_i64(out + o * c.out_size, c.out_dt, (int64_t)a);
    }
};
template <int DT> struct rd_prod_i {
    typedef unsigned long long A;
    static __device__ __forceinline__ A init() { return 1; }
    static __device__ __forceinline__ A step(A a, const char *p, int64_t) { return a * (A)rd_ld_i<DT>(p); }
    static __device__ __forceinline__ A comb(A a, A b) { return a * b; }
    static __device__ __forceinline__ void store(char *out, int64_t o, A a, const rd_params &c) {
        rd_store_i64(out + o * c.out_size, c.out_dt, (int64_t)a);
    }
};
/* What an extreme or arg reducer keeps, as on the CPU: a double for float inputs (NaN propagates), an int64 for
 * integer ones (exact beyond 2^53). */
template <int DT, bool FLOAT = (DT <= GM_BF16)> struct rd_val {
    typedef double V;
    static __device__ __forceinline__ V ld(const char *p) { return rd_ld_d<DT>(p); }
    static __device__ __forceinline__ bool nan(V v) { return v != v; }
    static __device__ __forceinline__ V lowest() { return -INFINITY; }
    static __device__ __forceinline__ V highest() { return INFINITY; }
    static __device__ __forceinline__ void store(char *p, gm_dtype dt, V v) { rd_store_f64(p, dt, v); }
    static __device__ __forceinline__ void store_arg(const rd_params &c, int64_t o, int64_t i, V v) {
        rd_store_arg_f64(&c, o, i, v);
    }
};
template <int DT> struct rd_val<DT, false> {
    typedef long long V;
    static __device__ __forceinline__ V ld(const char *p) { return rd_ld_i<DT>(p); }
    static __device__ __forceinline__ bool nan(V) { return false; }
    static __device__ __forceinline__ V lowest() { return INT64_MIN; }
    static __device__ __forceinline__ V highest() { return INT64_MAX; }
    static __device__ __forceinline__ void store(char *p, gm_dtype dt, V v) { rd_store_i64(p, dt, v); }
    static __device__ __forceinline__ void store_arg(const rd_params &c, int64_t o, int64_t i, V v) {
        rd_store_arg_i64(&c, o, i, v);
    }
};

/* Extremes: take v when it is beyond a or NaN, unless a is already NaN (NaN propagates). */
template <int DT, int MAX> struct rd_ext {
    typedef rd_val<DT> Val;
    typedef typename Val::V A;
    static __device__ __forceinline__ A init() { return MAX ? Val::lowest() : Val::highest(); }
    static __device__ __forceinline__ A comb(A a, A v) {
        const bool take = !Val::nan(a) && !(MAX ? v <= a : v >= a);
        return take ? v : a;
    }
    static __device__ __forceinline__ A step(A a, const char *p, int64_t) { return comb(a, Val::ld(p)); }
    static __device__ __forceinline__ void store(char *out, int64_t o, A a, const rd_params &c) {
        Val::store(out + o * c.out_size, c.out_dt, a);
    }
};

/* (value, index) with index -1 for "nothing seen yet". */
template <class V> struct rd_pair {
    V v;
    long long i;
};

/* The better of two candidates: a NaN beats any number, a larger (max) / smaller (min) value beats a worse one,
 * and between equals (or two NaNs) the smaller index wins. */
template <int DT, int MAX> struct rd_arg {
    typedef rd_val<DT> Val;
    typedef rd_pair<typename Val::V> A;
    static __device__ __forceinline__ A init() {
        A a;
        a.v = MAX ? Val::lowest() : Val::highest();
        a.i = -1;
        return a;
    }
    static __device__ __forceinline__ A comb(A a, A b) {
        if (a.i < 0) return b;
        if (b.i < 0) return a;
        const bool an = Val::nan(a.v), bn = Val::nan(b.v);
        if (an || bn) return (an && bn) ? (a.i < b.i ? a : b) : (an ? a : b);
        if (MAX ? b.v > a.v : b.v < a.v) return b;
        if (MAX ? a.v > b.v : a.v < b.v) return a;
        return a.i < b.i ? a : b;
    }
    static __device__ __forceinline__ A step(A a, const char *p, int64_t k) {
        A b;
        b.v = Val::ld(p);
        b.i = k;
        return comb(a, b);
    }
    static __device__ __forceinline__ void store(char *, int64_t o, A a, const rd_params &c) {
        Val::store_arg(c, o, a.i, a.v);
    }
};

/* ---- the kernels ------------------------------------------------------------------------------------------ */
/* Combine the TY partials of each of the TX columns of buf (thread t = ty * TX + tx); afterwards buf[tx] holds
 * column tx's result. Every thread of the block calls it (it synchronises). */
template <class Red>
__device__ __forceinline__ void rd_combine_columns(typename Red::A *buf, int t, int ty, int lx, int TY) {
    __syncthreads();
    for (int s = TY >> 1; s > 0; s >>= 1) {
        if (ty < s) buf[t] = Red::comb(buf[t], buf[t + (s << lx)]);
        __syncthreads();
    }
}

/* TX = 2^lx outputs per tile, TY = 256 / TX threads per output; blocks stride over the tiles. The kernels that
 * store get prm's pointers (indices, values) as arguments of their own and put them back: pointers travel as
 * kernel arguments, never inside structs, so that the emulator's launch checks see every one of them. */
template <class Red>
__global__ void rd_kernel(char *out, int64_t *indices, char *values, const char *inp, rd_dims K, rd_dims R, int lx,
                          rd_params prm) {
    typedef typename Red::A A;
    prm.indices = indices;
    prm.values = values;
    __shared__ A buf[GM_CU_THREADS];
    const int TX = 1 << lx, TY = GM_CU_THREADS >> lx;
    const int t = threadIdx.x, tx = t & (TX - 1), ty = t >> lx;
    const int64_t ntiles = (K.total + TX - 1) >> lx;
    for (int64_t tile = blockIdx.x; tile < ntiles; tile += gridDim.x) { /* the same trip count in every thread */
        const int64_t o = (tile << lx) + tx;
        A acc = Red::init();
        if (o < K.total && R.total > 0) {
            const char *base = inp + rd_offset(K, o);
            for (int64_t k = ty; k < R.total; k += TY) acc = Red::step(acc, base + rd_offset(R, k), k);
        }
        buf[t] = acc;
        rd_combine_columns<Red>(buf, t, ty, lx, TY);
        if (ty == 0 && o < K.total) Red::store(out, o, buf[t], prm);
        __syncthreads(); /* buf is rewritten by the next tile */
    }
}

/* Variance, two passes as on the CPU (one pass loses everything to cancellation when |mean| >> std). */
template <int DT> struct rd_sum_only {
    typedef double A;
    static __device__ __forceinline__ A comb(A a, A b) { return a + b; }
};

template <int DT>
__global__ void rd_var_kernel(char *out, const char *inp, rd_dims K, rd_dims R, int lx, rd_params prm) {
    __shared__ double buf[GM_CU_THREADS];
    const int TX = 1 << lx, TY = GM_CU_THREADS >> lx;
    const int t = threadIdx.x, tx = t & (TX - 1), ty = t >> lx;
    const int64_t ntiles = (K.total + TX - 1) >> lx;
    const double cnt = (double)R.total, denom = cnt - prm.correction;
    for (int64_t tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
        const int64_t o = (tile << lx) + tx;
        const bool live = o < K.total && R.total > 0;
        const char *base = live ? inp + rd_offset(K, o) : inp;
        double s = 0.0;
        if (live)
            for (int64_t k = ty; k < R.total; k += TY) s += rd_ld_d<DT>(base + rd_offset(R, k));
        buf[t] = s;
        rd_combine_columns<rd_sum_only<DT> >(buf, t, ty, lx, TY);
        const double mean = buf[tx] / cnt; /* an empty extent: 0/0, NaN, as on the CPU */
        __syncthreads();                   /* everyone has read buf[tx] before it is overwritten */
        double ss = 0.0;
        if (live)
            for (int64_t k = ty; k < R.total; k += TY) {
                const double d = rd_ld_d<DT>(base + rd_offset(R, k)) - mean;
                ss += d * d;
            }
        buf[t] = ss;
        rd_combine_columns<rd_sum_only<DT> >(buf, t, ty, lx, TY);
        if (ty == 0 && o < K.total)
            rd_store_f64(out + o * prm.out_size, prm.out_dt, buf[t] / (denom > 0.0 ? denom : 0.0));
        __syncthreads();
    }
}

/* Pass 1 of a split reduction: block b takes tile b / parts and the b % parts'th piece of the reduced indices,
 * writing one partial per output of the tile to partials[o * parts + piece]. */
template <class Red>
__global__ void rd_split_kernel(typename Red::A *partials, const char *inp, rd_dims K, rd_dims R, int lx,
                                int64_t parts, int64_t chunk) {
    typedef typename Red::A A;
    __shared__ A buf[GM_CU_THREADS];
    const int TX = 1 << lx, TY = GM_CU_THREADS >> lx;
    const int t = threadIdx.x, tx = t & (TX - 1), ty = t >> lx;
    const int64_t nblocks = ((K.total + TX - 1) >> lx) * parts;
    for (int64_t b = blockIdx.x; b < nblocks; b += gridDim.x) {
        const int64_t tile = b / parts, piece = b - tile * parts, o = (tile << lx) + tx;
        const int64_t k0 = piece * chunk, k1 = gm_cu_min(R.total, k0 + chunk);
        A acc = Red::init();
        if (o < K.total) {
            const char *base = inp + rd_offset(K, o);
            for (int64_t k = k0 + ty; k < k1; k += TY) acc = Red::step(acc, base + rd_offset(R, k), k);
        }
        buf[t] = acc;
        rd_combine_columns<Red>(buf, t, ty, lx, TY);
        if (ty == 0 && o < K.total) partials[o * parts + piece] = buf[t];
        __syncthreads();
    }
}

/* Pass 2: a block per output folds its partials (threads stride over the pieces) and stores the result. */
template <class Red>
__global__ void rd_finish_kernel(char *out, int64_t *indices, char *values, const typename Red::A *partials,
                                 int64_t nout, int64_t parts, rd_params prm) {
    typedef typename Red::A A;
    prm.indices = indices;
    prm.values = values;
    __shared__ A buf[GM_CU_THREADS];
    const int t = threadIdx.x;
    for (int64_t o = blockIdx.x; o < nout; o += gridDim.x) {
        A acc = Red::init();
        for (int64_t p = t; p < parts; p += GM_CU_THREADS) acc = Red::comb(acc, partials[o * parts + p]);
        buf[t] = acc;
        rd_combine_columns<Red>(buf, t, t, 0, GM_CU_THREADS);
        if (t == 0) Red::store(out, o, buf[0], prm);
        __syncthreads();
    }
}

/* ---- host side -------------------------------------------------------------------------------------------- */
static int rd_pow2_at_least(int64_t n, int cap) {
    int p = 1;
    while (p < cap && p < n) p <<= 1;
    return p;
}

/* log2 of TX, the outputs per block (see the file header). */
static int rd_pick_lx(const rd_dims *K, const rd_dims *R) {
    const int64_t nout = K->total, nred = R->total;
    if (nred <= 1) return 8; /* nothing to split: one thread per output */
    const int64_t kst = K->shape[K->n - 1] > 1 ? rd_abs64(K->stride[K->n - 1]) : INT64_MAX;
    const int64_t rst = rd_abs64(R->stride[R->n - 1]);
    int ty;
    if (rst <= kst) {
        ty = rd_pow2_at_least(nred, GM_CU_THREADS);
    } else {
        int tx = rd_pow2_at_least(nout, 32);
        ty = rd_pow2_at_least(nred, GM_CU_THREADS / tx);
    }
    int lx = 0;
    while ((GM_CU_THREADS >> lx) > ty) lx++;
    return lx;
}

static unsigned rd_grid(const rd_dims *K, int lx, const gm_cuda_ctx *ctx) {
    const int64_t ntiles = (K->total + (1 << lx) - 1) >> lx;
    return gm_cu_blocks(ntiles * GM_CU_THREADS, ctx); /* one block per tile, capped */
}

/* prm as a kernel argument: without its pointers, which the kernel gets separately (see rd_kernel). */
static rd_params rd_kernel_params(rd_params prm) {
    prm.indices = NULL;
    prm.values = NULL;
    return prm;
}

/* The partials of a split (scratch, parts > 1; reduce.h), then their combination. */
template <class Red>
static int rd_launch_split(void *out, const void *inp, const rd_dims &K, const rd_dims &R, const rd_params &prm,
                           void *scratch, int64_t parts, gm_cuda_ctx *ctx) {
    typedef typename Red::A A;
    static_assert(sizeof(A) <= 16, "REDUCE_SPLIT_BYTES reserves 16 bytes per partial");
    const int lx = rd_pick_lx(&K, &R);
    const int64_t chunk = (R.total + parts - 1) / parts, ntiles = (K.total + (1 << lx) - 1) >> lx;
    void (*k1)(A *, const char *, rd_dims, rd_dims, int, int64_t, int64_t) = &rd_split_kernel<Red>;
    GM_LAUNCH(k1, gm_cu_blocks(ntiles * parts * GM_CU_THREADS, ctx), GM_CU_THREADS, ctx, (A *)scratch,
              (const char *)inp, K, R, lx, parts, chunk);
    GM_CU_LAUNCHED(ctx);
    void (*k2)(char *, int64_t *, char *, const A *, int64_t, int64_t, rd_params) = &rd_finish_kernel<Red>;
    GM_LAUNCH(k2, gm_cu_blocks(K.total * GM_CU_THREADS, ctx), GM_CU_THREADS, ctx, (char *)out, prm.indices,
              prm.values, (const A *)scratch, K.total, parts, rd_kernel_params(prm));
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}

template <class Red>
static int rd_launch(void *out, const void *inp, const rd_dims &K, const rd_dims &R, const rd_params &prm,
                     void *scratch, int64_t parts, gm_cuda_ctx *ctx) {
    if (parts > 1) return rd_launch_split<Red>(out, inp, K, R, prm, scratch, parts, ctx);
    const int lx = rd_pick_lx(&K, &R);
    void (*k)(char *, int64_t *, char *, const char *, rd_dims, rd_dims, int, rd_params) = &rd_kernel<Red>;
    GM_LAUNCH(k, rd_grid(&K, lx, ctx), GM_CU_THREADS, ctx, (char *)out, prm.indices, prm.values, (const char *)inp,
              K, R, lx, rd_kernel_params(prm));
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}

/* Instantiate a reducer template for the runtime input dtype: every dtype, or the integer dtypes only (the integer
 * sums and products). The arguments after dt complete the template's: `RD_LAUNCH_ALL(rd_arg, dt, , 1)` launches
 * rd_arg<dt, 1>. */
#define RD_LAUNCH_AS(RED, DT, ...) return rd_launch<RED<DT __VA_ARGS__> >(out, inp, K, R, prm, scratch, parts, ctx)
#define RD_LAUNCH_ALL(RED, dt, ...)                                                                           \
    switch (dt) {                                                                                             \
    case GM_F32: RD_LAUNCH_AS(RED, GM_F32, __VA_ARGS__);                                                      \
    case GM_F64: RD_LAUNCH_AS(RED, GM_F64, __VA_ARGS__);                                                      \
    case GM_F16: RD_LAUNCH_AS(RED, GM_F16, __VA_ARGS__);                                                      \
    case GM_BF16: RD_LAUNCH_AS(RED, GM_BF16, __VA_ARGS__);                                                    \
    case GM_I64: RD_LAUNCH_AS(RED, GM_I64, __VA_ARGS__);                                                      \
    default: RD_LAUNCH_AS(RED, GM_BOOL, __VA_ARGS__);                                                         \
    }
#define RD_LAUNCH_INT(RED, dt, ...)                                                                           \
    switch (dt) {                                                                                             \
    case GM_I64: RD_LAUNCH_AS(RED, GM_I64, __VA_ARGS__);                                                      \
    default: RD_LAUNCH_AS(RED, GM_BOOL, __VA_ARGS__);                                                         \
    }

extern "C" int cuda_reduce_forward(void *out, gm_dtype out_dt, const void *inp, gm_dtype inp_dt,
                                   const reduce_geom *g, int op, void *scratch, int64_t parts, gm_cuda_ctx *ctx) {
    if (!rd_check_geom(g) || !rd_valid_dtype(out_dt) || !rd_valid_dtype(inp_dt) || !ctx) return GM_ERR_ARG;
    rd_dims K, R;
    rd_simplify_geom(g, &K, &R, 1);
    if (K.total == 0) return GM_OK;
    if (!out || (R.total > 0 && !inp) || (parts > 1 && (!scratch || parts > R.total))) return GM_ERR_ARG;
    rd_params prm = rd_make_params(out_dt);
    /* Accumulate in double whenever a float is involved (on either side), exactly in int64 otherwise. */
    const int in_double = gm_dtype_is_float(inp_dt) || gm_dtype_is_float(out_dt);
    switch (op) {
    case REDUCE_SUM:
        if (in_double) RD_LAUNCH_ALL(rd_sum_d, inp_dt, )
        RD_LAUNCH_INT(rd_sum_i, inp_dt, )
    case REDUCE_MEAN:
        if (!gm_dtype_is_float(out_dt)) return GM_ERR_UNSUPPORTED;
        prm.div = (double)R.total;
        RD_LAUNCH_ALL(rd_sum_d, inp_dt, )
    case REDUCE_PROD:
        if (in_double) RD_LAUNCH_ALL(rd_prod_d, inp_dt, )
        RD_LAUNCH_INT(rd_prod_i, inp_dt, )
    case REDUCE_AMAX:
    case REDUCE_AMIN:
        if (out_dt != inp_dt) return GM_ERR_ARG;
        if (R.total == 0) return GM_ERR_ARG; /* no identity: the caller reports the shape */
        if (op == REDUCE_AMAX) RD_LAUNCH_ALL(rd_ext, inp_dt, , 1)
        RD_LAUNCH_ALL(rd_ext, inp_dt, , 0)
    default:
        return GM_ERR_ARG;
    }
}

extern "C" int cuda_reduce_arg_forward(void *values, int64_t *indices, const void *inp, gm_dtype dt,
                                       const reduce_geom *g, int is_max, void *scratch, int64_t parts,
                                       gm_cuda_ctx *ctx) {
    if (!rd_check_geom(g) || !rd_valid_dtype(dt) || !ctx) return GM_ERR_ARG;
    rd_dims K, R;
    rd_simplify_geom(g, &K, &R, 0); /* no reordering: "first" is row-major order */
    if (K.total == 0) return GM_OK;
    if (R.total == 0 || !indices || !inp || (parts > 1 && (!scratch || parts > R.total))) return GM_ERR_ARG;
    rd_params prm = rd_make_params(dt);
    prm.indices = indices;
    prm.values = (char *)values;
    void *out = NULL;
    if (is_max) RD_LAUNCH_ALL(rd_arg, dt, , 1)
    RD_LAUNCH_ALL(rd_arg, dt, , 0)
}

template <int DT>
static int rd_var_launch(void *out, const void *inp, const rd_dims &K, const rd_dims &R, const rd_params &prm,
                         gm_cuda_ctx *ctx) {
    const int lx = rd_pick_lx(&K, &R);
    void (*k)(char *, const char *, rd_dims, rd_dims, int, rd_params) = &rd_var_kernel<DT>;
    GM_LAUNCH(k, rd_grid(&K, lx, ctx), GM_CU_THREADS, ctx, (char *)out, (const char *)inp, K, R, lx, prm);
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}

extern "C" int cuda_reduce_var_forward(void *out, const void *inp, gm_dtype dt, const reduce_geom *g,
                                       double correction, gm_cuda_ctx *ctx) {
    if (!rd_check_geom(g) || !rd_valid_dtype(dt) || !ctx) return GM_ERR_ARG;
    if (!gm_dtype_is_float(dt)) return GM_ERR_UNSUPPORTED;
    rd_dims K, R;
    rd_simplify_geom(g, &K, &R, 1);
    if (K.total == 0) return GM_OK;
    if (!out || (R.total > 0 && !inp)) return GM_ERR_ARG;
    rd_params prm = rd_make_params(dt);
    prm.correction = correction;
    switch (dt) {
    case GM_F32: return rd_var_launch<GM_F32>(out, inp, K, R, prm, ctx);
    case GM_F64: return rd_var_launch<GM_F64>(out, inp, K, R, prm, ctx);
    case GM_F16: return rd_var_launch<GM_F16>(out, inp, K, R, prm, ctx);
    default: return rd_var_launch<GM_BF16>(out, inp, K, R, prm, ctx);
    }
}
