/* kernels/cpu/dropout.h — dropout on the CPU: drawing the keep mask from the Philox stream, and applying it.
 *
 * The mask is the one definition both backends follow (kernels/cpu/philox.h defines the stream):
 *   keep_i = u_i < 1 - p, with u_i element i of the float32 uniform stream at (seed, offset), i.e. exactly the
 *   value rand(n, dtype=float32) would return at that state, compared in double.
 * A mask of n elements therefore consumes gm_philox_blocks(GM_F32, n) blocks whatever the tensor's dtype: the
 * same model run in float32 and under float16 autocast draws the same masks, and resetting the generator to
 * (seed, offset) replays a mask exactly (what checkpointing relies on).
 * The mask is kept as one byte per element (bool): a quarter of a float32 mask, and it is all backward needs. */
#ifndef GM_KERNELS_CPU_DROPOUT_H
#define GM_KERNELS_CPU_DROPOUT_H

#include "../common.h"

/* mask (n) = keep_i as above (1 keep, 0 drop). p in [0, 1]. */
int dropout_mask_forward(uint8_t *mask, int64_t n, double p, uint64_t seed, uint64_t offset, int nthreads);

/* out (outer, inner) = mask[o] ? inp (outer, inner) * scale : 0, dtype dt. inner = 1 for elementwise dropout,
 * H*W for dropout2d (one mask entry per channel). out may be inp. A dropped element is written as 0 (not
 * inp * 0), so p = 1 gives zeros even where inp is inf. Backward is the same call on the gradient. */
int dropout_apply_forward(void *out, const void *inp, const uint8_t *mask, int64_t outer, int64_t inner,
                          double scale, gm_dtype dt, int nthreads);

#endif
