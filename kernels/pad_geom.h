/* kernels/pad_geom.h — F.pad's geometry and index math, shared by both backends (kernels/README.md).
 *
 * A padded tensor is seen as (planes, D, H, W): the last 1, 2 or 3 dims are padded (the missing ones have size 1
 * and no padding), every leading dim is folded into `planes`. before[k] / after[k] are PyTorch's pads of dim k
 * (k = 0 is D), either may be negative (a crop). Along one dim of input size n, output size out = before + n + after,
 * output index o reads input index pad_src(...):
 *   PAD_CONSTANT   o - before, or -1 (outside: the fill value)
 *   PAD_REFLECT    mirrored about the edges without repeating them (needs before, after < n)
 *   PAD_REPLICATE  clamped to [0, n - 1]
 *   PAD_CIRCULAR   wrapped modulo n (needs before, after <= n)
 * The backward gathers: input index i adds the gradients of the at most three output ranges pad_readers
 * lists (reflect and circular: single indices; replicate: the padded edge runs), in that fixed order, so the
 * CPU and CUDA kernels add the same numbers in the same order. */
#ifndef GM_KERNELS_PAD_GEOM_H
#define GM_KERNELS_PAD_GEOM_H

#include <stdint.h>

#include "common.h"

typedef enum { PAD_CONSTANT = 0, PAD_REFLECT = 1, PAD_REPLICATE = 2, PAD_CIRCULAR = 3 } pad_mode;

typedef struct {
    int64_t planes;
    int64_t in[3], out[3], before[3]; /* D, H, W */
    int mode;
} pad_geom;

GM_HD static inline int64_t pad_src(int mode, int64_t o, int64_t n, int64_t before) {
    int64_t i = o - before;
    switch (mode) {
    case PAD_CONSTANT: return i >= 0 && i < n ? i : -1;
    case PAD_REFLECT: return i < 0 ? -i : i >= n ? 2 * (n - 1) - i : i;
    case PAD_REPLICATE: return i < 0 ? 0 : i >= n ? n - 1 : i;
    default: return i < 0 ? i + n : i >= n ? i - n : i; /* PAD_CIRCULAR: pads <= n wrap at most once */
    }
}

/* The output ranges [lo[k], hi[k]) whose pad_src is i; returns how many (0..3). */
GM_HD static inline int pad_readers(int mode, int64_t i, int64_t n, int64_t before, int64_t out, int64_t lo[3],
                                    int64_t hi[3]) {
    int k = 0;
    int64_t cand[3][2] = {{i + before, i + before + 1}, {0, 0}, {0, 0}};
    if (mode == PAD_REFLECT) {
        if (i >= 1) cand[1][0] = before - i, cand[1][1] = before - i + 1;            /* left mirror */
        if (i <= n - 2) cand[2][0] = before + 2 * (n - 1) - i, cand[2][1] = cand[2][0] + 1; /* right mirror */
    } else if (mode == PAD_REPLICATE) {
        if (i == 0) cand[1][0] = 0, cand[1][1] = before;      /* the left run */
        if (i == n - 1) cand[2][0] = before + n, cand[2][1] = out; /* the right run */
    } else if (mode == PAD_CIRCULAR) {
        cand[1][0] = i + before - n, cand[1][1] = cand[1][0] + 1;
        cand[2][0] = i + before + n, cand[2][1] = cand[2][0] + 1;
    }
    for (int c = 0; c < 3; c++) {
        int64_t a = cand[c][0] < 0 ? 0 : cand[c][0], b = cand[c][1] > out ? out : cand[c][1];
        if (c == 1 && mode == PAD_REFLECT && b > before) b = before;          /* a mirror lies in the padding */
        if (c == 2 && mode == PAD_REFLECT && a < before + n) a = before + n;
        if (c == 1 && mode == PAD_CIRCULAR && b > before) b = before;
        if (c == 2 && mode == PAD_CIRCULAR && a < before + n) a = before + n;
        if (a < b) lo[k] = a, hi[k] = b, k++;
    }
    return k;
}

#endif
