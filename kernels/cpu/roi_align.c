/* kernels/cpu/roi_align.c — roi_align forward and backward (see roi_align.h): the forward's threads take
 * (box, channel) pairs; the backward's take channels, each walking every box, so no two threads add into one
 * element and the result does not depend on the thread count. */
#include "roi_align.h"
#include "nn_dtype.h"

/* Box k's values as double: b, x1, y1, x2, y2. */
NN_INLINE void roi_values(const void *rois, int64_t k, int dt, double v[5]) {
    for (int i = 0; i < 5; i++) v[i] = nn_ld(rois, k * 5 + i, dt);
}

static int check_rois(const void *rois, const roi_align_geom *g, gm_dtype dt) {
    if ((dt != GM_F32 && dt != GM_F64) || g->N < 0 || g->C < 0 || g->H < 1 || g->W < 1 || g->K < 0 || g->PH < 1 ||
        g->PW < 1)
        return GM_ERR_ARG;
    for (int64_t k = 0; k < g->K; k++) {
        double v[5];
        roi_values(rois, k, dt, v);
        for (int i = 0; i < 5; i++)
            if (!isfinite(v[i])) return GM_ERR_ARG;
        if (v[0] < 0 || v[0] >= (double)g->N) return GM_ERR_ARG;
    }
    return GM_OK;
}

NN_INLINE roi_box box_at(const void *rois, int64_t k, const roi_align_geom *g, int dt) {
    double v[5];
    roi_values(rois, k, dt, v);
    return roi_box_of(g, v[0], v[1], v[2], v[3], v[4]);
}

int roi_align_forward(void *out, const void *input, const void *rois, const roi_align_geom *g, gm_dtype dt,
                      int nthreads) {
    const int st = check_rois(rois, g, dt);
    if (st != GM_OK) return st;
    const int64_t plane = g->H * g->W, bins = g->PH * g->PW;
    const int nt = nn_threads(g->K * g->C * bins * 4, nthreads);
    (void)nt;
    NN_DISPATCH(dt, _Pragma("omp parallel for schedule(static) num_threads(nt)")
    for (int64_t kc = 0; kc < g->K * g->C; kc++) {
        const int64_t k = kc / g->C, c = kc % g->C;
        const roi_box r = box_at(rois, k, g, DT);
        const int64_t base = (r.n * g->C + c) * plane;
        for (int64_t ph = 0; ph < g->PH; ph++)
            for (int64_t pw = 0; pw < g->PW; pw++) {
                double sum = 0.0;
                for (int64_t iy = 0; iy < r.grid_h; iy++)
                    for (int64_t ix = 0; ix < r.grid_w; ix++) {
                        const roi_taps t = roi_sample(&r, ph, pw, iy, ix, g->H, g->W);
                        for (int q = 0; q < 4; q++) sum += t.w[q] * nn_ld(input, base + t.at[q], DT);
                    }
                nn_st(out, kc * bins + ph * g->PW + pw, DT, sum / r.count);
            }
    })
    return GM_OK;
}

int roi_align_backward(void *grad_input, const void *grad, const void *rois, const roi_align_geom *g, gm_dtype dt,
                       int nthreads) {
    const int st = check_rois(rois, g, dt);
    if (st != GM_OK) return st;
    const int64_t plane = g->H * g->W, bins = g->PH * g->PW;
    const int nt = nn_threads(g->N * g->C * plane + g->K * g->C * bins * 4, nthreads);
    (void)nt;
    NN_DISPATCH(dt, _Pragma("omp parallel for schedule(static) num_threads(nt)")
    for (int64_t c = 0; c < g->C; c++) {
        for (int64_t n = 0; n < g->N; n++)
            for (int64_t i = 0; i < plane; i++) nn_st(grad_input, (n * g->C + c) * plane + i, DT, 0.0);
        for (int64_t k = 0; k < g->K; k++) {
            const roi_box r = box_at(rois, k, g, DT);
            const int64_t base = (r.n * g->C + c) * plane, gb = (k * g->C + c) * bins;
            for (int64_t ph = 0; ph < g->PH; ph++)
                for (int64_t pw = 0; pw < g->PW; pw++) {
                    const double share = nn_ld(grad, gb + ph * g->PW + pw, DT) / r.count;
                    for (int64_t iy = 0; iy < r.grid_h; iy++)
                        for (int64_t ix = 0; ix < r.grid_w; ix++) {
                            const roi_taps t = roi_sample(&r, ph, pw, iy, ix, g->H, g->W);
                            for (int q = 0; t.ok && q < 4; q++) {
                                const int64_t at = base + t.at[q];
                                nn_st(grad_input, at, DT, nn_ld(grad_input, at, DT) + share * t.w[q]);
                            }
                        }
                }
        }
    })
    return GM_OK;
}
