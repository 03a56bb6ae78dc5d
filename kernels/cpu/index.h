/* kernels/cpu/index.h — indexing along one dim by an int64 index array: gather (index), scatter with and
 * without accumulation (index_put_, index's backward), and nonzero over a bool mask. Concatenation has no
 * kernel of its own: csrc/ops_index.c copies each input into a view of the output with gm_copy_into.
 *
 * Conventions: pointers are raw, strides are in BYTES, shapes in elements; a tensor `a` indexed along `dim`
 * has outer = a.shape[:dim] and inner = a.shape[dim+1:]. Index values may be negative (wrapped by size) and
 * are checked by csrc/ before the call; the kernels check again before writing anything and return
 * GM_ERR_ARG instead of touching memory out of bounds. Nothing here allocates. */
#ifndef GM_KERNELS_CPU_INDEX_H
#define GM_KERNELS_CPU_INDEX_H

#include "../common.h"

/* out[o..., j, k...] = inp[o..., wrap(idx[j]), k...]
 *   out  is contiguous (outer..., n_idx, inner...): the caller's index shape flattened to n_idx
 *   inp  is (shape[0..ndim)) with byte strides inp_strides; idx is (n_idx) contiguous int64 */
int index_gather_forward(char *out, const char *inp, const int64_t *idx, int64_t n_idx, int ndim,
                         const int64_t *shape, const int64_t *inp_strides, int dim, size_t elsize, int nthreads);

/* dst[o..., wrap(idx[j]), k...] (+)= src[o..., j..., k...]
 *   dst is (shape[0..ndim)) with byte strides dst_strides, dtype dt
 *   idx is contiguous int64 of shape idx_shape (idx_ndim dims, possibly 0: a single index)
 *   src has the indexed shape shape[:dim] + idx_shape + shape[dim+1:] with byte strides src_strides (zeros
 *       where csrc broadcast it), same dtype as dst.
 * Duplicate indices: with accumulate they all add up (float16/bfloat16 through float, bool as logical or);
 * without, the last one in index order wins. Either way the result does not depend on the thread count:
 * every destination element is owned by one thread, which visits the indices in order. */
int index_put_forward(char *dst, const char *src, const int64_t *idx, int idx_ndim, const int64_t *idx_shape,
                      int ndim, const int64_t *shape, const int64_t *dst_strides, const int64_t *src_strides,
                      int dim, gm_dtype dt, int accumulate, int nthreads);

/* *count = number of nonzero bytes in mask (ndim, shape, byte strides; bool). */
int index_nonzero_count(int64_t *count, const uint8_t *mask, int ndim, const int64_t *shape,
                        const int64_t *strides, int nthreads);
/* out[0..count) = row-major linear positions of the nonzero elements of mask, ascending. Returns GM_ERR_ARG
 * (having written at most count entries) if the mask does not hold exactly count nonzeros. */
int index_nonzero_fill(int64_t *out, int64_t count, const uint8_t *mask, int ndim, const int64_t *shape,
                       const int64_t *strides, int nthreads);

#endif
