/* kernels/cpu/dropout.c — dropout mask and its application (see dropout.h). Every mask byte is a pure function
 * of (seed, offset, i), so the result does not depend on the thread count. */
#include "dropout.h"
#include "nn_dtype.h"
#include "philox.h"

int dropout_mask_forward(uint8_t *mask, int64_t n, double p, uint64_t seed, uint64_t offset, int nthreads) {
    if (n < 0 || !(p >= 0.0 && p <= 1.0)) return GM_ERR_ARG;
    const double keep = 1.0 - p;
    const int bits = philox_uniform_bits(GM_F32);
    const double inv = ldexp(1.0, -bits);
    const int64_t nblocks = (int64_t)philox_blocks(GM_F32, n);
    /* ~40 integer multiplies per block: threads pay from a few thousand blocks on */
    const int nt = nblocks >= 4096 && nthreads > 1 ? nthreads : 1;
    (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t b = 0; b < nblocks; b++) {
        uint32_t x[4];
        philox_stream_block(seed, offset + (uint64_t)b, x);
        const int64_t i0 = b * 4;
        const int m = n - i0 < 4 ? (int)(n - i0) : 4;
        for (int j = 0; j < m; j++) mask[i0 + j] = philox_narrow_uniform(x, j, bits, inv) < keep;
    }
    return GM_OK;
}

int dropout_apply_forward(void *out, const void *inp, const uint8_t *mask, int64_t outer, int64_t inner,
                          double scale, gm_dtype dt, int nthreads) {
    if (!gm_dtype_is_float(dt) || outer < 0 || inner < 0) return GM_ERR_ARG;
    const int nt = nn_threads(outer * inner, nthreads);
    (void)nt;
    if (inner == 1 && dt == GM_F32) {
        /* The hot case, written in float with the mask applied as a bit mask: a branch on a random mask
         * mispredicts half the time, GCC does not if-convert the select inside an OpenMP region, and the double
         * version widens mask bytes to 64-bit lanes; this vectorizes (measured ~8x faster). Clearing the bits
         * keeps dropped elements exactly +0 even where x is inf. x * (float)scale may differ from the double
         * product by one rounding, as in PyTorch's float kernel. */
        const float s = (float)scale;
        uint32_t *o = (uint32_t *)out;
        const float *x = (const float *)inp;
#pragma omp parallel for schedule(static) num_threads(nt)
        for (int64_t i = 0; i < outer; i++) {
            const float v = x[i] * s;
            uint32_t bits;
            memcpy(&bits, &v, 4);
            o[i] = bits & (0u - (uint32_t)(mask[i] != 0));
        }
    } else if (inner == 1) {
        NN_DISPATCH(dt, _Pragma("omp parallel for schedule(static) num_threads(nt)")
                    for (int64_t i = 0; i < outer; i++) {
                        const double v = nn_ld(inp, i, DT) * scale; /* loaded unconditionally: no branch */
                        nn_st(out, i, DT, mask[i] ? v : 0.0);
                    })
    } else {
        NN_DISPATCH(dt, _Pragma("omp parallel for schedule(static) num_threads(nt)")
                    for (int64_t o = 0; o < outer; o++) {
                        const int64_t base = o * inner;
                        if (mask[o]) {
                            for (int64_t i = base; i < base + inner; i++) nn_st(out, i, DT, nn_ld(inp, i, DT) * scale);
                        } else {
                            for (int64_t i = base; i < base + inner; i++) nn_st(out, i, DT, 0.0);
                        }
                    })
    }
    return GM_OK;
}
