/* kernels/cuda/scratch_sizes.h — the bytes of device scratch that CUDA kernels take and the CPU kernels do not,
 * as plain C that every build includes (CPU-only too): csrc/ allocates this scratch for a real CUDA run, and
 * allocates the same bytes on meta when a meta run stands in for CUDA (csrc/meta_target.h), so that an estimate
 * for CUDA sees them. One definition for both: the kernels (norm.cu, loss.cu) size their grids from here.
 * No CUDA headers, no Python: just sizes. */
#ifndef GM_KERNELS_CUDA_SCRATCH_SIZES_H
#define GM_KERNELS_CUDA_SCRATCH_SIZES_H

#include <stddef.h>
#include <stdint.h>

/* ---- losses (kernels/cuda/loss.h) ----
 * Cross-block partials per reduction: at most this many blocks feed one. */
#define CUDA_LOSS_PARTS 512
/* The result record (4 x 8 bytes) and three arrays of partials (total, weight sum, first bad position). */
#define CUDA_LOSS_SCRATCH_BYTES (4 * 8 + 3 * 8 * CUDA_LOSS_PARTS)

/* ---- batch norm (kernels/cuda/norm.h) ----
 * Fewest elements per block worth a split (the emulator, with few blocks, splits small test inputs too: a meta
 * run in an emulator build therefore models the emulator, in any other build a real GPU). */
#ifdef GM_CUDA_EMU
#define CUDA_BN_MIN_CHUNK 64
#else
#define CUDA_BN_MIN_CHUNK 4096
#endif
#define CUDA_BN_MAX_SPLITS 1024
/* Multiprocessors assumed when the count is unknown (sm_count <= 0): a meta run on a machine without the GPU. */
#define CUDA_BN_DEFAULT_SMS 16

/* Chunks a channel of cnt = N*HW elements is split into: about 8 blocks per multiprocessor in all (as
 * gm_cu_blocks), none shorter than CUDA_BN_MIN_CHUNK. */
static inline int64_t cuda_batchnorm_splits(int64_t cnt, int64_t C, int sm_count) {
    if (C < 1 || cnt < 1) return 1;
    const int64_t target = (int64_t)(sm_count > 0 ? sm_count : CUDA_BN_DEFAULT_SMS) * 8;
    int64_t s = (target + C - 1) / C;
    const int64_t by_work = (cnt + CUDA_BN_MIN_CHUNK - 1) / CUDA_BN_MIN_CHUNK;
    if (s > by_work) s = by_work;
    if (s > CUDA_BN_MAX_SPLITS) s = CUDA_BN_MAX_SPLITS;
    return s < 1 ? 1 : s;
}

/* Device workspace (bytes, 0 when none) that a forward (reduce = training) or a backward (reduce = training or
 * dweight or dbias wanted) of this geometry takes: the per-channel partial sums and sums of squares, one double
 * each per (channel, chunk). */
static inline size_t cuda_batchnorm_workspace_bytes(int64_t N, int64_t C, int64_t HW, int reduce, int sm_count) {
    if (!reduce || N < 0 || C < 1 || HW < 0) return 0;
    return (size_t)(2 * C * cuda_batchnorm_splits(N * HW, C, sm_count)) * sizeof(double);
}

#endif
