/* csrc/meta_target.h — what a run on the meta device stands for: the CPU (the default) or CUDA.
 *
 * The allocator's policy is the same for every device, but a few ops allocate differently on CUDA: the kernels'
 * cross-block scratch (batch norm, the losses: kernels/cuda/scratch_sizes.h) and the convolution workspace
 * (cuDNN's instead of the CPU's im2col columns). With the target "cuda", ops on meta allocate what they would on
 * CUDA, so that gm.memory.estimate(device="cuda") sees the CUDA step's bytes.
 *
 * The convolution workspace is cuDNN's choice: the first of its candidates whose workspace the allocator can give
 * (csrc/ops_conv_workspace.c). With the target "cuda:N" (device N is in this process: a CUDA build with a
 * device, the emulator's included) meta asks device N's cuDNN for the same candidates and applies the same rule
 * to its own allocator, so the estimate takes the workspace the real step will take, byte for byte. With the
 * target "cuda" (no device to ask: a CPU-only build, or estimating for CUDA from a machine without one) a
 * convolution is modelled with no workspace at all, and ops_conv_workspace.c counts the passes so left out
 * (_conv_workspace_uncounted) for the estimate to say so.
 *
 * The target is per thread (an estimate on one thread must not change what meta means on another) and is set
 * and restored around a run by python/gpumemnet/memory/estimator.py through _C._set_meta_target. */
#ifndef GM_META_TARGET_H
#define GM_META_TARGET_H

#include "gm.h"

/* 1 when dev is meta and this thread's meta target is CUDA. */
int gm_meta_as_cuda(gm_device dev);
/* The multiprocessor count of the CUDA target (0: unknown, the kernels' default is assumed). */
int gm_meta_sm_count(void);
/* The CUDA device whose cuDNN this thread's meta run asks for convolution algorithms (target "cuda:N"), or -1
 * (target "cpu" or "cuda": none to ask). */
int gm_meta_cudnn_device(void);

/* _set_meta_target(target, sm_count=0) -> the previous (target, sm_count), target 'cpu', 'cuda' or 'cuda:N' (ValueError
 * when this process has no CUDA device N); _get_meta_target() -> (target, sm_count).
 * Registered in ops_nnops.c's method table. */
PyObject *gm_py_set_meta_target(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *gm_py_get_meta_target(PyObject *self, PyObject *unused);

#endif
