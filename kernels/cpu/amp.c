/* kernels/cpu/amp.c — GradScaler's unscale: one pass over each gradient that multiplies by 1/scale and notes
 * any inf/nan, so a skipped step costs no second pass and no temporary. */
#include "amp.h"
#include <math.h>

#define UNSCALE_LOOP(T, LOAD, STORE)                                                     \
    do {                                                                                 \
        T *p = (T *)g;                                                                   \
        _Pragma("omp parallel for reduction(|| : bad) num_threads(nt) if (n > 65536)")   \
        for (int64_t i = 0; i < n; i++) {                                                \
            double v = (double)LOAD(p[i]) * inv_scale;                                   \
            bad = bad || !isfinite(v);                                                   \
            p[i] = STORE(v);                                                             \
        }                                                                                \
    } while (0)

#define ID(x) (x)
#define TO_F32(v) ((float)(v))
#define TO_F64(v) (v)
#define H2F(x) gm_half_to_float(x)
#define F2H(v) gm_float_to_half((float)(v))
#define B2F(x) gm_bf16_to_float(x)
#define F2B(v) gm_float_to_bf16((float)(v))

int cpu_amp_unscale_forward(void *g, gm_dtype dt, int64_t n, double inv_scale, int *found_inf, int nthreads) {
    int bad = 0, nt = nthreads > 0 ? nthreads : 1;
    switch (dt) {
    case GM_F32: UNSCALE_LOOP(float, ID, TO_F32); break;
    case GM_F64: UNSCALE_LOOP(double, ID, TO_F64); break;
    case GM_F16: UNSCALE_LOOP(uint16_t, H2F, F2H); break;
    case GM_BF16: UNSCALE_LOOP(uint16_t, B2F, F2B); break;
    default: return GM_ERR_UNSUPPORTED;
    }
    if (bad) *found_inf = 1;
    return GM_OK;
}
