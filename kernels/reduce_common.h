/* kernels/reduce_common.h — what the CPU reductions (kernels/cpu/reduce.c) and the CUDA ones
 * (kernels/cuda/reduce.cu) share (kernels/README.md): checking a reduce_geom, simplifying its dims, the
 * parameters every store needs, and the stores themselves.
 *
 * Why one header for both backends: the CUDA kernels promise the CPU's results up to summation order, which holds
 * only while both walk the same simplified dims and round, saturate and store the same way. Written once here, as
 * philox.h is for the random stream: the geometry runs on the host on both sides (plain static inline), the stores
 * run inside kernels too (GM_HD adds __host__ __device__ under nvcc). The walks over the dims differ (odometer
 * loops on CPU, index -> offset per thread on GPU) and stay in their files. */
#ifndef GM_KERNELS_REDUCE_COMMON_H
#define GM_KERNELS_REDUCE_COMMON_H

#include "reduce_geom.h"

/* One set of dims (kept or reduced) after rd_simplify. */
typedef struct {
    int n;
    int64_t shape[GM_MAX_DIMS];
    int64_t stride[GM_MAX_DIMS]; /* bytes */
    int64_t total;
} rd_dims;

/* What every store may need. */
typedef struct {
    gm_dtype out_dt;
    int64_t out_size;
    double div;        /* MEAN: the element count (0 for an empty extent: 0/0 is the NaN PyTorch gives); SUM: 1 */
    double correction; /* var */
    int64_t *indices;  /* arg reductions */
    char *values;      /* arg reductions, may be NULL */
} rd_params;

static inline rd_params rd_make_params(gm_dtype out_dt) {
    rd_params p;
    p.out_dt = out_dt;
    p.out_size = (int64_t)gm_dtype_size(out_dt);
    p.div = 1.0;
    p.correction = 0.0;
    p.indices = NULL;
    p.values = NULL;
    return p;
}

static inline int64_t rd_abs64(int64_t v) { return v < 0 ? -v : v; }

static inline int rd_check_geom(const reduce_geom *g) {
    if (!g || g->nkept < 0 || g->nred < 0 || g->nkept > GM_MAX_DIMS || g->nred > GM_MAX_DIMS) return 0;
    for (int i = 0; i < g->nkept; i++)
        if (g->kept_shape[i] < 0) return 0;
    for (int i = 0; i < g->nred; i++)
        if (g->red_shape[i] < 0) return 0;
    return 1;
}

static inline int rd_valid_dtype(gm_dtype dt) { return (int)dt >= 0 && dt < GM_NDTYPES; }

/* Drop size-1 dims, optionally order by decreasing |stride| (only where the order of visits does not matter),
 * then merge neighbours that are contiguous with each other. Merging in row-major order keeps linear indices
 * (output positions, arg indices) unchanged. Always leaves at least one dim. */
static inline void rd_simplify(rd_dims *d, int n, const int64_t *shape, const int64_t *stride, int sort_by_stride) {
    d->n = 0;
    d->total = 1;
    for (int i = 0; i < n; i++) {
        d->total *= shape[i];
        if (shape[i] == 1) continue;
        d->shape[d->n] = shape[i];
        d->stride[d->n] = stride[i];
        d->n++;
    }
    if (sort_by_stride) { /* insertion sort: stable (the smallest stride ends up innermost), n <= 16 */
        for (int i = 1; i < d->n; i++) {
            int64_t sh = d->shape[i], st = d->stride[i];
            int j = i - 1;
            while (j >= 0 && rd_abs64(d->stride[j]) < rd_abs64(st)) {
                d->shape[j + 1] = d->shape[j];
                d->stride[j + 1] = d->stride[j];
                j--;
            }
            d->shape[j + 1] = sh;
            d->stride[j + 1] = st;
        }
    }
    int m = 0;
    for (int i = 1; i < d->n; i++) {
        if (d->stride[m] == d->stride[i] * d->shape[i]) {
            d->shape[m] *= d->shape[i];
            d->stride[m] = d->stride[i];
        } else {
            m++;
            d->shape[m] = d->shape[i];
            d->stride[m] = d->stride[i];
        }
    }
    if (d->n > 0) d->n = m + 1;
    if (d->n == 0) {
        d->n = 1;
        d->shape[0] = 1;
        d->stride[0] = 0;
    }
}

/* K = g's kept dims, R = its reduced dims, simplified. The kept dims are never reordered: the output is row-major
 * over them. The reduced ones are sorted by stride where the order of visits does not matter (sort_reduced). */
static inline void rd_simplify_geom(const reduce_geom *g, rd_dims *K, rd_dims *R, int sort_reduced) {
    rd_simplify(K, g->nkept, g->kept_shape, g->kept_strides, 0);
    rd_simplify(R, g->nred, g->red_shape, g->red_strides, sort_reduced);
}

/* Round a double result to dt (16-bit floats through float). double -> int64 is undefined in C for NaN and
 * out-of-range values: saturate instead. */
GM_HD static inline void rd_store_f64(char *p, gm_dtype dt, double v) {
    switch (dt) {
    case GM_F32: *(float *)p = (float)v; break;
    case GM_F64: *(double *)p = v; break;
    case GM_F16: *(uint16_t *)p = gm_float_to_half((float)v); break;
    case GM_BF16: *(uint16_t *)p = gm_float_to_bf16((float)v); break;
    case GM_I64:
        *(int64_t *)p = v != v ? 0 : v >= 0x1p63 ? INT64_MAX : v < -0x1p63 ? INT64_MIN : (int64_t)v;
        break;
    case GM_BOOL: *(uint8_t *)p = v != 0.0; break;
    default: break;
    }
}

GM_HD static inline void rd_store_i64(char *p, gm_dtype dt, int64_t v) {
    switch (dt) {
    case GM_I64: *(int64_t *)p = v; break;
    case GM_BOOL: *(uint8_t *)p = v != 0; break;
    default: rd_store_f64(p, dt, (double)v); break;
    }
}

/* An arg reduction's output o: the index, and the value where values are wanted. */
GM_HD static inline void rd_store_arg_f64(const rd_params *c, int64_t o, int64_t index, double v) {
    c->indices[o] = index;
    if (c->values) rd_store_f64(c->values + o * c->out_size, c->out_dt, v);
}

GM_HD static inline void rd_store_arg_i64(const rd_params *c, int64_t o, int64_t index, int64_t v) {
    c->indices[o] = index;
    if (c->values) rd_store_i64(c->values + o * c->out_size, c->out_dt, v);
}

#endif
