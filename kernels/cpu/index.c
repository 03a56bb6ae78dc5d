/* kernels/cpu/index.c — gather / scatter(-add) along one dim and nonzero, over strided inputs (index.h).
 * Everything walks tensors with one n-d counter ("walker") that carries up to two byte offsets, so any
 * strides (views, broadcast zeros) work without a contiguous copy. Threads split the walk into contiguous
 * ranges; results never depend on the thread count. */
#include "index.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* Below this many elements a parallel region costs more than it saves. */
#define GM_INDEX_PAR_MIN 32768
/* Scatter processes destination positions in runs of this many, visiting every index per run: long enough to
 * stream the inner rows, short enough that the run's destination stays in L1/L2 across indices. */
#define GM_INDEX_RUN 2048
/* nonzero splits the mask into at most this many chunks (counts kept on the stack: kernels do not allocate). */
#define GM_NONZERO_CHUNKS 256

typedef struct {
    int nd;
    const int64_t *shape;
    int64_t s0[GM_MAX_DIMS], s1[GM_MAX_DIMS];
    int64_t ctr[GM_MAX_DIMS];
    int64_t off0, off1;
} walker;

static void walker_init(walker *w, int nd, const int64_t *shape, const int64_t *s0, const int64_t *s1) {
    w->nd = nd;
    w->shape = shape;
    for (int d = 0; d < nd; d++) {
        w->s0[d] = s0 ? s0[d] : 0;
        w->s1[d] = s1 ? s1[d] : 0;
    }
}

/* Position the walker at row-major linear index lin. */
static void walker_seek(walker *w, int64_t lin) {
    w->off0 = w->off1 = 0;
    for (int d = w->nd - 1; d >= 0; d--) {
        int64_t n = w->shape[d];
        w->ctr[d] = n ? lin % n : 0;
        lin = n ? lin / n : 0;
        w->off0 += w->ctr[d] * w->s0[d];
        w->off1 += w->ctr[d] * w->s1[d];
    }
}

static inline void walker_next(walker *w) {
    for (int d = w->nd - 1; d >= 0; d--) {
        w->off0 += w->s0[d];
        w->off1 += w->s1[d];
        if (++w->ctr[d] < w->shape[d]) return;
        w->off0 -= w->s0[d] * w->shape[d];
        w->off1 -= w->s1[d] * w->shape[d];
        w->ctr[d] = 0;
    }
}

/* Visit linear positions [lo, hi) of w's space in segments along its last dim, so that the body can run a
 * tight strided loop (or a memcpy) instead of stepping the n-d counter per element. In BODY: seg_p is the
 * linear position of the segment's start, seg_c its last-dim coordinate, seg_len its length; w.off0/w.off1
 * point at its first element and seg_s0/seg_s1 are the last-dim strides. A 0-d space is one segment of 1. */
#define WALK_SEGMENTS(w, lo, hi, BODY)                                                                       \
    do {                                                                                                     \
        walker_seek(&(w), (lo));                                                                             \
        const int seg_last = (w).nd - 1;                                                                     \
        const int64_t seg_L = seg_last >= 0 ? (w).shape[seg_last] : 1;                                       \
        const int64_t seg_s0 = seg_last >= 0 ? (w).s0[seg_last] : 0;                                         \
        const int64_t seg_s1 = seg_last >= 0 ? (w).s1[seg_last] : 0;                                         \
        (void)seg_s0;                                                                                        \
        (void)seg_s1;                                                                                        \
        for (int64_t seg_p = (lo); seg_p < (hi);) {                                                          \
            const int64_t seg_c = seg_last >= 0 ? (w).ctr[seg_last] : 0;                                     \
            const int64_t seg_len = seg_L - seg_c < (hi) - seg_p ? seg_L - seg_c : (hi) - seg_p;             \
            (void)seg_c;                                                                                     \
            BODY;                                                                                            \
            seg_p += seg_len;                                                                                \
            if (seg_last >= 0) { /* to the segment's last element, then one ordinary step (with carry) */   \
                (w).ctr[seg_last] += seg_len - 1;                                                            \
                (w).off0 += (seg_len - 1) * seg_s0;                                                          \
                (w).off1 += (seg_len - 1) * seg_s1;                                                          \
            }                                                                                                \
            walker_next(&(w));                                                                               \
        }                                                                                                    \
    } while (0)

static int64_t prod(int n, const int64_t *shape) {
    int64_t p = 1;
    for (int d = 0; d < n; d++) p *= shape[d];
    return p;
}

static int threads_for(int64_t work, int nthreads) { return work >= GM_INDEX_PAR_MIN && nthreads > 1 ? nthreads : 1; }

/* Every index within [-size, size)? Checked before any write, so bad input changes nothing. */
static int indices_ok(const int64_t *idx, int64_t n, int64_t size) {
    int ok = 1;
    for (int64_t j = 0; j < n; j++) ok &= (idx[j] >= -size) & (idx[j] < size);
    return ok;
}

static inline int64_t wrap(int64_t v, int64_t size) { return v < 0 ? v + size : v; }

/* ---- gather ------------------------------------------------------------------------------------------ */

/* One segment of the output: along the last dim either the index dim itself (dim == last: gather element by
 * element) or an ordinary dim (one input row at the index of this segment; memcpy when it is contiguous). */
#define GATHER_SEGMENT(T)                                                                                    \
    do {                                                                                                     \
        T *o_ = (T *)out + seg_p;                                                                            \
        if (dim == ndim - 1) {                                                                               \
            const char *b_ = inp + w.off0;                                                                   \
            for (int64_t k = 0; k < seg_len; k++)                                                            \
                memcpy(o_ + k, b_ + wrap(idx[seg_c + k], size) * sdim, sizeof(T));                           \
        } else {                                                                                             \
            const char *b_ = inp + w.off0 + wrap(idx[w.ctr[dim]], size) * sdim;                              \
            if (seg_s0 == (int64_t)sizeof(T))                                                                \
                memcpy(o_, b_, (size_t)seg_len * sizeof(T));                                                 \
            else                                                                                             \
                for (int64_t k = 0; k < seg_len; k++) memcpy(o_ + k, b_ + k * seg_s0, sizeof(T));            \
        }                                                                                                    \
    } while (0)

int index_gather_forward(char *out, const char *inp, const int64_t *idx, int64_t n_idx, int ndim,
                         const int64_t *shape, const int64_t *inp_strides, int dim, size_t elsize, int nthreads) {
    if (ndim < 1 || ndim > GM_MAX_DIMS || dim < 0 || dim >= ndim || n_idx < 0) return GM_ERR_ARG;
    if (elsize != 1 && elsize != 2 && elsize != 4 && elsize != 8) return GM_ERR_ARG;
    const int64_t size = shape[dim], sdim = inp_strides[dim];
    if (!indices_ok(idx, n_idx, size)) return GM_ERR_ARG;
    /* walk the output's shape: a's shape with dim replaced by n_idx, whose input stride is added per index */
    int64_t rshape[GM_MAX_DIMS], rstride[GM_MAX_DIMS];
    for (int d = 0; d < ndim; d++) {
        rshape[d] = d == dim ? n_idx : shape[d];
        rstride[d] = d == dim ? 0 : inp_strides[d];
    }
    const int64_t total = prod(ndim, rshape);
    if (total == 0) return GM_OK;
    const int nt = threads_for(total, nthreads);
    (void)nt;
#pragma omp parallel num_threads(nt)
    {
        int t = 0, T = 1;
#ifdef _OPENMP
        t = omp_get_thread_num();
        T = omp_get_num_threads();
#endif
        int64_t lo = total * t / T, hi = total * (t + 1) / T;
        walker w;
        walker_init(&w, ndim, rshape, rstride, NULL);
        switch (elsize) {
        case 1: WALK_SEGMENTS(w, lo, hi, GATHER_SEGMENT(uint8_t)); break;
        case 2: WALK_SEGMENTS(w, lo, hi, GATHER_SEGMENT(uint16_t)); break;
        case 4: WALK_SEGMENTS(w, lo, hi, GATHER_SEGMENT(uint32_t)); break;
        default: WALK_SEGMENTS(w, lo, hi, GATHER_SEGMENT(uint64_t)); break;
        }
    }
    return GM_OK;
}

/* ---- scatter / scatter-add ----------------------------------------------------------------------------- */

/* Element updates, on unaligned-safe pointers. */
static inline void put_f32_add(char *d, const char *s) {
    float a, b;
    memcpy(&a, d, 4); memcpy(&b, s, 4);
    a += b;
    memcpy(d, &a, 4);
}
static inline void put_f64_add(char *d, const char *s) {
    double a, b;
    memcpy(&a, d, 8); memcpy(&b, s, 8);
    a += b;
    memcpy(d, &a, 8);
}
static inline void put_f16_add(char *d, const char *s) {
    uint16_t a, b;
    memcpy(&a, d, 2); memcpy(&b, s, 2);
    a = gm_float_to_half(gm_half_to_float(a) + gm_half_to_float(b));
    memcpy(d, &a, 2);
}
static inline void put_bf16_add(char *d, const char *s) {
    uint16_t a, b;
    memcpy(&a, d, 2); memcpy(&b, s, 2);
    a = gm_float_to_bf16(gm_bf16_to_float(a) + gm_bf16_to_float(b));
    memcpy(d, &a, 2);
}
static inline void put_i64_add(char *d, const char *s) {
    uint64_t a, b; /* unsigned: overflow wraps (two's complement) instead of being undefined */
    memcpy(&a, d, 8); memcpy(&b, s, 8);
    a += b;
    memcpy(d, &a, 8);
}
static inline void put_bool_or(char *d, const char *s) { *(uint8_t *)d = (uint8_t)((*(uint8_t *)d | *(const uint8_t *)s) != 0); }
static inline void put_copy1(char *d, const char *s) { memcpy(d, s, 1); }
static inline void put_copy2(char *d, const char *s) { memcpy(d, s, 2); }
static inline void put_copy4(char *d, const char *s) { memcpy(d, s, 4); }
static inline void put_copy8(char *d, const char *s) { memcpy(d, s, 8); }

/* Destination positions in [lo, hi) of the (outer, inner) space, in runs; for each run every index j in
 * order, each run walked in segments along its last dim. `w` walks (outer, inner) with off0 into dst and off1
 * into src; doff/soff add index j's position in dst and in src. */
#define SCATTER_RANGE(PUT)                                                                                   \
    for (int64_t r0 = lo; r0 < hi; r0 += GM_INDEX_RUN) {                                                     \
        const int64_t r1 = r0 + GM_INDEX_RUN < hi ? r0 + GM_INDEX_RUN : hi;                                  \
        for (int64_t j = 0; j < n_idx; j++) {                                                                \
            int64_t jj = j, soff = 0;                                                                        \
            for (int d = idx_ndim - 1; d >= 0; d--) {                                                        \
                soff += (jj % idx_shape[d]) * src_strides[dim + d];                                          \
                jj /= idx_shape[d];                                                                          \
            }                                                                                                \
            const int64_t doff = wrap(idx[j], size) * sdim;                                                  \
            WALK_SEGMENTS(w, r0, r1, {                                                                       \
                char *d_ = dst + w.off0 + doff;                                                              \
                const char *s_ = src + w.off1 + soff;                                                        \
                for (int64_t k = 0; k < seg_len; k++) PUT(d_ + k * seg_s0, s_ + k * seg_s1);                 \
            });                                                                                              \
        }                                                                                                    \
    }

int index_put_forward(char *dst, const char *src, const int64_t *idx, int idx_ndim, const int64_t *idx_shape,
                      int ndim, const int64_t *shape, const int64_t *dst_strides, const int64_t *src_strides,
                      int dim, gm_dtype dt, int accumulate, int nthreads) {
    if (ndim < 1 || ndim > GM_MAX_DIMS || dim < 0 || dim >= ndim || idx_ndim < 0 ||
        ndim - 1 + idx_ndim > GM_MAX_DIMS || (int)dt < 0 || dt >= GM_NDTYPES_ALL)
        return GM_ERR_ARG;
    if (accumulate && gm_dtype_is_narrow(dt)) return GM_ERR_UNSUPPORTED; /* writes move bytes; adds need a type */
    const int64_t n_idx = prod(idx_ndim, idx_shape), size = shape[dim], sdim = dst_strides[dim];
    if (n_idx < 0 || !indices_ok(idx, n_idx, size)) return GM_ERR_ARG;
    /* the (outer, inner) space: a's dims without dim; src strides skip the index dims */
    int64_t pshape[GM_MAX_DIMS], pd[GM_MAX_DIMS], ps[GM_MAX_DIMS];
    int np = 0;
    for (int d = 0; d < ndim; d++) {
        if (d == dim) continue;
        pshape[np] = shape[d];
        pd[np] = dst_strides[d];
        ps[np] = d < dim ? src_strides[d] : src_strides[d - 1 + idx_ndim];
        np++;
    }
    const int64_t total = prod(np, pshape);
    if (total == 0 || n_idx == 0) return GM_OK;
    const int nt = threads_for(total * n_idx, nthreads) > 1 && total > 1 ? nthreads : 1;
    (void)nt;
#pragma omp parallel num_threads(nt)
    {
        int t = 0, T = 1;
#ifdef _OPENMP
        t = omp_get_thread_num();
        T = omp_get_num_threads();
#endif
        int64_t lo = total * t / T, hi = total * (t + 1) / T;
        walker w;
        walker_init(&w, np, pshape, pd, ps);
        if (accumulate) {
            switch (dt) {
            case GM_F32: SCATTER_RANGE(put_f32_add) break;
            case GM_F64: SCATTER_RANGE(put_f64_add) break;
            case GM_F16: SCATTER_RANGE(put_f16_add) break;
            case GM_BF16: SCATTER_RANGE(put_bf16_add) break;
            case GM_I64: SCATTER_RANGE(put_i64_add) break;
            default: SCATTER_RANGE(put_bool_or) break;
            }
        } else {
            switch (gm_dtype_size(dt)) {
            case 1: SCATTER_RANGE(put_copy1) break;
            case 2: SCATTER_RANGE(put_copy2) break;
            case 4: SCATTER_RANGE(put_copy4) break;
            default: SCATTER_RANGE(put_copy8) break;
            }
        }
    }
    return GM_OK;
}

/* ---- nonzero ------------------------------------------------------------------------------------------- */

static int nonzero_chunks(int64_t total, int nthreads) {
    if (total < GM_INDEX_PAR_MIN || nthreads <= 1) return 1;
    int64_t c = total / (GM_INDEX_PAR_MIN / 4);
    if (c > GM_NONZERO_CHUNKS) c = GM_NONZERO_CHUNKS;
    return (int)c;
}

static int64_t count_range(const uint8_t *mask, walker *wp, int64_t lo, int64_t hi) {
    int64_t c = 0;
    walker w = *wp;
    WALK_SEGMENTS(w, lo, hi, {
        const uint8_t *m_ = mask + w.off0;
        for (int64_t k = 0; k < seg_len; k++) c += m_[k * seg_s0] != 0;
    });
    return c;
}

int index_nonzero_count(int64_t *count, const uint8_t *mask, int ndim, const int64_t *shape,
                        const int64_t *strides, int nthreads) {
    if (ndim < 0 || ndim > GM_MAX_DIMS) return GM_ERR_ARG;
    const int64_t total = prod(ndim, shape);
    const int nch = nonzero_chunks(total, nthreads);
    int64_t c = 0;
#pragma omp parallel for reduction(+ : c) num_threads(nch > 1 ? nthreads : 1) schedule(static)
    for (int k = 0; k < nch; k++) {
        walker w;
        walker_init(&w, ndim, shape, strides, NULL);
        c += count_range(mask, &w, total * k / nch, total * (k + 1) / nch);
    }
    *count = c;
    return GM_OK;
}

int index_nonzero_fill(int64_t *out, int64_t count, const uint8_t *mask, int ndim, const int64_t *shape,
                       const int64_t *strides, int nthreads) {
    if (ndim < 0 || ndim > GM_MAX_DIMS || count < 0) return GM_ERR_ARG;
    const int64_t total = prod(ndim, shape);
    const int nch = nonzero_chunks(total, nthreads);
    int64_t start[GM_NONZERO_CHUNKS + 1];
    start[0] = 0;
    /* pass 1: count per chunk, so that pass 2 knows where each chunk writes */
#pragma omp parallel for num_threads(nch > 1 ? nthreads : 1) schedule(static)
    for (int k = 0; k < nch; k++) {
        walker w;
        walker_init(&w, ndim, shape, strides, NULL);
        start[k + 1] = count_range(mask, &w, total * k / nch, total * (k + 1) / nch);
    }
    for (int k = 0; k < nch; k++) start[k + 1] += start[k];
    if (start[nch] != count) return GM_ERR_ARG;
#pragma omp parallel for num_threads(nch > 1 ? nthreads : 1) schedule(static)
    for (int k = 0; k < nch; k++) {
        walker w;
        walker_init(&w, ndim, shape, strides, NULL);
        int64_t lo = total * k / nch, hi = total * (k + 1) / nch, pos = start[k], end = start[k + 1];
        WALK_SEGMENTS(w, lo, hi, {
            const uint8_t *m_ = mask + w.off0;
            /* branch-free on the mask (a random mask would mispredict every other element): write the slot,
             * keep it only if set. The bound check is never taken for a consistent mask. */
            for (int64_t e = 0; e < seg_len && pos < end; e++) {
                out[pos] = seg_p + e;
                pos += m_[e * seg_s0] != 0;
            }
        });
    }
    return GM_OK;
}
