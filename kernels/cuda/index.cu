/* kernels/cuda/index.cu — gather, scatter(-add), nonzero and the index bounds check on CUDA (index.h).
 * The CPU kernels (kernels/cpu/index.c) are the reference; tensors are strided, strides in bytes.
 *
 * A tensor indexed along `dim` is seen as (outer, index, inner): outer = shape[:dim], inner = shape[dim+1:].
 * Outer and inner dims are collapsed on the host (gm_cu_geom_make), so contiguous operands reach the kernels with
 * at most one dim each and their offsets cost one multiply instead of a division per dim.
 *
 * Results that must come back to the host (a count, the first bad index) go through a few fixed __device__
 * variables rather than allocator blocks: an op then allocates exactly what it allocates on the CPU (the
 * estimator compares meta, cpu and cuda byte for byte). They are safe to share because every op of a device runs
 * on that device's one stream and each entry point that uses them reads them back before it returns (csrc holds
 * the GIL throughout). */
#include "cuda_common.cuh"
#include "index.h"

/* ---- device scratch ------------------------------------------------------------------------------------- */
#define NZ_MAX_BLOCKS 1024 /* nonzero_fill's grid, one count per block */
__device__ unsigned long long g_idx_first_bad;   /* bounds check: smallest bad position */
__device__ unsigned long long g_nz_total;        /* nonzero_count */
__device__ long long g_nz_block[NZ_MAX_BLOCKS];  /* nonzero_fill: count of each block's range */

/* Copy n bytes of device memory to the host once the work queued before has run, and wait for them. */
static int read_back(gm_cuda_ctx *ctx, void *host, const void *dev, size_t n) {
    cudaStream_t s = (cudaStream_t)ctx->stream;
    GM_CU_CHECK(ctx, cudaMemcpyAsync(host, dev, n, cudaMemcpyDeviceToHost, s));
    GM_CU_CHECK(ctx, cudaStreamSynchronize(s));
    return GM_OK;
}

/* The same for a __device__ variable: copied on the stream, after the kernels that wrote it. */
template <typename T> static int read_symbol(gm_cuda_ctx *ctx, T *host, const T &sym) {
    cudaStream_t s = (cudaStream_t)ctx->stream;
    GM_CU_CHECK(ctx, cudaMemcpyFromSymbolAsync(host, sym, sizeof(T), 0, cudaMemcpyDeviceToHost, s));
    GM_CU_CHECK(ctx, cudaStreamSynchronize(s));
    return GM_OK;
}

/* Set a __device__ variable before the kernels queued next (the value is staged: it may live on the stack). */
template <typename T> static int write_symbol(gm_cuda_ctx *ctx, const T &sym, T value) {
    GM_CU_CHECK(ctx, cudaMemcpyToSymbolAsync(sym, &value, sizeof(T), 0, cudaMemcpyHostToDevice,
                                             (cudaStream_t)ctx->stream));
    return GM_OK;
}

struct min_op {
    template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return b < a ? b : a; }
};

/* Byte offset of element i of a (collapsed) geometry, operand j. */
template <int N> __device__ __forceinline__ int64_t geom_off(const gm_cu_geom<N> &g, int j, int64_t i) {
    if (g.ndim == 0) return 0;
    if (g.ndim == 1) return i * g.st[j][0];
    int64_t off[N];
    gm_cu_offsets<N>(g, i, off);
    return off[j];
}

static inline int64_t prod(int n, const int64_t *shape) {
    int64_t p = 1;
    for (int d = 0; d < n; d++) p *= shape[d];
    return p;
}

/* In-bounds index wrapped into [0, size), or -1. */
__device__ __forceinline__ int64_t wrap_index(int64_t v, int64_t size) {
    if (v < 0) v += size;
    return v >= 0 && v < size ? v : -1;
}

/* Element i of an (outer, n_idx, inner) walk: its outer position o, index position j, inner position k, and
 * v = idx[j] wrapped into [0, size) (-1 when out of bounds: the element is skipped). */
struct elem_pos {
    int64_t o, j, k, v;
};
__device__ __forceinline__ elem_pos elem_at(int64_t i, int64_t n_idx, int64_t inner, const int64_t *idx,
                                            int64_t size) {
    elem_pos p;
    const int64_t r = i / inner;
    p.k = i - r * inner;
    p.o = r / n_idx;
    p.j = r - p.o * n_idx;
    p.v = wrap_index(idx[p.j], size);
    return p;
}

/* ---- bounds check ---------------------------------------------------------------------------------------- */
__global__ void check_bounds_kernel(const int64_t *idx, int64_t n, int64_t size) {
    unsigned long long first = ~0ull;
    GM_CU_GRID_STRIDE(j, n) {
        int64_t v = idx[j];
        if ((v < -size || v >= size) && (unsigned long long)j < first) first = (unsigned long long)j;
    }
    first = gm_cu_block_reduce(first, min_op());
    if (threadIdx.x == 0 && first != ~0ull) atomicMin(&g_idx_first_bad, first);
}

extern "C" int cuda_index_check_bounds(const int64_t *idx, int64_t n, int64_t size, int64_t *bad_pos,
                                       int64_t *bad_value, gm_cuda_ctx *ctx) {
    *bad_pos = -1;
    *bad_value = 0;
    if (n <= 0) return GM_OK;
    if (!idx) return GM_ERR_ARG;
    unsigned long long first;
    if (write_symbol(ctx, g_idx_first_bad, ~0ull) != GM_OK) return GM_ERR_BACKEND;
    GM_LAUNCH(check_bounds_kernel, gm_cu_blocks(n, ctx), GM_CU_THREADS, ctx, idx, n, size);
    GM_CU_LAUNCHED(ctx);
    if (read_symbol(ctx, &first, g_idx_first_bad) != GM_OK) return GM_ERR_BACKEND;
    if (first == ~0ull) return GM_OK;
    *bad_pos = (int64_t)first;
    return read_back(ctx, bad_value, idx + first, sizeof *bad_value);
}

/* ---- gather ---------------------------------------------------------------------------------------------- */
struct gather_geom {
    int64_t outer, n_idx, inner, size, sdim;
    gm_cu_geom<1> og, ig; /* outer and inner dims of the input */
};

/* One output row (o, j) per block iteration, the inner elements across the threads: no division per element.
 * For rows of at least a warp (a batch of images, rows of a matrix). */
template <typename T>
__global__ void gather_rows_kernel(T *out, const char *inp, const int64_t *idx, gather_geom g) {
    const int64_t rows = g.outer * g.n_idx;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const int64_t o = row / g.n_idx, j = row - o * g.n_idx;
        const int64_t v = wrap_index(idx[j], g.size);
        if (v < 0) continue;
        const char *base = inp + geom_off(g.og, 0, o) + v * g.sdim;
        T *orow = out + row * g.inner;
        for (int64_t k = threadIdx.x; k < g.inner; k += blockDim.x)
            orow[k] = *(const T *)(base + geom_off(g.ig, 0, k));
    }
}

/* One output element per thread: short rows (the index dim is the last one, or nearly). */
template <typename T>
__global__ void gather_elems_kernel(T *out, const char *inp, const int64_t *idx, gather_geom g) {
    const int64_t total = g.outer * g.n_idx * g.inner;
    GM_CU_GRID_STRIDE(i, total) {
        const elem_pos e = elem_at(i, g.n_idx, g.inner, idx, g.size);
        if (e.v < 0) continue;
        out[i] = *(const T *)(inp + geom_off(g.og, 0, e.o) + e.v * g.sdim + geom_off(g.ig, 0, e.k));
    }
}

template <typename T> static void launch_gather(char *out, const char *inp, const int64_t *idx, const gather_geom &g,
                                                gm_cuda_ctx *ctx) {
    if (g.inner >= 32) {
        GM_LAUNCH(gather_rows_kernel<T>, gm_cu_blocks(g.outer * g.n_idx * GM_CU_THREADS, ctx), GM_CU_THREADS, ctx,
                  (T *)out, inp, idx, g);
    } else {
        GM_LAUNCH(gather_elems_kernel<T>, gm_cu_blocks(g.outer * g.n_idx * g.inner, ctx), GM_CU_THREADS, ctx,
                  (T *)out, inp, idx, g);
    }
}

extern "C" int cuda_index_gather_forward(char *out, const char *inp, const int64_t *idx, int64_t n_idx, int ndim,
                                         const int64_t *shape, const int64_t *inp_strides, int dim, size_t elsize,
                                         gm_cuda_ctx *ctx) {
    if (ndim < 1 || ndim > GM_MAX_DIMS || dim < 0 || dim >= ndim || n_idx < 0) return GM_ERR_ARG;
    if (elsize != 1 && elsize != 2 && elsize != 4 && elsize != 8) return GM_ERR_ARG;
    gather_geom g;
    g.outer = prod(dim, shape);
    g.inner = prod(ndim - dim - 1, shape + dim + 1);
    g.n_idx = n_idx;
    g.size = shape[dim];
    g.sdim = inp_strides[dim];
    if (g.outer * g.n_idx * g.inner == 0) return GM_OK;
    const int64_t *so[1] = {inp_strides}, *si[1] = {inp_strides + dim + 1};
    g.og = gm_cu_geom_make<1>(dim, shape, so);
    g.ig = gm_cu_geom_make<1>(ndim - dim - 1, shape + dim + 1, si);
    switch (elsize) {
    case 1: launch_gather<uint8_t>(out, inp, idx, g, ctx); break;
    case 2: launch_gather<uint16_t>(out, inp, idx, g, ctx); break;
    case 4: launch_gather<uint32_t>(out, inp, idx, g, ctx); break;
    default: launch_gather<uint64_t>(out, inp, idx, g, ctx); break;
    }
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}

/* ---- scatter / scatter-add ------------------------------------------------------------------------------- */
struct put_geom {
    int64_t outer, n_idx, inner, size, sdim;
    gm_cu_geom<2> og, ig; /* outer and inner dims: operand 0 = dst, 1 = src */
    gm_cu_geom<1> jg;     /* the index dims of src */
};

/* Element updates. Plain: the caller owns the element. Atomic: other threads may update it concurrently. */
template <int DT> struct put_ops {
    typedef typename gm_cu_type<DT>::st S;
    static __device__ __forceinline__ void copy(char *d, const char *s) { *(S *)d = *(const S *)s; }
    static __device__ __forceinline__ void add(char *d, const char *s) {
        if (DT == GM_BOOL) *(uint8_t *)d = (uint8_t)((*(uint8_t *)d | *(const uint8_t *)s) != 0);
        else if (DT == GM_I64) /* unsigned: overflow wraps as on the CPU */
            *(uint64_t *)d = *(const uint64_t *)d + *(const uint64_t *)s;
        else gm_cu_st<DT>(d, gm_cu_ld<DT>(d) + gm_cu_ld<DT>(s));
    }
    static __device__ __forceinline__ void atomic_add(char *d, const char *s);
};

/* 16-bit floats and bools have no atomic add of their size: a compare-and-swap (16-bit) or an atomic or (bool)
 * on the aligned 32-bit word that holds them. Each 16-bit add rounds once from float, as on the CPU. */
template <int DT> __device__ __forceinline__ void atomic_add_half(char *d, float v) {
    unsigned int *w = (unsigned int *)((uintptr_t)d & ~(uintptr_t)3);
    const int shift = ((uintptr_t)d & 2) ? 16 : 0;
    unsigned int old = *w, assumed;
    do {
        assumed = old;
        uint16_t h = (uint16_t)(assumed >> shift);
        float f = (DT == GM_F16 ? gm_half_to_float(h) : gm_bf16_to_float(h)) + v;
        unsigned int nh = DT == GM_F16 ? gm_float_to_half(f) : gm_float_to_bf16(f);
        unsigned int next = (assumed & ~(0xffffu << shift)) | (nh << shift);
        old = atomicCAS(w, assumed, next);
    } while (old != assumed);
}

template <int DT> __device__ __forceinline__ void put_ops<DT>::atomic_add(char *d, const char *s) {
    if (DT == GM_F32) atomicAdd((float *)d, *(const float *)s);
    else if (DT == GM_F64) atomicAdd((double *)d, *(const double *)s);
    else if (DT == GM_I64) atomicAdd((unsigned long long *)d, *(const unsigned long long *)s);
    else if (DT == GM_F16 || DT == GM_BF16) atomic_add_half<DT>(d, gm_cu_ld<DT>(s));
    else if (*(const uint8_t *)s) {
        unsigned int *w = (unsigned int *)((uintptr_t)d & ~(uintptr_t)3);
        atomicOr(w, 1u << (8 * ((uintptr_t)d & 3)));
    }
}

/* One thread per destination column (o, k), visiting the indices in order: the CPU's semantics exactly (the last
 * duplicate wins; sums in index order), with no atomics. */
template <int DT, int ACC>
__global__ void put_columns_kernel(char *dst, const char *src, const int64_t *idx, put_geom g) {
    const int64_t cols = g.outer * g.inner;
    GM_CU_GRID_STRIDE(c, cols) {
        const int64_t o = c / g.inner, k = c - o * g.inner;
        char *d = dst + geom_off(g.og, 0, o) + geom_off(g.ig, 0, k);
        const char *s = src + geom_off(g.og, 1, o) + geom_off(g.ig, 1, k);
        for (int64_t j = 0; j < g.n_idx; j++) {
            const int64_t v = wrap_index(idx[j], g.size);
            if (v < 0) continue;
            if (ACC) put_ops<DT>::add(d + v * g.sdim, s + geom_off(g.jg, 0, j));
            else put_ops<DT>::copy(d + v * g.sdim, s + geom_off(g.jg, 0, j));
        }
    }
}

/* One thread per source element: for many indices into few columns (a 1-d scatter, an embedding's gradient with
 * narrow rows), where a thread per column would leave the GPU idle. */
template <int DT, int ACC>
__global__ void put_elems_kernel(char *dst, const char *src, const int64_t *idx, put_geom g) {
    const int64_t total = g.outer * g.n_idx * g.inner;
    GM_CU_GRID_STRIDE(i, total) {
        const elem_pos e = elem_at(i, g.n_idx, g.inner, idx, g.size);
        if (e.v < 0) continue;
        char *d = dst + geom_off(g.og, 0, e.o) + geom_off(g.ig, 0, e.k) + e.v * g.sdim;
        const char *s = src + geom_off(g.og, 1, e.o) + geom_off(g.ig, 1, e.k) + geom_off(g.jg, 0, e.j);
        if (ACC) put_ops<DT>::atomic_add(d, s);
        else put_ops<DT>::copy(d, s);
    }
}

/* Columns win when there are enough of them to fill the GPU, or few indices per column to walk. */
#define PUT_COLUMNS_MIN 4096
#define PUT_SHORT_INDEX 64

template <int DT>
static void launch_put(char *dst, const char *src, const int64_t *idx, const put_geom &g, int accumulate,
                       gm_cuda_ctx *ctx) {
    const int64_t cols = g.outer * g.inner;
    if (cols >= PUT_COLUMNS_MIN || g.n_idx <= PUT_SHORT_INDEX) {
        auto *k = accumulate ? &put_columns_kernel<DT, 1> : &put_columns_kernel<DT, 0>;
        GM_LAUNCH(k, gm_cu_blocks(cols, ctx), GM_CU_THREADS, ctx, dst, src, idx, g);
    } else {
        auto *k = accumulate ? &put_elems_kernel<DT, 1> : &put_elems_kernel<DT, 0>;
        GM_LAUNCH(k, gm_cu_blocks(cols * g.n_idx, ctx), GM_CU_THREADS, ctx, dst, src, idx, g);
    }
}

extern "C" int cuda_index_put_forward(char *dst, const char *src, const int64_t *idx, int idx_ndim,
                                      const int64_t *idx_shape, int ndim, const int64_t *shape,
                                      const int64_t *dst_strides, const int64_t *src_strides, int dim, gm_dtype dt,
                                      int accumulate, gm_cuda_ctx *ctx) {
    if (ndim < 1 || ndim > GM_MAX_DIMS || dim < 0 || dim >= ndim || idx_ndim < 0 ||
        ndim - 1 + idx_ndim > GM_MAX_DIMS || (int)dt < 0 || dt >= GM_NDTYPES_ALL)
        return GM_ERR_ARG;
    if (accumulate && gm_dtype_is_narrow(dt)) return GM_ERR_UNSUPPORTED; /* writes move bytes; adds need a type */
    put_geom g;
    g.outer = prod(dim, shape);
    g.inner = prod(ndim - dim - 1, shape + dim + 1);
    g.n_idx = prod(idx_ndim, idx_shape);
    g.size = shape[dim];
    g.sdim = dst_strides[dim];
    if (g.n_idx < 0) return GM_ERR_ARG;
    if (g.outer * g.inner == 0 || g.n_idx == 0) return GM_OK;
    const int64_t *so[2] = {dst_strides, src_strides};
    const int64_t *si[2] = {dst_strides + dim + 1, src_strides + dim + idx_ndim};
    const int64_t *sj[1] = {src_strides + dim};
    g.og = gm_cu_geom_make<2>(dim, shape, so);
    g.ig = gm_cu_geom_make<2>(ndim - dim - 1, shape + dim + 1, si);
    g.jg = gm_cu_geom_make<1>(idx_ndim, idx_shape, sj);
    /* a storage-only integer (writes only, refused above for adds) moves as the compute dtype of its size:
     * put_ops::copy moves the storage type's bytes as they are */
    if (dt == GM_U8 || dt == GM_I8) dt = GM_BOOL;
    else if (dt == GM_I16) dt = GM_F16;
    else if (dt == GM_I32) dt = GM_F32;
#define PUT_CALL(DT) launch_put<DT>(dst, src, idx, g, accumulate, ctx)
    GM_CU_SWITCH_ALL(dt, PUT_CALL);
#undef PUT_CALL
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}

/* ---- nonzero --------------------------------------------------------------------------------------------- */
__device__ __forceinline__ int mask_at(const uint8_t *mask, const gm_cu_geom<1> &g, int64_t i) {
    return mask[geom_off(g, 0, i)] != 0;
}

__global__ void nonzero_count_kernel(const uint8_t *mask, gm_cu_geom<1> g) {
    long long c = 0;
    GM_CU_GRID_STRIDE(i, g.numel) c += mask_at(mask, g, i);
    c = gm_cu_block_reduce(c, gm_cu_sum());
    if (threadIdx.x == 0 && c) atomicAdd(&g_nz_total, (unsigned long long)c);
}

extern "C" int cuda_index_nonzero_count(int64_t *count, const uint8_t *mask, int ndim, const int64_t *shape,
                                        const int64_t *strides, gm_cuda_ctx *ctx) {
    if (ndim < 0 || ndim > GM_MAX_DIMS) return GM_ERR_ARG;
    *count = 0;
    const int64_t *s[1] = {strides};
    gm_cu_geom<1> g = gm_cu_geom_make<1>(ndim, shape, s);
    if (g.numel == 0) return GM_OK;
    unsigned long long total;
    if (write_symbol(ctx, g_nz_total, 0ull) != GM_OK) return GM_ERR_BACKEND;
    GM_LAUNCH(nonzero_count_kernel, gm_cu_blocks(g.numel, ctx), GM_CU_THREADS, ctx, mask, g);
    GM_CU_LAUNCHED(ctx);
    if (read_symbol(ctx, &total, g_nz_total) != GM_OK) return GM_ERR_BACKEND;
    *count = (int64_t)total;
    return GM_OK;
}

/* Block b of nb owns positions [numel*b/nb, numel*(b+1)/nb). Pass 1 counts each block's range. */
__global__ void nonzero_block_count_kernel(const uint8_t *mask, gm_cu_geom<1> g) {
    const int64_t lo = g.numel * blockIdx.x / gridDim.x, hi = g.numel * (blockIdx.x + 1) / gridDim.x;
    long long c = 0;
    for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) c += mask_at(mask, g, i);
    c = gm_cu_block_reduce(c, gm_cu_sum());
    if (threadIdx.x == 0) g_nz_block[blockIdx.x] = c;
}

/* Pass 2: a block starts writing after the counts of the blocks before it, and walks its range in tiles of
 * blockDim positions, each placed by a block-wide prefix sum of the tile's flags (order preserved). */
__global__ void nonzero_fill_kernel(int64_t *out, int64_t count, const uint8_t *mask, gm_cu_geom<1> g) {
    __shared__ long long scan[GM_CU_THREADS];
    const int t = threadIdx.x;
    long long start = 0;
    for (unsigned b = t; b < blockIdx.x; b += blockDim.x) start += g_nz_block[b];
    start = gm_cu_block_reduce(start, gm_cu_sum());
    const int64_t lo = g.numel * blockIdx.x / gridDim.x, hi = g.numel * (blockIdx.x + 1) / gridDim.x;
    for (int64_t base = lo; base < hi; base += GM_CU_THREADS) {
        const int64_t pos = base + t;
        const int flag = pos < hi ? mask_at(mask, g, pos) : 0;
        scan[t] = flag;
        __syncthreads();
        for (int off = 1; off < GM_CU_THREADS; off <<= 1) { /* inclusive Hillis-Steele scan */
            long long add = t >= off ? scan[t - off] : 0;
            __syncthreads();
            scan[t] += add;
            __syncthreads();
        }
        const long long at = start + scan[t] - flag;
        if (flag && at < count) out[at] = pos;
        start += scan[GM_CU_THREADS - 1];
        __syncthreads(); /* everyone has read scan[last] before the next tile overwrites it */
    }
}

extern "C" int cuda_index_nonzero_fill(int64_t *out, int64_t count, const uint8_t *mask, int ndim,
                                       const int64_t *shape, const int64_t *strides, gm_cuda_ctx *ctx) {
    if (ndim < 0 || ndim > GM_MAX_DIMS || count < 0) return GM_ERR_ARG;
    const int64_t *s[1] = {strides};
    gm_cu_geom<1> g = gm_cu_geom_make<1>(ndim, shape, s);
    if (g.numel == 0 || count == 0) return GM_OK;
    /* about 16 tiles per block: long enough to amortise the block's start-up, enough blocks to fill the GPU */
    int64_t nb = (g.numel + 16 * GM_CU_THREADS - 1) / (16 * GM_CU_THREADS);
    nb = gm_cu_min<int64_t>(nb, gm_cu_min<int64_t>(NZ_MAX_BLOCKS, GM_CU_MAX_BLOCKS));
    GM_LAUNCH(nonzero_block_count_kernel, (unsigned)nb, GM_CU_THREADS, ctx, mask, g);
    GM_LAUNCH(nonzero_fill_kernel, (unsigned)nb, GM_CU_THREADS, ctx, out, count, mask, g);
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}
