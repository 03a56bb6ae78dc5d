/* kernels/cuda/conv_plan.h — convolution through cuDNN's graph (backend) API, with an execution plan built once per
 * geometry and kept (conv_plan.cu). For conv.cu only, which offers these plans as candidates and falls back to
 * cuDNN's legacy API where they do not apply. */
#ifndef GM_KERNELS_CUDA_CONV_PLAN_H
#define GM_KERNELS_CUDA_CONV_PLAN_H

#include "conv.h"

/* Candidates with algo >= CONV_PLAN_BASE are the plans of conv_plan.cu (index algo - CONV_PLAN_BASE in the list
 * of their geometry); below it, the legacy API's algorithms. */
#define CONV_PLAN_BASE 0x10000

/* The plans for `pass` over g, appended to algos[*n..max) in the order to try: the engine heuristics' order
 * (mode A), deterministic ones first; for float32 no tensor-core (TF32) engine unless ctx->cudnn_allow_tf32, for
 * float64 none, and for no dtype one that reduces in lower precision than float32. Built on the first call and
 * kept for the process (their workspace sizes with them). GM_OK with none added when the graph API offers no plan
 * (the caller then asks the legacy API); GM_ERR_BACKEND on a cuDNN failure other than "not supported". */
int conv_plan_candidates(const conv_geom *g, gm_dtype dt, conv_pass pass, cuda_conv_algo *algos, int max, int *n,
                         gm_cuda_ctx *ctx);

/* Run plan candidate `algo` with beta = 0: x/y/w in cuDNN's roles (x the convolution's input, y its output, w the
 * filter), whichever the pass writes. 1 (nothing run) when a pointer is not 16-byte aligned, which the plans
 * assume: the caller then takes a legacy algorithm. */
int conv_plan_run(const conv_geom *g, gm_dtype dt, conv_pass pass, const cuda_conv_algo *algo, void *x, void *y,
                  void *w, void *ws, gm_cuda_ctx *ctx);

#endif
