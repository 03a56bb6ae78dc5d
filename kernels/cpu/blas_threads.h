/* kernels/cpu/blas_threads.h — OpenBLAS at one thread while an OpenMP region of ours calls it from each of its
 * threads (the convolutions' tiles, a linear layer's blocks, a batch of small products): our threads and
 * OpenBLAS's own would otherwise share the cores, and OpenBLAS's spin after each product beside the OpenMP threads
 * of the ops between them. Regions may nest or overlap: the last one out restores the count. No-ops for nt <= 1. */
#ifndef GM_KERNELS_CPU_BLAS_THREADS_H
#define GM_KERNELS_CPU_BLAS_THREADS_H

void blas_single_begin(int nt);
void blas_single_end(int nt);

#endif
