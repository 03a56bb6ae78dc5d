/* kernels/cpu/softmax.h — softmax and log_softmax along one dim, forward and backward, on the CPU.
 *
 * Layout: contiguous (outer, D, inner): the dim being normalized has size D and stride inner. Numerically
 * stable (the maximum is subtracted before exp); sums in double. Backward reads only the forward's output:
 *   softmax:     dinp = y * (dout - sum_d(dout * y))
 *   log_softmax: dinp = dout - exp(y) * sum_d(dout)
 * so the input need not be kept. */
#ifndef GM_KERNELS_CPU_SOFTMAX_H
#define GM_KERNELS_CPU_SOFTMAX_H

#include "../common.h"

/* out (outer, D, inner) = softmax (or log_softmax when log) of inp along D. out may be inp. */
int softmax_forward(void *out, const void *inp, int64_t outer, int64_t D, int64_t inner, gm_dtype dt, int log,
                    int nthreads);

/* dinp (outer, D, inner) from dout and the forward's output out (see above). dinp may be dout. */
int softmax_backward(void *dinp, const void *dout, const void *out, int64_t outer, int64_t D, int64_t inner,
                     gm_dtype dt, int log, int nthreads);

#endif
