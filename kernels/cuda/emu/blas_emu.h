/* kernels/cuda/emu/blas_emu.h — the one product loop behind the emulator build's stand-ins for cuBLAS
 * (linear_emu.cpp, matmul_emu.cpp): plain loops on the emulator's "device" memory (host memory), accumulating in
 * float for float32, float16 and bfloat16 and in double for float64, as cuBLAS does with the compute types
 * linear.cu and matmul.cu ask for, and rounding once to the output dtype. The same numbers as cuBLAS up to
 * summation order. Emulated kernels run to completion when launched, so every input is ready when it is called. */
#ifndef GM_KERNELS_CUDA_EMU_BLAS_EMU_H
#define GM_KERNELS_CUDA_EMU_BLAS_EMU_H

#include <string.h>

#include "../../common.h"

namespace blas_emu {

/* The float at p of dtype dt (float32, float64, float16, bfloat16) as Acc, and a double stored as dt. */
template <typename Acc> Acc load(const char *p, gm_dtype dt) {
    switch (dt) {
    case GM_F32: { float v; memcpy(&v, p, 4); return (Acc)v; }
    case GM_F64: { double v; memcpy(&v, p, 8); return (Acc)v; }
    case GM_F16: { uint16_t v; memcpy(&v, p, 2); return (Acc)gm_half_to_float(v); }
    default: { uint16_t v; memcpy(&v, p, 2); return (Acc)gm_bf16_to_float(v); }
    }
}

inline void store(char *p, gm_dtype dt, double v) {
    switch (dt) {
    case GM_F32: { float f = (float)v; memcpy(p, &f, 4); break; }
    case GM_F64: memcpy(p, &v, 8); break;
    case GM_F16: { uint16_t h = gm_float_to_half((float)v); memcpy(p, &h, 2); break; }
    default: { uint16_t h = gm_float_to_bf16((float)v); memcpy(p, &h, 2); break; }
    }
}

template <typename Acc>
void gemm_acc(gm_dtype dt, int64_t m, int64_t n, int64_t k, const char *a, int64_t a_rs, int64_t a_cs, const char *b,
              int64_t b_rs, int64_t b_cs, int accumulate, char *c, int64_t c_rs) {
    const int64_t es = (int64_t)gm_dtype_size(dt);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            Acc acc = 0;
            for (int64_t p = 0; p < k; p++)
                acc += load<Acc>(a + i * a_rs + p * a_cs, dt) * load<Acc>(b + p * b_rs + j * b_cs, dt);
            char *o = c + i * c_rs + j * es;
            double v = (double)acc;
            if (accumulate) v += load<double>(o, dt);
            store(o, dt, v);
        }
}

/* c (m, n), rows c_rs bytes apart = a (m, k) @ b (k, n) (+ c when accumulate); a and b are read through byte
 * strides (rows, columns). A float dtype. */
inline void gemm(gm_dtype dt, int64_t m, int64_t n, int64_t k, const char *a, int64_t a_rs, int64_t a_cs,
                 const char *b, int64_t b_rs, int64_t b_cs, int accumulate, char *c, int64_t c_rs) {
    if (dt == GM_F64) gemm_acc<double>(dt, m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, accumulate, c, c_rs);
    else gemm_acc<float>(dt, m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, accumulate, c, c_rs);
}

} // namespace blas_emu

#endif
