/* kernels/cpu/blas_threads.c — see blas_threads.h. The count is saved and restored under one named critical
 * section, so that regions on several threads (nested, or from several Python threads) agree on it. */
#include "blas_threads.h"

#include <cblas.h>

static int blas_users, blas_saved;

void blas_single_begin(int nt) {
    if (nt <= 1) return;
#pragma omp critical(gm_blas_threads)
    {
        if (blas_users++ == 0) {
            blas_saved = scipy_openblas_get_num_threads();
            if (blas_saved != 1) scipy_openblas_set_num_threads(1);
        }
    }
}

void blas_single_end(int nt) {
    if (nt <= 1) return;
#pragma omp critical(gm_blas_threads)
    {
        if (--blas_users == 0 && blas_saved != 1) scipy_openblas_set_num_threads(blas_saved);
    }
}
