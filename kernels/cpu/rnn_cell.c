/* kernels/cpu/rnn_cell.c — the fused LSTM and GRU cells (see rnn_cell.h). Rows of the batch go to threads; each row
 * is one `omp simd` loop over the hidden units, so that the float32 sigmoids and tanhs run on libmvec's vector
 * functions (vec_math.h). The units past a row's last full vector may take the scalar functions, an ulp away: which
 * ones depends on H alone, not on the thread count, so a run repeats bit for bit. */
#include "rnn_cell.h"
#include "nn_dtype.h"
#include "vec_math.h"

NN_INLINE double rnn_sigmoid(double v, int dt) { return 1.0 / (1.0 + nn_exp(-v, dt)); }

/* The (N, 4H) element of row r, gate k, unit j; and of the (N, 3H) and (N, H) layouts. */
#define AT4(r, k, j) ((r) * 4 * H + (k) * H + (j))
#define AT3(r, k, j) ((r) * 3 * H + (k) * H + (j))
#define AT1(r, j) ((r) * H + (j))

/* Run BODY for every unit j of every row r of the batch, over threads by rows (DT: the dtype, as NN_DISPATCH). */
#define ROWS_LOOP(work, ...)                                                                                 \
    do {                                                                                                     \
        const int nt = nn_threads(work, nthreads);                                                           \
        (void)nt;                                                                                            \
        NN_DISPATCH(dt, _Pragma("omp parallel for schedule(static) num_threads(nt)")                         \
                    for (int64_t r = 0; r < N; r++) {                                                        \
                        _Pragma("omp simd") for (int64_t j = 0; j < H; j++) { __VA_ARGS__ }                       \
                    })                                                                                       \
    } while (0)

GM_VEC_CLONES int lstm_cell_forward(void *h, void *c_new, void *act, const void *gi, const void *gh, const void *c,
                                    int64_t N, int64_t H, gm_dtype dt, int nthreads) {
    if (!gm_dtype_is_float(dt) || N < 0 || H < 0) return GM_ERR_ARG;
    ROWS_LOOP(N * 4 * H, {
        double a[4];
        for (int k = 0; k < 4; k++) {
            const double v = nn_ld(gi, AT4(r, k, j), DT) + nn_ld(gh, AT4(r, k, j), DT);
            a[k] = k == 2 ? nn_tanh(v, DT) : rnn_sigmoid(v, DT);
            nn_st(act, AT4(r, k, j), DT, a[k]);
        }
        const double cn = a[1] * nn_ld(c, AT1(r, j), DT) + a[0] * a[2];
        nn_st(c_new, AT1(r, j), DT, cn);
        nn_st(h, AT1(r, j), DT, a[3] * nn_tanh(cn, DT));
    });
    return GM_OK;
}

GM_VEC_CLONES int lstm_cell_backward(void *d_gates, void *dc_prev, const void *dh, const void *dc, const void *act,
                                     const void *c, const void *c_new, int64_t N, int64_t H, gm_dtype dt,
                                     int nthreads) {
    if (!gm_dtype_is_float(dt) || N < 0 || H < 0) return GM_ERR_ARG;
    ROWS_LOOP(N * 4 * H, {
        const rnn_lstm_grad d = rnn_lstm_grads(
            nn_ld(dh, AT1(r, j), DT), nn_ld(dc, AT1(r, j), DT), nn_ld(act, AT4(r, 0, j), DT),
            nn_ld(act, AT4(r, 1, j), DT), nn_ld(act, AT4(r, 2, j), DT), nn_ld(act, AT4(r, 3, j), DT),
            nn_ld(c, AT1(r, j), DT), nn_tanh(nn_ld(c_new, AT1(r, j), DT), DT));
        nn_st(d_gates, AT4(r, 0, j), DT, d.i);
        nn_st(d_gates, AT4(r, 1, j), DT, d.f);
        nn_st(d_gates, AT4(r, 2, j), DT, d.g);
        nn_st(d_gates, AT4(r, 3, j), DT, d.o);
        nn_st(dc_prev, AT1(r, j), DT, d.c_prev);
    });
    return GM_OK;
}

GM_VEC_CLONES int gru_cell_forward(void *h_new, void *ws, const void *gi, const void *gh, const void *h, int64_t N,
                                   int64_t H, gm_dtype dt, int nthreads) {
    if (!gm_dtype_is_float(dt) || N < 0 || H < 0) return GM_ERR_ARG;
    ROWS_LOOP(N * 3 * H, {
        const double rg = rnn_sigmoid(nn_ld(gi, AT3(r, 0, j), DT) + nn_ld(gh, AT3(r, 0, j), DT), DT);
        const double z = rnn_sigmoid(nn_ld(gi, AT3(r, 1, j), DT) + nn_ld(gh, AT3(r, 1, j), DT), DT);
        const double n_h = nn_ld(gh, AT3(r, 2, j), DT);
        const double n = nn_tanh(nn_ld(gi, AT3(r, 2, j), DT) + rg * n_h, DT);
        nn_st(ws, AT4(r, 0, j), DT, rg);
        nn_st(ws, AT4(r, 1, j), DT, z);
        nn_st(ws, AT4(r, 2, j), DT, n);
        nn_st(ws, AT4(r, 3, j), DT, n_h);
        nn_st(h_new, AT1(r, j), DT, n + z * (nn_ld(h, AT1(r, j), DT) - n));
    });
    return GM_OK;
}

GM_VEC_CLONES int gru_cell_backward(void *d_gi, void *d_gh, void *dh_prev, const void *dh, const void *ws,
                                    const void *h, int64_t N, int64_t H, gm_dtype dt, int nthreads) {
    if (!gm_dtype_is_float(dt) || N < 0 || H < 0) return GM_ERR_ARG;
    ROWS_LOOP(N * 3 * H, {
        const double rg = nn_ld(ws, AT4(r, 0, j), DT);
        const rnn_gru_grad d = rnn_gru_grads(nn_ld(dh, AT1(r, j), DT), rg, nn_ld(ws, AT4(r, 1, j), DT),
                                             nn_ld(ws, AT4(r, 2, j), DT), nn_ld(ws, AT4(r, 3, j), DT),
                                             nn_ld(h, AT1(r, j), DT));
        nn_st(d_gi, AT3(r, 0, j), DT, d.r);
        nn_st(d_gi, AT3(r, 1, j), DT, d.z);
        nn_st(d_gi, AT3(r, 2, j), DT, d.n);
        nn_st(d_gh, AT3(r, 0, j), DT, d.r);
        nn_st(d_gh, AT3(r, 1, j), DT, d.z);
        nn_st(d_gh, AT3(r, 2, j), DT, d.n * rg);
        nn_st(dh_prev, AT1(r, j), DT, d.h_prev);
    });
    return GM_OK;
}
