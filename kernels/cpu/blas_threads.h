/* kernels/cpu/blas_threads.h — OpenBLAS at one thread while an OpenMP region of ours calls it from each of its
 * threads (the convolutions' tiles, a batch of small products): our threads and OpenBLAS's own would otherwise
 * share the cores. Regions may nest or overlap: the last one out restores the count. No-ops for nt <= 1.
 *
 * Tried and left: a linear layer's products split the same way, a block of the output per OpenMP thread. It took
 * a 2-layer Transformer encoder step from 45 to 42 ms but GRU and LSTM steps from 21 / 27 to 28 / 32 ms (2 cores,
 * interleaved runs): their big input projections then ran on our (sleeping) OpenMP threads right after the step
 * products had left OpenBLAS's threads spinning. */
#ifndef GM_KERNELS_CPU_BLAS_THREADS_H
#define GM_KERNELS_CPU_BLAS_THREADS_H

void blas_single_begin(int nt);
void blas_single_end(int nt);

#endif
