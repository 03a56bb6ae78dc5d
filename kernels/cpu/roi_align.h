/* kernels/cpu/roi_align.h — torchvision's roi_align on the CPU, forward and backward (the geometry and the
 * samples: kernels/roi_align.h). Contiguous arrays of float32 or float64 (dt); arithmetic in double.
 * GM_ERR_ARG for a box with a coordinate that is not finite or a batch index outside [0, N). */
#ifndef GM_KERNELS_CPU_ROI_ALIGN_H
#define GM_KERNELS_CPU_ROI_ALIGN_H

#include "../roi_align.h"

/* out (K, C, PH, PW) = each bin's mean of its bilinear samples of input (N, C, H, W), for the boxes rois (K, 5). */
int roi_align_forward(void *out, const void *input, const void *rois, const roi_align_geom *g, gm_dtype dt,
                      int nthreads);

/* grad_input (N, C, H, W) = the samples' weights times grad (K, C, PH, PW) / count, summed per input element
 * (written whole: zeros where no sample reads). Threads split the channels, so the sums' order is fixed. */
int roi_align_backward(void *grad_input, const void *grad, const void *rois, const roi_align_geom *g, gm_dtype dt,
                       int nthreads);

#endif
