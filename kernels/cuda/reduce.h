/* kernels/cuda/reduce.h — the CUDA twins of kernels/cpu/reduce.h: sum, mean, prod, amax, amin, max/min with
 * index, argmax/argmin, var over a reduce_geom (kept dims -> contiguous output, reduced dims), on device memory.
 *
 * Same arguments and semantics as the CPU kernels (accumulation in double whenever a float is involved, exact
 * wrapping int64 otherwise; NaN propagates; the first index of the extreme, the first NaN winning), with the CPU
 * names' `cpu_` prefix replaced by `cuda_` and the final `int nthreads` by the device context. Work is queued on
 * ctx->stream; the call returns without waiting.
 *
 * scratch, parts: a reduction to few outputs over a long extent is split in `parts` pieces of the extent, reduced
 * by different blocks into partials (scratch: REDUCE_SPLIT_BYTES(nout, parts) bytes of device memory), which a
 * second pass combines. csrc/ops_reduce.c decides from the shapes only and allocates the scratch on every device
 * (the CPU kernels do not need it), so that allocations, and memory estimates, are the same on cpu, meta and
 * cuda. parts <= 1: no split, scratch may be NULL. */
#ifndef GM_KERNELS_CUDA_REDUCE_H
#define GM_KERNELS_CUDA_REDUCE_H

#include "../reduce_geom.h"
#include "cuda_ctx.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Scratch bytes of a split in `parts`: one partial per output and piece, 16 bytes each (the largest accumulator:
 * an arg reduction's value and index). */
#define REDUCE_SPLIT_BYTES(nout, parts) ((size_t)(nout) * (size_t)(parts) * 16)

int cuda_reduce_forward(void *out, gm_dtype out_dt, const void *inp, gm_dtype inp_dt, const reduce_geom *g, int op,
                        void *scratch, int64_t parts, gm_cuda_ctx *ctx);

int cuda_reduce_arg_forward(void *values, int64_t *indices, const void *inp, gm_dtype dt, const reduce_geom *g,
                            int is_max, void *scratch, int64_t parts, gm_cuda_ctx *ctx);

int cuda_reduce_var_forward(void *out, const void *inp, gm_dtype dt, const reduce_geom *g, double correction,
                            gm_cuda_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif
