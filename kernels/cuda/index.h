/* kernels/cuda/index.h — CUDA indexing: gather, scatter(-add) and nonzero (kernels/cpu/index.h is the reference:
 * same arguments and semantics, `int nthreads` replaced by the context). Pointers to tensor data are device
 * pointers; shape/stride arrays and the `count` of nonzero_count are host memory.
 *
 * Indices must be in bounds (csrc checks them first with cuda_index_check_bounds, which is where an IndexError
 * comes from); a kernel that meets an out-of-bounds index anyway skips it instead of touching memory it does not
 * own. */
#ifndef GM_KERNELS_CUDA_INDEX_H
#define GM_KERNELS_CUDA_INDEX_H

#include "../common.h"
#include "cuda_ctx.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out (outer..., n_idx, inner...) contiguous = inp gathered along dim (kernels/cpu/index.h). */
int cuda_index_gather_forward(char *out, const char *inp, const int64_t *idx, int64_t n_idx, int ndim,
                              const int64_t *shape, const int64_t *inp_strides, int dim, size_t elsize,
                              gm_cuda_ctx *ctx);

/* dst[o..., wrap(idx[j]), k...] (+)= src[o..., j..., k...] (kernels/cpu/index.h). Bit-identical to the CPU
 * (every destination column owned by one thread, indices visited in order) except for accumulation with many
 * indices over few columns, which uses atomics: sums then differ from the CPU's in rounding only. Without
 * accumulation that case writes in parallel, so with duplicate indices the value kept is one of the duplicates'
 * (PyTorch's CUDA rule), not necessarily the last. */
int cuda_index_put_forward(char *dst, const char *src, const int64_t *idx, int idx_ndim, const int64_t *idx_shape,
                           int ndim, const int64_t *shape, const int64_t *dst_strides, const int64_t *src_strides,
                           int dim, gm_dtype dt, int accumulate, gm_cuda_ctx *ctx);

/* *count (host) = number of nonzero bytes of the bool mask. Waits for the stream (the count is read back). */
int cuda_index_nonzero_count(int64_t *count, const uint8_t *mask, int ndim, const int64_t *shape,
                             const int64_t *strides, gm_cuda_ctx *ctx);
/* out[0..count) = row-major positions of the nonzero elements, ascending. Writes at most count entries. */
int cuda_index_nonzero_fill(int64_t *out, int64_t count, const uint8_t *mask, int ndim, const int64_t *shape,
                            const int64_t *strides, gm_cuda_ctx *ctx);

/* *bad_pos (host) = the first j with idx[j] outside [-size, size), or -1; *bad_value = idx[*bad_pos]. The CPU
 * checks this in csrc; on CUDA it is a reduction over the device array, then a read-back (waits). */
int cuda_index_check_bounds(const int64_t *idx, int64_t n, int64_t size, int64_t *bad_pos, int64_t *bad_value,
                            gm_cuda_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif
