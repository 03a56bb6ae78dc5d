/* csrc/meta_target.h — what a run on the meta device stands for: the CPU (the default) or CUDA.
 *
 * The allocator's policy is the same for every device, but a few ops allocate differently on CUDA: the kernels'
 * cross-block scratch (batch norm, the losses: kernels/cuda/scratch_sizes.h) and the convolution workspace
 * (cuDNN's instead of the CPU's im2col columns). With the target "cuda", ops on meta allocate what they would on
 * CUDA, so that gm.memory.estimate(device="cuda") sees the CUDA step's bytes. cuDNN cannot be asked on meta: a
 * convolution is modelled with no workspace at all, which is what the emulator's stand-in takes and the one
 * freedom left between the estimate and a real GPU (cuDNN picks an algorithm whose workspace fits what the
 * allocator can still give, so its workspace can only use memory that is free at that moment).
 *
 * The target is per thread (an estimate on one thread must not change what meta means on another) and is set
 * and restored around a run by python/gpumemnet/_estimate.py through _C._set_meta_target. */
#ifndef GM_META_TARGET_H
#define GM_META_TARGET_H

#include "gm.h"

/* 1 when dev is meta and this thread's meta target is CUDA. */
int gm_meta_as_cuda(gm_device dev);
/* The multiprocessor count of the CUDA target (0: unknown, the kernels' default is assumed). */
int gm_meta_sm_count(void);

/* _set_meta_target(target, sm_count=0) -> the previous (target, sm_count); _get_meta_target() -> (target, sm_count).
 * Registered in ops_nnops.c's method table. */
PyObject *gm_py_set_meta_target(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *gm_py_get_meta_target(PyObject *self, PyObject *unused);

#endif
