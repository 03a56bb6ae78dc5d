"""What the CUDA emulator computes: atomics (in three block/thread orders) and the half/bfloat16 conversions,
which must round to nearest even exactly as NumPy does. Needs only a C++17 compiler; no GPU, no gpumemnet
build."""
import numpy as np
import pytest

from emu_util import SCHEDULES, requires_cxx, run

pytestmark = requires_cxx


# ---- atomics -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("schedule", SCHEDULES)
def test_atomics(build, schedule):
    exe = build(r"""
#include <limits.h>
struct Acc {
    int i_add, i_max, i_min, i_or, i_and, cas_sum, shared_count[4];
    unsigned u_add, u_max, u_min, u_or, u_and, u_xor;
    unsigned long long ull_add, ull_max, ull_min;
    long long ll_max, ll_min;
    float f_add;
    double d_add;
    int exch;
};
__global__ void hammer(Acc *a, int *tickets, int *exch_old) {
    const int g = blockIdx.x * blockDim.x + threadIdx.x;
    tickets[atomicAdd(&a->i_add, 1)] += 1; /* each old value exactly once */
    atomicAdd(&a->u_add, 2u);
    atomicAdd(&a->ull_add, 1ull << 33);
    atomicAdd(&a->f_add, 0.5f);
    atomicAdd(&a->d_add, 0.25);
    atomicMax(&a->i_max, g - 500);
    atomicMin(&a->i_min, g - 500);
    atomicMax(&a->u_max, (unsigned)g * 3u);
    atomicMin(&a->u_min, (unsigned)g + 7u);
    atomicMax(&a->ll_max, (1ll << 40) * (g - 512));
    atomicMin(&a->ll_min, (1ll << 40) * (g - 512));
    atomicMax(&a->ull_max, (1ull << 50) + g);
    atomicMin(&a->ull_min, (1ull << 50) + g);
    atomicOr(&a->i_or, 1 << (g % 31));
    atomicAnd(&a->i_and, ~(1 << (g % 31)));
    atomicOr(&a->u_or, 1u << (g % 32));
    atomicAnd(&a->u_and, ~(1u << (g % 32)));
    atomicXor(&a->u_xor, 1u << (g % 32));
    int old = a->cas_sum, seen;
    while ((seen = atomicCAS(&a->cas_sum, old, old + g)) != old) old = seen; /* the classic CAS loop */
    exch_old[g] = atomicExch(&a->exch, g + 1);
    __shared__ int count;
    if (threadIdx.x == 0) count = 0;
    __syncthreads();
    atomicAdd(&count, 1);
    __syncthreads();
    if (threadIdx.x == 0) a->shared_count[blockIdx.x] = count;
}
__global__ void edge_cases(int *out) {
    int x = INT_MAX;
    out[0] = atomicAdd(&x, 1) == INT_MAX && x == INT_MIN; /* wraps like the hardware */
    unsigned u = 5;
    out[1] = atomicCAS(&u, 4u, 9u) == 5u && u == 5u; /* no match: unchanged */
    out[2] = atomicCAS(&u, 5u, 9u) == 5u && u == 9u;
    unsigned inc = 3;
    atomicInc(&inc, 3u);
    out[3] = inc == 0; /* wraps to 0 past val */
    unsigned dec = 0;
    atomicDec(&dec, 7u);
    out[4] = dec == 7; /* 0 wraps to val */
    float f = 1.0f;
    out[5] = atomicExch(&f, 2.5f) == 1.0f && f == 2.5f;
    int s = 10;
    out[6] = atomicSub(&s, 3) == 10 && s == 7;
}
int main() {
    const int nb = 4, nt = 256, n = nb * nt;
    Acc init;
    memset(&init, 0, sizeof init);
    init.i_max = INT_MIN; init.i_min = INT_MAX; init.i_and = -1;
    init.u_min = ~0u; init.u_and = ~0u;
    init.ll_max = LLONG_MIN; init.ll_min = LLONG_MAX; init.ull_min = ~0ull;
    Acc *a;
    int *tickets, *exch_old;
    CU(cudaMalloc(&a, sizeof(Acc)));
    CU(cudaMalloc(&tickets, n * 4));
    CU(cudaMalloc(&exch_old, n * 4));
    CU(cudaMemcpy(a, &init, sizeof init, cudaMemcpyHostToDevice));
    CU(cudaMemset(tickets, 0, n * 4));
    gm_emu_launch(hammer, dim3(nb), dim3(nt), a, tickets, exch_old);
    CU(cudaGetLastError());
    Acc r;
    std::vector<int> t(n), eo(n);
    CU(cudaMemcpy(&r, a, sizeof r, cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(t.data(), tickets, n * 4, cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(eo.data(), exch_old, n * 4, cudaMemcpyDeviceToHost));
    CHECK(r.i_add == n);
    for (int i = 0; i < n; i++) CHECK(t[i] == 1);
    CHECK(r.u_add == 2u * n && r.ull_add == (unsigned long long)n << 33);
    CHECK(r.f_add == 0.5f * n && r.d_add == 0.25 * n);
    CHECK(r.i_max == n - 1 - 500 && r.i_min == -500);
    CHECK(r.u_max == 3u * (n - 1) && r.u_min == 7u);
    CHECK(r.ll_max == (1ll << 40) * (n - 1 - 512) && r.ll_min == (1ll << 40) * -512);
    CHECK(r.ull_max == (1ull << 50) + n - 1 && r.ull_min == 1ull << 50);
    CHECK(r.i_or == 0x7fffffff && r.i_and == (int)0x80000000);
    CHECK(r.u_or == ~0u && r.u_and == 0u && r.u_xor == 0u); /* every bit flipped n/32 (even) times */
    CHECK(r.cas_sum == n * (n - 1) / 2);
    /* atomicExch: the old values and the final one are each value written (and the initial 0) once */
    std::vector<int> seen(n + 1, 0);
    for (int i = 0; i < n; i++) seen[eo[i]]++;
    seen[r.exch]++;
    for (int v = 0; v <= n; v++) CHECK(seen[v] == 1);
    for (int b = 0; b < nb; b++) CHECK(r.shared_count[b] == nt);
    int *o, h[7];
    CU(cudaMalloc(&o, sizeof h));
    gm_emu_launch(edge_cases, dim3(1), dim3(1), o);
    CU(cudaGetLastError());
    CU(cudaMemcpy(h, o, sizeof h, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 7; i++) CHECK(h[i] == 1);
    printf("OK\n");
}
""")
    run(exe, env={"GPUMEMNET_EMU_SCHEDULE": schedule})


# ---- 16-bit floats -----------------------------------------------------------------------------------------------
def test_half_and_bfloat16_round_to_nearest_even_like_numpy(build, tmp_path):
    exe = build(r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
/* in: float32s; out: their half bits, their bf16 bits, then every half and every bf16 pattern as float32,
 * all converted inside a kernel, as philox.cu does */
__global__ void convert(const float *in, int n, uint16_t *h, uint16_t *b, float *hf, float *bf) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        h[i] = __half_as_ushort(__float2half_rn(in[i]));
        b[i] = __bfloat16_as_ushort(__float2bfloat16_rn(in[i]));
    }
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < 65536; i += gridDim.x * blockDim.x) {
        hf[i] = __half2float(__ushort_as_half((unsigned short)i));
        bf[i] = __bfloat162float(__ushort_as_bfloat16((unsigned short)i));
    }
}
int main(int argc, char **argv) {
    FILE *f = fopen(argv[1], "rb");
    CHECK(f);
    std::vector<float> x(1 << 22);
    int n = (int)fread(x.data(), 4, x.size(), f);
    fclose(f);
    float *din, *dhf, *dbf;
    uint16_t *dh, *db;
    CU(cudaMalloc(&din, n * 4));
    CU(cudaMalloc(&dh, n * 2));
    CU(cudaMalloc(&db, n * 2));
    CU(cudaMalloc(&dhf, 65536 * 4));
    CU(cudaMalloc(&dbf, 65536 * 4));
    CU(cudaMemcpy(din, x.data(), n * 4, cudaMemcpyHostToDevice));
    gm_emu_launch(convert, dim3(4), dim3(256), din, n, dh, db, dhf, dbf);
    CU(cudaGetLastError());
    std::vector<uint16_t> h(n), b(n);
    std::vector<float> hf(65536), bf(65536);
    CU(cudaMemcpy(h.data(), dh, n * 2, cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(b.data(), db, n * 2, cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(hf.data(), dhf, 65536 * 4, cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(bf.data(), dbf, 65536 * 4, cudaMemcpyDeviceToHost));
    /* the same functions as the CPU kernels (kernels/common.h) */
    for (int i = 0; i < n; i++) CHECK(h[i] == gm_float_to_half(x[i]) && b[i] == gm_float_to_bf16(x[i]));
    f = fopen(argv[2], "wb");
    CHECK(f);
    fwrite(h.data(), 2, n, f);
    fwrite(b.data(), 2, n, f);
    fwrite(hf.data(), 4, 65536, f);
    fwrite(bf.data(), 4, 65536, f);
    fclose(f);
    printf("OK\n");
}
""")
    rng = np.random.default_rng(0)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 65504.0, 65519.99, 65520.0, 70000.0,
                        6.0e-8, 5.96e-8, 2.98e-8, 2.9802322e-8, 1e-10, 6.1035156e-05, 1.0009765625, 1.00048828125,
                        1.000732421875, 3.0e38, -3.4028235e38, 1.00390625, 1.005859375], dtype=np.float32)
    x = np.concatenate([
        special,
        rng.integers(0, 2**32, 200000, dtype=np.uint64).astype(np.uint32).view(np.float32),  # every kind of bits
        rng.uniform(-70000, 70000, 100000).astype(np.float32),
        rng.uniform(-1e-4, 1e-4, 100000).astype(np.float32),  # half subnormals
        # exact halfway cases between neighbouring halves: ties go to even
        ((np.arange(0, 30000, dtype=np.float32).astype(np.float16).astype(np.float32)
          + np.arange(1, 30001, dtype=np.float32).astype(np.float16).astype(np.float32)) / 2),
    ]).astype(np.float32)
    fin, fout = tmp_path / "in.bin", tmp_path / "out.bin"
    x.tofile(fin)
    run(exe, fin, fout)
    raw = fout.read_bytes()
    n = len(x)
    h = np.frombuffer(raw, np.uint16, n, 0)
    b = np.frombuffer(raw, np.uint16, n, 2 * n)
    hf = np.frombuffer(raw, np.float32, 65536, 4 * n)
    bf = np.frombuffer(raw, np.float32, 65536, 4 * n + 4 * 65536)

    nan = np.isnan(x)
    with np.errstate(over="ignore"):
        want_h = x.astype(np.float16).view(np.uint16)
    np.testing.assert_array_equal(h[~nan], want_h[~nan])
    assert np.isnan(h.view(np.float16)[nan]).all()
    # bfloat16 = the top 16 bits of the float32, rounded to nearest even on the 16 bits dropped (sign-magnitude,
    # so the same rule on either sign; a carry out of the mantissa correctly reaches the exponent or infinity)
    bits = x[~nan].view(np.uint32)
    low, top = bits & 0xFFFF, bits >> 16
    round_up = (low > 0x8000) | ((low == 0x8000) & (top & 1 == 1))
    want_b = (top + round_up).astype(np.uint16)
    np.testing.assert_array_equal(b[~nan], want_b)
    assert (b[nan] & 0x7F80 == 0x7F80).all() and (b[nan] & 0x7F).all()

    every = np.arange(65536, dtype=np.uint16)
    want_hf = every.view(np.float16).astype(np.float32)
    ok = np.isnan(want_hf)
    np.testing.assert_array_equal(hf.view(np.uint32)[~ok], want_hf.view(np.uint32)[~ok])
    assert np.isnan(hf[ok]).all()
    np.testing.assert_array_equal(bf.view(np.uint32), every.astype(np.uint32) << 16)
