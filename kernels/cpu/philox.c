/* kernels/cpu/philox.c — CPU fills of the Philox stream defined in philox.h (uniform and normal, every float
 * dtype). The stream definition and the per-element math live in the header, shared with
 * kernels/cuda/philox.cu; this file only loops over blocks. Each element is a pure function of
 * (seed, offset, i), so the result does not depend on the thread count or schedule. */
#include "philox.h"

#include <math.h>

uint64_t gm_philox_blocks(gm_dtype dt, int64_t n) { return philox_blocks(dt, n); }

/* Store v (already scaled) as element i of out. For uniform (clamp set) a value rounded onto or above `high`
 * becomes the largest dtype value below high (see philox.h). */
static inline void store_f32(float *out, int64_t i, double v, int clamp, double high) {
    float f = (float)v;
    if (clamp && (double)f >= high) {
        f = (float)high;
        if ((double)f >= high) f = nextafterf(f, -INFINITY);
    }
    out[i] = f;
}
static inline void store_f64(double *out, int64_t i, double v, int clamp, double high) {
    if (clamp && v >= high) v = nextafter(high, -HUGE_VAL);
    out[i] = v;
}
static inline void store_h16(uint16_t *out, int64_t i, double v, int clamp, double high, int bf16) {
    /* double -> float -> 16 bits, two round-to-nearest-even steps, exactly as the CUDA side does */
    float f = (float)v;
    uint16_t h = bf16 ? gm_float_to_bf16(f) : gm_float_to_half(f);
    if (clamp) {
        double back = bf16 ? gm_bf16_to_float(h) : gm_half_to_float(h);
        if (back >= high) {
            float fh = (float)high;
            h = bf16 ? gm_float_to_bf16(fh) : gm_float_to_half(fh);
            back = bf16 ? gm_bf16_to_float(h) : gm_half_to_float(h);
            if (back >= high) h = philox_h16_step_down(h);
        }
    }
    out[i] = h;
}

/* One specialised loop per (dtype, distribution): the per-element switch would otherwise cost more than the
 * Philox rounds. VALUE(x, j) is element j of a block's lanes x; STORE(i, v) writes it. */
#define FILL_LOOP(PER, VALUE, STORE)                                                                         \
    _Pragma("omp parallel for schedule(static) num_threads(use_threads)")                                   \
    for (int64_t blk = 0; blk < nblocks; blk++) {                                                            \
        uint32_t x[4];                                                                                       \
        philox_stream_block(seed, offset + (uint64_t)blk, x);                                                \
        const int64_t i0 = blk * (PER);                                                                      \
        if (n - i0 >= (PER)) { /* full block: constant trip count, so x stays in registers */              \
            for (int j = 0; j < (PER); j++) STORE(i0 + j, philox_affine(a, scale, VALUE(x, j)));              \
        } else {                                                                                             \
            for (int j = 0; j < (int)(n - i0); j++) STORE(i0 + j, philox_affine(a, scale, VALUE(x, j)));      \
        }                                                                                                    \
    }

#define U_NARROW(x, j) philox_narrow_uniform(x, j, bits, inv)
#define N_NARROW(x, j) philox_narrow_normal(x, j)
#define U_F64(x, j) philox_f64_uniform(x, j)
#define N_F64(x, j) philox_f64_normal(x, j)
#define ST_F32(i, v) store_f32((float *)out, i, v, clamp, b)
#define ST_F64(i, v) store_f64((double *)out, i, v, clamp, b)
#define ST_F16(i, v) store_h16((uint16_t *)out, i, v, clamp, b, 0)
#define ST_BF16(i, v) store_h16((uint16_t *)out, i, v, clamp, b, 1)

int gm_philox_fill(void *out, gm_dtype dt, int dist, int64_t n, uint64_t seed, uint64_t offset, double a,
                   double b, int nthreads) {
    if (!gm_dtype_is_float(dt) || (dist != GM_RNG_UNIFORM && dist != GM_RNG_NORMAL)) return GM_ERR_ARG;
    if (n <= 0) return GM_OK;
    const int bits = philox_uniform_bits(dt);
    const double inv = ldexp(1.0, -bits);
    const int64_t nblocks = (int64_t)philox_blocks(dt, n);
    /* uniform: a + (b-a)*u; normal: a + b*z. Clamping only makes sense for a non-empty [low, high). */
    const double scale = dist == GM_RNG_UNIFORM ? b - a : b;
    /* rand's [0, 1) needs no clamp: u is exact in the dtype and below 1 (philox.h) */
    const int clamp = dist == GM_RNG_UNIFORM && b > a && !(a == 0.0 && b == 1.0);
    /* A block costs ~40 integer multiplies (more with log/sin/cos); below ~4k blocks threads do not pay. */
    const int use_threads = nblocks >= 4096 && nthreads > 1 ? nthreads : 1;
    (void)use_threads; /* unused when built without OpenMP */
    (void)inv;
    if (dist == GM_RNG_UNIFORM) {
        switch (dt) {
        case GM_F32: FILL_LOOP(4, U_NARROW, ST_F32) break;
        case GM_F64: FILL_LOOP(2, U_F64, ST_F64) break;
        case GM_F16: FILL_LOOP(4, U_NARROW, ST_F16) break;
        default: FILL_LOOP(4, U_NARROW, ST_BF16) break;
        }
    } else {
        switch (dt) {
        case GM_F32: FILL_LOOP(4, N_NARROW, ST_F32) break;
        case GM_F64: FILL_LOOP(2, N_F64, ST_F64) break;
        case GM_F16: FILL_LOOP(4, N_NARROW, ST_F16) break;
        default: FILL_LOOP(4, N_NARROW, ST_BF16) break;
        }
    }
    return GM_OK;
}
