/* kernels/philox.h — the Philox4x32-10 counter-based generator and the one definition of gpumemnet's
 * random stream, shared by kernels/cpu/philox.c and kernels/cuda/philox.cu (kernels/README.md), and the fills
 * each of them defines.
 *
 * Why one header for both backends: the promise is "the same (seed, offset) gives the same numbers on CPU and
 * CUDA". Two hand-copied implementations drift; here the block function and every bits -> number conversion
 * are written once, as inline functions that nvcc compiles for the device (PHILOX_FN adds __host__ __device__)
 * and gcc compiles for the host. Only the loops around them differ (OpenMP on CPU, one thread per block on GPU).
 *
 * ---- The generator -------------------------------------------------------------------------------------
 * Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as easy as 1, 2, 3", SC'11), exactly as
 * Random123, cuRAND and PyTorch implement it: a 128-bit counter (c0,c1,c2,c3) and a 64-bit key (k0,k1) go
 * through 10 rounds; round: (hi0,lo0) = M0*c0, (hi1,lo1) = M1*c2 (32x32->64 products),
 * c = (hi1^c1^k0, lo1, hi0^c3^k1, lo0); between rounds the key is bumped by the Weyl constants (W0, W1).
 * tests/test_random.py checks it against Random123's known-answer vectors.
 *
 * ---- The stream (state = seed: uint64, offset: uint64) --------------------------------------------------
 *   key   = (seed & 0xffffffff, seed >> 32)
 *   block b (b = 0, 1, 2, ...) = philox(counter = (b & 0xffffffff, b >> 32, 0, 0), key) -> lanes x0..x3
 * A call that fills n elements starts at block `offset` and then advances offset by the blocks it used,
 * gm_philox_blocks(dtype, n); element i (in the tensor's logical row-major order) reads:
 *   float32, float16, bfloat16 ("narrow", 4 elements per block): block offset + i/4, lane j = i%4
 *     uniform: u = (xj >> (32-p)) * 2^-p with p = 24 (float32), 11 (float16), 8 (bfloat16) significant bits,
 *              so u is exactly representable in the dtype and rand() is in [0, 1) without rounding up to 1;
 *     normal:  lanes (x0,x1) feed elements j=0,1 and (x2,x3) elements j=2,3 by Box-Muller computed in double:
 *              u1 = (x_even + 1) * 2^-32 in (0,1], u2 = x_odd * 2^-32, r = sqrt(-2 ln u1), t = 2 pi u2,
 *              z = r cos t for even j, r sin t for odd j.
 *   float64 (2 elements per block): block offset + i/2, half h = i%2
 *     uniform: u = (((uint64)x_{2h} << 32 | x_{2h+1}) >> 11) * 2^-53   (53 bits, in [0,1));
 *     normal:  u1 = (m01 + 1) * 2^-53 with m01 the 53 bits of (x0,x1), u2 = m23 * 2^-53 from (x2,x3);
 *              z = r cos t for h = 0, r sin t for h = 1.
 * uniform(low, high) stores low + (high-low)*u, normal(mean, std) stores mean + std*z; both are computed in
 * double and rounded to the dtype once (float16/bfloat16 through float32: the same two roundings on both
 * backends). If rounding lands on or above `high` (and high > low), the value becomes the largest dtype value
 * below high, so uniform stays in [low, high) as PyTorch documents (its own CPU path can return `high`).
 * Counter arithmetic is modulo 2^64: offset + i/4 wraps, which no real run reaches (2^64 blocks).
 *
 * CPU and CUDA agree bit for bit on every uniform and on the Philox lanes. Normals go through log/sin/cos,
 * which glibc and CUDA's libdevice round differently in the last bit of a double on rare inputs: float64
 * normals agree to a few ulps, float32/16/bf16 normals (rounded from the double) agree except in the rare case
 * where that last bit decides the rounding. */
#ifndef GM_KERNELS_PHILOX_H
#define GM_KERNELS_PHILOX_H

#include <math.h>
#include <stdint.h>
#include "common.h"

#ifdef __CUDACC__
#define PHILOX_FN static __host__ __device__ __forceinline__
#else
#define PHILOX_FN static inline
#endif

#define GM_PHILOX_M0 0xD2511F53u
#define GM_PHILOX_M1 0xCD9E8D57u
#define GM_PHILOX_W0 0x9E3779B9u
#define GM_PHILOX_W1 0xBB67AE85u

/* PyTorch's default seed (c10 default_rng_seed_val), so a fresh process is reproducible without manual_seed
 * and the number is familiar to anyone reading a state dump. */
#define GM_PHILOX_DEFAULT_SEED UINT64_C(67280421310721)

/* Which distribution a fill draws. */
enum { GM_RNG_UNIFORM = 0, GM_RNG_NORMAL = 1 };

PHILOX_FN void philox_round(uint32_t c[4], uint32_t k0, uint32_t k1) {
    uint64_t p0 = (uint64_t)GM_PHILOX_M0 * c[0];
    uint64_t p1 = (uint64_t)GM_PHILOX_M1 * c[2];
    uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    uint32_t n0 = hi1 ^ c[1] ^ k0, n2 = hi0 ^ c[3] ^ k1;
    c[0] = n0;
    c[1] = lo1;
    c[2] = n2;
    c[3] = lo0;
}

/* out = Philox4x32-10(counter, key). */
PHILOX_FN void philox4x32_10(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]) {
    uint32_t c[4] = {counter[0], counter[1], counter[2], counter[3]};
    uint32_t k0 = key[0], k1 = key[1];
    for (int r = 0; r < 10; r++) {
        philox_round(c, k0, k1);
        k0 += GM_PHILOX_W0;
        k1 += GM_PHILOX_W1;
    }
    out[0] = c[0];
    out[1] = c[1];
    out[2] = c[2];
    out[3] = c[3];
}

/* Lanes of stream block b under seed. */
PHILOX_FN void philox_stream_block(uint64_t seed, uint64_t b, uint32_t x[4]) {
    uint32_t ctr[4] = {(uint32_t)b, (uint32_t)(b >> 32), 0u, 0u};
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    philox4x32_10(ctr, key, x);
}

/* Elements per block for dtype dt: 2 for float64 (53-bit values take two lanes), 4 otherwise. */
PHILOX_FN int philox_per_block(gm_dtype dt) { return dt == GM_F64 ? 2 : 4; }

/* Significant bits of a narrow uniform: exactly the dtype's precision, so u never rounds up to 1. */
PHILOX_FN int philox_uniform_bits(gm_dtype dt) { return dt == GM_F16 ? 11 : dt == GM_BF16 ? 8 : 24; }

/* Box-Muller in double. Written with plain log/sqrt/cos/sin, which exist with these names on both sides. */
PHILOX_FN double philox_box_muller(double u1, double u2, int use_sin) {
    const double two_pi = 6.283185307179586476925286766559;
    double r = sqrt(-2.0 * log(u1));
    double t = two_pi * u2;
    return use_sin ? r * sin(t) : r * cos(t);
}

/* The value of element j of a block with lanes x, before scaling (see the stream definition above).
 * bits = philox_uniform_bits(dt), inv = 2^-bits (passed in so the hot loop has no ldexp call). */
PHILOX_FN double philox_narrow_uniform(const uint32_t x[4], int j, int bits, double inv) {
    return (double)(x[j] >> (32 - bits)) * inv;
}
PHILOX_FN double philox_narrow_normal(const uint32_t x[4], int j) {
    int p = j & 2;
    double u1 = ((double)x[p] + 1.0) * 2.3283064365386962890625e-10; /* 2^-32 */
    double u2 = (double)x[p + 1] * 2.3283064365386962890625e-10;
    return philox_box_muller(u1, u2, j & 1);
}
PHILOX_FN uint64_t philox_bits53(uint32_t hi, uint32_t lo) { return (((uint64_t)hi << 32) | lo) >> 11; }
PHILOX_FN double philox_f64_uniform(const uint32_t x[4], int h) {
    return (double)philox_bits53(x[2 * h], x[2 * h + 1]) * 1.1102230246251565404236316680908203125e-16; /* 2^-53 */
}
PHILOX_FN double philox_f64_normal(const uint32_t x[4], int h) {
    double u1 = ((double)philox_bits53(x[0], x[1]) + 1.0) * 1.1102230246251565404236316680908203125e-16;
    double u2 = (double)philox_bits53(x[2], x[3]) * 1.1102230246251565404236316680908203125e-16;
    return philox_box_muller(u1, u2, h);
}

/* a + b*v in double, rounded twice (no fused multiply-add): nvcc contracts a*b+c into an fma by default and a
 * fused result differs in the last bit, so the device side spells both roundings with intrinsics. On the host
 * the product is a separate statement: clang contracts only within one expression, and GCC in ISO C mode
 * (-std=c11, what setup.py uses) does not contract at all. */
PHILOX_FN double philox_affine(double a, double b, double v) {
#ifdef __CUDA_ARCH__
    return __dadd_rn(a, __dmul_rn(b, v));
#else
    double prod = b * v;
    return a + prod;
#endif
}

/* One ulp toward -inf on an IEEE binary16 or bfloat16 bit pattern (sign-magnitude; finite input). */
PHILOX_FN uint16_t philox_h16_step_down(uint16_t h) {
    if (h == 0x0000u) return 0x8001u;     /* +0 -> the negative smallest subnormal */
    if (h & 0x8000u) return (uint16_t)(h + 1u); /* negative: larger magnitude */
    return (uint16_t)(h - 1u);
}

/* Number of stream blocks a fill of n elements of dtype dt consumes. */
PHILOX_FN uint64_t philox_blocks(gm_dtype dt, int64_t n) {
    uint64_t per = (uint64_t)philox_per_block(dt);
    return n <= 0 ? 0 : ((uint64_t)n + per - 1) / per;
}

/* ---- The fills ------------------------------------------------------------------------------------------
 * Declared here, beside the stream they draw, rather than in each backend's header: csrc/random.c and the tests
 * reach both fills through one include. kernels/cpu/philox.c defines gm_philox_blocks and gm_philox_fill,
 * kernels/cuda/philox.cu defines gm_philox_fill_cuda (built with CUDA only). */
#ifdef __cplusplus
extern "C" {
#endif

/* Number of blocks a fill of n elements of dtype dt consumes (the offset advance). */
uint64_t gm_philox_blocks(gm_dtype dt, int64_t n);

/* Fill out (n contiguous elements of float dtype dt) with stream elements 0..n-1 of (seed, offset).
 *   dist == GM_RNG_UNIFORM: a = low, b = high (finite, low <= high, high-low finite);
 *   dist == GM_RNG_NORMAL:  a = mean, b = std (finite, std >= 0).
 * Returns GM_OK, or GM_ERR_ARG for a non-float dtype or an unknown dist. nthreads: OpenMP threads (<= 1: one). */
int gm_philox_fill(void *out, gm_dtype dt, int dist, int64_t n, uint64_t seed, uint64_t offset, double a,
                   double b, int nthreads);

/* The same fill on a CUDA device (kernels/cuda/philox.cu): out is device memory on `device`, stream a
 * cudaStream_t (csrc passes the device's stream, gm_cuda_ctx). On failure returns GM_ERR_BACKEND and writes the CUDA error
 * into err (errlen bytes). Only built when the extension is built with CUDA. */
int gm_philox_fill_cuda(void *out, gm_dtype dt, int dist, int64_t n, uint64_t seed, uint64_t offset, double a,
                        double b, int device, void *stream, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
