/* kernels/roi_align.h — torchvision's roi_align (the box pooling of Faster / Mask / Keypoint R-CNN), shared by
 * kernels/cpu/roi_align.c and kernels/cuda/roi_align.cu: a box's geometry and one bilinear sample, as
 * torchvision's C++ and CUDA kernels compute them, so that both backends and torchvision agree.
 *
 * rois (K, 5): batch index, x1, y1, x2, y2 in input-image coordinates, scaled by spatial_scale onto the (H, W)
 * feature map; with `aligned` the box is shifted by half a pixel (pixel centres at +0.5), without it a box is
 * widened to at least 1x1 (torchvision's legacy behaviour). Each of the PH x PW bins averages grid_h x grid_w
 * bilinear samples (sampling_ratio of them per side, or ceil(bin size) when sampling_ratio <= 0). A sample more
 * than one pixel outside the map counts as 0; one within a pixel of the border reads the border. */
#ifndef GM_KERNELS_ROI_ALIGN_H
#define GM_KERNELS_ROI_ALIGN_H

#include <math.h>

#include "common.h"

typedef struct {
    int64_t N, C, H, W; /* the input (N, C, H, W) */
    int64_t K, PH, PW;  /* the boxes and the output bins: output (K, C, PH, PW) */
    double scale;       /* spatial_scale */
    int64_t sampling_ratio;
    int aligned;
} roi_align_geom;

/* One box on the feature map: its corner, bin size, samples per bin side and the divisor of the bin's mean. */
typedef struct {
    int64_t n;                /* the batch index */
    double y0, x0, bin_h, bin_w;
    int64_t grid_h, grid_w;
    double count;
} roi_box;

GM_HD static inline roi_box roi_box_of(const roi_align_geom *g, double b, double x1, double y1, double x2, double y2) {
    roi_box r;
    const double offset = g->aligned ? 0.5 : 0.0;
    r.n = (int64_t)b;
    r.x0 = x1 * g->scale - offset;
    r.y0 = y1 * g->scale - offset;
    double w = x2 * g->scale - offset - r.x0, h = y2 * g->scale - offset - r.y0;
    if (!g->aligned) {
        w = w > 1.0 ? w : 1.0;
        h = h > 1.0 ? h : 1.0;
    }
    r.bin_h = h / (double)g->PH;
    r.bin_w = w / (double)g->PW;
    r.grid_h = g->sampling_ratio > 0 ? g->sampling_ratio : (int64_t)ceil(h / (double)g->PH);
    r.grid_w = g->sampling_ratio > 0 ? g->sampling_ratio : (int64_t)ceil(w / (double)g->PW);
    const int64_t c = r.grid_h * r.grid_w;
    r.count = c > 1 ? (double)c : 1.0;
    return r;
}

/* The four taps of the bilinear sample at (y, x) of an H x W plane: offsets into the plane and their weights;
 * none (ok = 0, weights 0) where the sample is outside [-1, H] x [-1, W]. */
typedef struct {
    int64_t at[4];
    double w[4];
    int ok;
} roi_taps;

GM_HD static inline roi_taps roi_taps_at(double y, double x, int64_t H, int64_t W) {
    roi_taps t = {{0, 0, 0, 0}, {0.0, 0.0, 0.0, 0.0}, 0};
    if (y < -1.0 || y > (double)H || x < -1.0 || x > (double)W) return t;
    t.ok = 1;
    y = y > 0.0 ? y : 0.0;
    x = x > 0.0 ? x : 0.0;
    int64_t yl = (int64_t)y, xl = (int64_t)x, yh, xh;
    if (yl >= H - 1) {
        yh = yl = H - 1;
        y = (double)yl;
    } else {
        yh = yl + 1;
    }
    if (xl >= W - 1) {
        xh = xl = W - 1;
        x = (double)xl;
    } else {
        xh = xl + 1;
    }
    const double ly = y - (double)yl, lx = x - (double)xl, hy = 1.0 - ly, hx = 1.0 - lx;
    t.at[0] = yl * W + xl, t.at[1] = yl * W + xh, t.at[2] = yh * W + xl, t.at[3] = yh * W + xh;
    t.w[0] = hy * hx, t.w[1] = hy * lx, t.w[2] = ly * hx, t.w[3] = ly * lx;
    return t;
}

/* Sample (iy, ix) of bin (ph, pw) of box r: its taps. */
GM_HD static inline roi_taps roi_sample(const roi_box *r, int64_t ph, int64_t pw, int64_t iy, int64_t ix, int64_t H,
                                        int64_t W) {
    const double y = r->y0 + (double)ph * r->bin_h + ((double)iy + 0.5) * r->bin_h / (double)r->grid_h;
    const double x = r->x0 + (double)pw * r->bin_w + ((double)ix + 0.5) * r->bin_w / (double)r->grid_w;
    return roi_taps_at(y, x, H, W);
}

#endif
