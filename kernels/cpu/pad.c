/* kernels/cpu/pad.c — F.pad's kernels (pad.h): the forward copies each output element from its source (or
 * writes the fill), the backward gathers for each input element the output gradients that read it; both are
 * parallel over elements with no write conflicts, so neither needs atomics or a zeroed buffer. */
#include "pad.h"

#include <string.h>

#include "nn_dtype.h"

static int pad_geom_ok(const pad_geom *g) {
    if (g->planes < 0 || g->mode < PAD_CONSTANT || g->mode > PAD_CIRCULAR) return 0;
    for (int k = 0; k < 3; k++)
        if (g->in[k] < 0 || g->out[k] < 0 || (g->mode != PAD_CONSTANT && g->in[k] < 1)) return 0;
    return 1;
}

int pad_forward(void *out, const void *inp, const void *fill, const pad_geom *g, gm_dtype dt, int nthreads) {
    if (!pad_geom_ok(g) || (g->mode == PAD_CONSTANT && !fill)) return GM_ERR_ARG;
    const size_t es = gm_dtype_size(dt);
    const int64_t OD = g->out[0], OH = g->out[1], OW = g->out[2], D = g->in[0], H = g->in[1], W = g->in[2];
    const int64_t total = g->planes * OD * OH, nt = nn_threads(total * OW, nthreads);
    (void)nt;
    /* one output row (p, od, oh) per iteration: the row's source row is found once */
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t r = 0; r < total; r++) {
        const int64_t oh = r % OH, od = (r / OH) % OD, p = r / (OH * OD);
        const int64_t sd = pad_src(g->mode, od, D, g->before[0]), sh = pad_src(g->mode, oh, H, g->before[1]);
        char *dst = (char *)out + (size_t)(r * OW) * es;
        const char *row = sd < 0 || sh < 0 ? NULL : (const char *)inp + (size_t)(((p * D + sd) * H + sh) * W) * es;
        for (int64_t ow = 0; ow < OW; ow++) {
            const int64_t sw = row ? pad_src(g->mode, ow, W, g->before[2]) : -1;
            memcpy(dst + (size_t)ow * es, sw < 0 ? fill : row + (size_t)sw * es, es);
        }
    }
    return GM_OK;
}

int pad_backward(void *dinp, const void *dout, const pad_geom *g, gm_dtype dt, int nthreads) {
    if (!pad_geom_ok(g) || !gm_dtype_is_float(dt)) return GM_ERR_ARG;
    const int64_t OD = g->out[0], OH = g->out[1], OW = g->out[2], D = g->in[0], H = g->in[1], W = g->in[2];
    const int64_t total = g->planes * D * H * W, nt = nn_threads(total, nthreads);
    (void)nt;
    NN_DISPATCH(dt, _Pragma("omp parallel for schedule(static) num_threads(nt)")
    for (int64_t i = 0; i < total; i++) {
        const int64_t w = i % W, h = (i / W) % H, d = (i / (W * H)) % D, p = i / (W * H * D);
        int64_t dlo[3], dhi[3], hlo[3], hhi[3], wlo[3], whi[3];
        const int nd = pad_readers(g->mode, d, D, g->before[0], OD, dlo, dhi);
        const int nh = pad_readers(g->mode, h, H, g->before[1], OH, hlo, hhi);
        const int nw = pad_readers(g->mode, w, W, g->before[2], OW, wlo, whi);
        double s = 0.0;
        for (int a = 0; a < nd; a++)
            for (int64_t od = dlo[a]; od < dhi[a]; od++)
                for (int b = 0; b < nh; b++)
                    for (int64_t oh = hlo[b]; oh < hhi[b]; oh++) {
                        const int64_t row = ((p * OD + od) * OH + oh) * OW;
                        for (int c = 0; c < nw; c++)
                            for (int64_t ow = wlo[c]; ow < whi[c]; ow++) s += nn_ld(dout, row + ow, DT);
                    }
        nn_st(dinp, i, DT, s);
    })
    return GM_OK;
}
