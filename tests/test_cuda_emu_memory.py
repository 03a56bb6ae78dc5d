"""The CUDA emulator's memory, streams and devices (kernels/cuda/emu/emu_runtime.cpp): capacity and
cudaMemGetInfo, its size and poison byte from the environment, checked frees and copies, memset, streams and
events, symbol copies, and the current device kept per thread with state per device. Small .cu programs are
built against the emulator (conftest.py's `build`) and run. Needs only a C++17 compiler; no GPU, no gpumemnet
build."""
import pytest

from emu_util import requires_cxx, run

pytestmark = requires_cxx


# ---- memory ------------------------------------------------------------------------------------------------------
MEMORY_PROGRAM = r"""
int main(int argc, char **argv) {
    const char *mode = argv[1];
    int count = -1;
    if (!strcmp(mode, "bad-env")) {
        CHECK(cudaGetDeviceCount(&count) == cudaErrorInitializationError && count == 0);
        CHECK(strstr(gm_emu_last_message(), "GPUMEMNET_EMU_"));
        void *p;
        CHECK(cudaMalloc(&p, 4) == cudaErrorInitializationError);
        printf("OK\n");
        return 0;
    }
    if (!strcmp(mode, "no-device")) {
        CHECK(cudaGetDeviceCount(&count) == cudaErrorNoDevice && count == 0);
        void *p;
        CHECK(cudaMalloc(&p, 4) == cudaErrorNoDevice);
        CHECK(cudaSetDevice(0) == cudaErrorNoDevice);
        printf("OK\n");
        return 0;
    }
    size_t fr, total;
    CU(cudaMemGetInfo(&fr, &total));
    if (!strcmp(mode, "total")) {
        printf("total %zu\n", total);
        unsigned char *p;
        CU(cudaMalloc(&p, 1000));
        printf("poison %d\n", p[0] == p[999] ? p[0] : -1);
        printf("OK\n");
        return 0;
    }
    /* mode "limits": GPUMEMNET_EMU_MEMORY=1M */
    const size_t cap = 1 << 20;
    CHECK(fr == cap && total == cap);
    unsigned char *a, *b, *c;
    CU(cudaMalloc(&a, 600000));
    CHECK((uintptr_t)a % 512 == 0);
    for (int i = 0; i < 600000; i++) CHECK(a[i] == 0xCD); /* poisoned, so uninitialised reads show */
    CU(cudaMemGetInfo(&fr, &total));
    CHECK(fr == cap - 600000 && total == cap);
    b = (unsigned char *)0x1;
    CHECK(cudaMalloc(&b, 500000) == cudaErrorMemoryAllocation);
    CHECK(b == NULL);
    CHECK(strstr(gm_emu_last_message(), "600000 of its 1048576 bytes"));
    CHECK(cudaGetLastError() == cudaErrorMemoryAllocation);
    CU(cudaGetLastError()); /* not sticky: the allocator frees its cache and retries */
    CU(cudaMalloc(&b, cap - 600000)); /* exactly what is left */
    CU(cudaMemGetInfo(&fr, &total));
    CHECK(fr == 0);
    CHECK(cudaMalloc(&c, 1) == cudaErrorMemoryAllocation);
    CU(cudaFree(a));
    CU(cudaMalloc(&c, 1));
    CU(cudaFree(c));
    CHECK(cudaFree(a) == cudaErrorInvalidDevicePointer); /* double free */
    CHECK(cudaFree(b + 8) == cudaErrorInvalidDevicePointer); /* inside a block */
    CHECK(strstr(gm_emu_last_message(), "8 bytes into"));
    int local;
    CHECK(cudaFree(&local) == cudaErrorInvalidDevicePointer);
    CHECK(cudaGetLastError() == cudaErrorInvalidDevicePointer);
    CU(cudaGetLastError());
    CU(cudaFree(NULL));
    CU(cudaFree(b));
    CU(cudaMemGetInfo(&fr, &total));
    CHECK(fr == cap);
    void *z = (void *)0x1;
    CU(cudaMalloc(&z, 0));
    CHECK(z == NULL);
    /* pinned host memory does not count against the device */
    void *h;
    CU(cudaMallocHost(&h, 4 << 20));
    CU(cudaMemGetInfo(&fr, &total));
    CHECK(fr == cap);
    CU(cudaFreeHost(h));
    CHECK(cudaFreeHost(h) == cudaErrorInvalidValue);
    CU(cudaHostAlloc(&h, 64, cudaHostAllocDefault));
    CU(cudaFreeHost(h));
    /* capacity can change at run time (tests), properties follow */
    CU(gm_emu_set_device_memory(0, 4096));
    CU(cudaMemGetInfo(&fr, &total));
    CHECK(fr == 4096 && total == 4096);
    CHECK(cudaMalloc(&a, 4097) == cudaErrorMemoryAllocation);
    CHECK(gm_emu_set_device_memory(1, 4096) == cudaErrorInvalidDevice);
    cudaDeviceProp p;
    CU(cudaGetDeviceProperties(&p, 0));
    CHECK(!strcmp(p.name, "gpumemnet CUDA emulator") && p.totalGlobalMem == 4096);
    CHECK(p.major == 9 && p.minor == 0 && p.multiProcessorCount == 4 && p.warpSize == 32);
    int v;
    CU(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, 0));
    CHECK(v == 4);
    CU(cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMajor, 0));
    CHECK(v == 9);
    CHECK(cudaGetDeviceProperties(&p, 1) == cudaErrorInvalidDevice);
    CU(cudaDriverGetVersion(&v));
    CHECK(v == CUDART_VERSION);
    CU(cudaRuntimeGetVersion(&v));
    CHECK(v == CUDART_VERSION);
    printf("OK\n");
}
"""


@pytest.fixture(scope="session")
def memory_exe(build):
    return build(MEMORY_PROGRAM)


def test_memory_capacity_accounting_and_checked_frees(memory_exe):
    run(memory_exe, "limits", env={"GPUMEMNET_EMU_MEMORY": "1M"})


@pytest.mark.parametrize("value,total", [("1048576", 1 << 20), ("64K", 64 << 10), ("2GiB", 2 << 30),
                                         ("3g", 3 << 30), ("", 8 << 30)])
def test_memory_size_from_environment(memory_exe, value, total):
    out = run(memory_exe, "total", env={"GPUMEMNET_EMU_MEMORY": value})
    assert f"total {total}\n" in out
    assert "poison 205\n" in out  # 0xCD


def test_poison_byte_from_environment(memory_exe):
    assert "poison 0\n" in run(memory_exe, "total", env={"GPUMEMNET_EMU_POISON": "0"})
    assert "poison 255\n" in run(memory_exe, "total", env={"GPUMEMNET_EMU_POISON": "0xff"})


@pytest.mark.parametrize("env", [{"GPUMEMNET_EMU_MEMORY": "banana"}, {"GPUMEMNET_EMU_MEMORY": "12Q"},
                                 {"GPUMEMNET_EMU_DEVICES": "-1"}, {"GPUMEMNET_EMU_DEVICES": "two"},
                                 {"GPUMEMNET_EMU_POISON": "256"}, {"GPUMEMNET_EMU_SCHEDULE": "sideways"},
                                 {"GPUMEMNET_EMU_SCHEDULE": "random:x"}, {"GPUMEMNET_EMU_CHECK_POINTERS": "yes"}])
def test_malformed_environment_is_an_initialization_error(memory_exe, env):
    run(memory_exe, "bad-env", env=env)


def test_no_device(memory_exe):
    run(memory_exe, "no-device", env={"GPUMEMNET_EMU_DEVICES": "0"})


def test_memcpy_and_memset_kinds_and_checks(build):
    exe = build(r"""
int main() {
    const int n = 64;
    float host[n], back[n];
    for (int i = 0; i < n; i++) host[i] = i * 0.5f;
    float *d1, *d2, *pinned;
    CU(cudaMalloc(&d1, sizeof host));
    CU(cudaMalloc(&d2, sizeof host));
    CU(cudaMallocHost(&pinned, sizeof host));
    CU(cudaMemcpy(d1, host, sizeof host, cudaMemcpyHostToDevice));
    CU(cudaMemcpy(d2, d1, sizeof host, cudaMemcpyDeviceToDevice));
    CU(cudaMemcpy(pinned, d2, sizeof host, cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(back, pinned, sizeof host, cudaMemcpyHostToHost));
    CHECK(!memcmp(back, host, sizeof host));
    /* cudaMemcpyDefault infers the direction */
    memset(back, 0, sizeof back);
    CU(cudaMemset(d1, 0, sizeof host));
    CU(cudaMemcpy(d1, host, sizeof host, cudaMemcpyDefault));
    CU(cudaMemcpy(d2, d1, sizeof host, cudaMemcpyDefault));
    CU(cudaMemcpy(back, d2, sizeof host, cudaMemcpyDefault));
    CHECK(!memcmp(back, host, sizeof host));
    /* part of a block, at an offset */
    CU(cudaMemcpy(d1 + 10, host, 5 * sizeof(float), cudaMemcpyHostToDevice));
    CU(cudaMemcpy(back, d1 + 8, 8 * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(back[0] == host[8] && back[2] == host[0] && back[6] == host[4] && back[7] == host[15]);
    CU(cudaMemset(d1 + 1, 0xff, 4));
    CU(cudaMemcpy(back, d1, 8, cudaMemcpyDeviceToHost));
    CHECK(back[0] == host[0] && back[1] != back[1]); /* 0xffffffff is a NaN */
    /* async on a stream: the same, finished on return */
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CU(cudaMemsetAsync(d2, 0, sizeof host, s));
    CU(cudaMemcpyAsync(back, d2, sizeof host, cudaMemcpyDeviceToHost, s));
    CU(cudaStreamSynchronize(s));
    CHECK(back[5] == 0.0f);
    CU(cudaMemcpyAsync(d2, host, sizeof host, cudaMemcpyHostToDevice)); /* default stream */

    /* wrong directions, overruns, bad kinds: cudaErrorInvalidValue / InvalidMemcpyDirection, not sticky */
    CHECK(cudaMemcpy(back, host, sizeof host, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
    CHECK(strstr(gm_emu_last_message(), "is not device memory"));
    CHECK(cudaMemcpy(back, host, sizeof host, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue);
    CHECK(cudaMemcpy(d1, d2, sizeof host, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
    CHECK(strstr(gm_emu_last_message(), "where host memory was expected"));
    CHECK(cudaMemcpy(d1, host, sizeof host, cudaMemcpyDeviceToDevice) == cudaErrorInvalidValue);
    CHECK(cudaMemcpy(d1, host, sizeof host, cudaMemcpyHostToHost) == cudaErrorInvalidValue);
    CHECK(cudaMemcpy(d1 + 60, host, 8 * sizeof(float), cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
    CHECK(strstr(gm_emu_last_message(), "16 bytes past the end"));
    CHECK(cudaMemcpy(back, d1 + 1, sizeof host, cudaMemcpyDefault) == cudaErrorInvalidValue);
    CHECK(cudaMemcpy(d1, host, 4, (cudaMemcpyKind)7) == cudaErrorInvalidMemcpyDirection);
    CHECK(cudaMemset(d1 + 1, 0, sizeof host) == cudaErrorInvalidValue);
    CHECK(cudaMemset(back, 0, 4) == cudaErrorInvalidValue);
    CHECK(cudaMemcpy(NULL, host, 4, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
    CHECK(cudaGetLastError() == cudaErrorInvalidValue);
    CU(cudaGetLastError());
    CU(cudaMemcpy(NULL, NULL, 0, cudaMemcpyHostToDevice)); /* nothing to copy */
    CU(cudaStreamDestroy(s));
    CHECK(cudaMemcpyAsync(d1, host, 4, cudaMemcpyHostToDevice, s) == cudaErrorInvalidResourceHandle);
    CHECK(cudaStreamDestroy(s) == cudaErrorInvalidResourceHandle);
    CU(cudaFree(d1));
    CHECK(cudaMemcpy(d1, host, 4, cudaMemcpyHostToDevice) == cudaErrorInvalidValue); /* freed */
    CU(cudaFreeHost(pinned));
    printf("OK\n");
}
""")
    run(exe)


def test_streams_and_events(build):
    exe = build(r"""
#include <thread>
#include <chrono>
int main() {
    cudaStream_t s;
    cudaEvent_t a, b, notime;
    CU(cudaStreamCreate(&s));
    CU(cudaEventCreate(&a));
    CU(cudaEventCreate(&b));
    CU(cudaEventCreateWithFlags(&notime, cudaEventDisableTiming));
    float ms = -1;
    CHECK(cudaEventElapsedTime(&ms, a, b) == cudaErrorInvalidResourceHandle); /* never recorded */
    CU(cudaEventRecord(a, s));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    CU(cudaEventRecord(b, s));
    CU(cudaEventSynchronize(b));
    CU(cudaEventQuery(b));
    CU(cudaStreamWaitEvent(s, b, 0));
    CU(cudaEventElapsedTime(&ms, a, b));
    CHECK(ms >= 15.0f && ms < 5000.0f);
    CU(cudaEventRecord(notime));
    CHECK(cudaEventElapsedTime(&ms, a, notime) == cudaErrorInvalidResourceHandle);
    CU(cudaStreamSynchronize(s));
    CU(cudaStreamSynchronize(0));
    CU(cudaStreamSynchronize(cudaStreamPerThread));
    CU(cudaStreamQuery(s));
    CU(cudaDeviceSynchronize());
    CU(cudaEventDestroy(a));
    CHECK(cudaEventDestroy(a) == cudaErrorInvalidResourceHandle);
    CHECK(cudaEventRecord(a, s) == cudaErrorInvalidResourceHandle);
    CU(cudaEventDestroy(b));
    CU(cudaEventDestroy(notime));
    CU(cudaStreamDestroy(s));
    CHECK(cudaStreamSynchronize(s) == cudaErrorInvalidResourceHandle);
    CHECK(cudaStreamDestroy(0) == cudaErrorInvalidResourceHandle);
    CHECK(cudaStreamCreateWithFlags(&s, 0x10) == cudaErrorInvalidValue);
    CHECK(cudaGetLastError() == cudaErrorInvalidValue);
    CU(cudaGetLastError());
    CHECK(!strcmp(cudaGetErrorName(cudaErrorMemoryAllocation), "cudaErrorMemoryAllocation"));
    CHECK(!strcmp(cudaGetErrorString(cudaErrorMemoryAllocation), "out of memory"));
    CHECK(!strcmp(cudaGetErrorString(cudaErrorLaunchFailure), "unspecified launch failure"));
    CHECK(!strcmp(cudaGetErrorName((cudaError_t)12345), "cudaErrorUnknown"));
    printf("OK\n");
}
""")
    run(exe)


def test_symbol_copies_async_and_symbol_addresses(build):
    """cudaMemcpyToSymbol(Async)/FromSymbol(Async) with offsets and bounds, and cudaGetSymbolAddress, whose
    address copies and kernels accept as device memory."""
    exe = build(r"""
__device__ unsigned long long g_counter;
__device__ float g_table[8];
__global__ void bump(unsigned long long *p) { atomicAdd(p, 1ull); }
__global__ void scale(float *t) { t[threadIdx.x] *= 2.0f; }
int main() {
    cudaStream_t s;
    CU(cudaStreamCreate(&s));
    unsigned long long v = 40, out = 0;
    CU(cudaMemcpyToSymbolAsync(g_counter, &v, sizeof v, 0, cudaMemcpyHostToDevice, s));
    void *addr = NULL;
    CU(cudaGetSymbolAddress(&addr, g_counter));
    CHECK(addr == (void *)&g_counter);
    gm_emu_launch(bump, dim3(2), dim3(1), (unsigned long long *)addr);
    CU(cudaGetLastError());
    CU(cudaMemcpyFromSymbolAsync(&out, g_counter, sizeof out, 0, cudaMemcpyDeviceToHost, s));
    CU(cudaStreamSynchronize(s));
    CHECK(out == 42);
    float t[8] = {1, 2, 3, 4, 5, 6, 7, 8}, back[8] = {0};
    CU(cudaMemcpyToSymbol(g_table, t, sizeof t));
    void *taddr;
    CU(cudaGetSymbolAddress(&taddr, g_table));
    gm_emu_launch(scale, dim3(1), dim3(8), (float *)taddr);
    CU(cudaGetLastError());
    /* the address works with the plain copies too, and its bounds are checked there */
    CU(cudaMemcpyAsync(back, taddr, sizeof back, cudaMemcpyDeviceToHost, s));
    CHECK(back[0] == 2.0f && back[7] == 16.0f);
    CHECK(cudaMemcpy(back, (char *)taddr + 4, sizeof back, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue);
    CHECK(cudaGetLastError() == cudaErrorInvalidValue);
    CU(cudaGetLastError());
    float two[2];
    CU(cudaMemcpyFromSymbolAsync(two, g_table, sizeof two, 6 * sizeof(float), cudaMemcpyDeviceToHost, s));
    CHECK(two[0] == 14.0f && two[1] == 16.0f);
    CHECK(cudaMemcpyFromSymbolAsync(two, g_table, sizeof two, 7 * sizeof(float), cudaMemcpyDeviceToHost, s) ==
          cudaErrorInvalidValue);
    CHECK(cudaMemcpyToSymbolAsync(g_counter, &v, sizeof v, 0, cudaMemcpyDeviceToHost, s) ==
          cudaErrorInvalidMemcpyDirection);
    CU(cudaStreamDestroy(s));
    CHECK(cudaMemcpyToSymbolAsync(g_counter, &v, sizeof v, 0, cudaMemcpyHostToDevice, s) ==
          cudaErrorInvalidResourceHandle);
    CHECK(cudaGetSymbolAddress(NULL, g_counter) == cudaErrorInvalidValue);
    printf("OK\n");
}
""")
    run(exe)


def test_held_streams_keep_events_pending_until_a_synchronize(build):
    """gm_emu_hold_streams: events recorded while held report cudaErrorNotReady (not an error: the last error
    stays clear) until their event, stream or device is synchronized, or the hold ends."""
    exe = build(r"""
int main() {
    cudaStream_t s;
    cudaEvent_t a, b, c;
    CU(cudaStreamCreate(&s));
    CU(cudaEventCreateWithFlags(&a, cudaEventDisableTiming));
    CU(cudaEventCreateWithFlags(&b, cudaEventDisableTiming));
    CU(cudaEventCreateWithFlags(&c, cudaEventDisableTiming));
    CU(cudaEventRecord(a, s));
    gm_emu_hold_streams(1);
    CU(cudaEventQuery(a));                      /* recorded before the hold: done */
    CU(cudaEventRecord(b, s));
    CU(cudaEventRecord(c, s));
    CHECK(cudaEventQuery(b) == cudaErrorNotReady);
    CU(cudaGetLastError());
    CU(cudaEventSynchronize(b));               /* waits for b only */
    CU(cudaEventQuery(b));
    CHECK(cudaEventQuery(c) == cudaErrorNotReady);
    CU(cudaStreamSynchronize(s));              /* the stream ran: c too */
    CU(cudaEventQuery(c));
    CU(cudaEventRecord(c, s));
    CHECK(cudaEventQuery(c) == cudaErrorNotReady);
    CU(cudaDeviceSynchronize());
    CU(cudaEventQuery(c));
    CU(cudaEventRecord(c, s));
    gm_emu_hold_streams(0);                    /* ending the hold lets everything run */
    CU(cudaEventQuery(c));
    printf("OK\n");
}
""")
    run(exe)


# ---- devices and threads -----------------------------------------------------------------------------------------
def test_current_device_is_per_thread_and_state_per_device(build):
    exe = build(r"""
#include <thread>
__global__ void diverge(int *p) { if (threadIdx.x) __syncthreads(); }
__global__ void reduce(const int *x, int *out) { /* 128-thread tree, one sum per block */
    __shared__ int s[128];
    s[threadIdx.x] = x[blockIdx.x * 128 + threadIdx.x];
    __syncthreads();
    for (int w = 64; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}
int main() {
    int n, dev = -1;
    CU(cudaGetDeviceCount(&n));
    CHECK(n == 2);
    CU(cudaGetDevice(&dev));
    CHECK(dev == 0);
    CU(cudaSetDevice(1));
    CHECK(cudaSetDevice(2) == cudaErrorInvalidDevice && cudaSetDevice(-1) == cudaErrorInvalidDevice);
    CHECK(cudaGetLastError() == cudaErrorInvalidDevice);
    CU(cudaGetLastError());
    int other = -1, other_after = -1;
    std::thread t([&] {
        cudaGetDevice(&other); /* a new thread starts on device 0 */
        cudaSetDevice(0);
        cudaGetDevice(&other_after);
    });
    t.join();
    CHECK(other == 0 && other_after == 0);
    CU(cudaGetDevice(&dev));
    CHECK(dev == 1); /* untouched by the other thread */

    /* memory is accounted per device */
    void *p;
    size_t fr, total;
    CU(cudaMalloc(&p, 600000));
    CU(cudaMemGetInfo(&fr, &total));
    CHECK(fr == (1 << 20) - 600000);
    CU(cudaSetDevice(0));
    CU(cudaMemGetInfo(&fr, &total));
    CHECK(fr == 1 << 20);
    CU(cudaFree(p)); /* freed from another current device: fine, as on a GPU */

    /* a crash is per device */
    int *q;
    CU(cudaSetDevice(1));
    CU(cudaMalloc(&q, 64));
    gm_emu_launch(diverge, dim3(1), dim3(4), q);
    CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
    CHECK(cudaDeviceSynchronize() == cudaErrorLaunchFailure);
    (void)cudaGetLastError(); /* the last error is the thread's: take it before looking at the other device */
    CU(cudaSetDevice(0));
    CU(cudaDeviceSynchronize());
    CU(cudaMalloc(&p, 16));
    CU(cudaGetLastError());
    CU(cudaSetDevice(1));
    CHECK(cudaDeviceSynchronize() == cudaErrorLaunchFailure);
    gm_emu_reset();
    CU(cudaDeviceSynchronize());

    /* launches from several threads at once (the GIL released) are serialised and all correct */
    const int nthreads = 4, nb = 3;
    int failures[nthreads] = {0};
    std::vector<std::thread> ts;
    for (int k = 0; k < nthreads; k++)
        ts.emplace_back([k, &failures] {
            cudaSetDevice(k % 2);
            std::vector<int> hx(nb * 128), ho(nb);
            for (int i = 0; i < nb * 128; i++) hx[i] = (i + k) % 17;
            int *x, *o;
            if (cudaMalloc(&x, hx.size() * 4) || cudaMalloc(&o, nb * 4)) { failures[k] = 1000; return; }
            cudaMemcpy(x, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice);
            for (int rep = 0; rep < 50; rep++) {
                gm_emu_launch(reduce, dim3(nb), dim3(128), x, o);
                if (cudaGetLastError() != cudaSuccess) failures[k]++;
                cudaMemcpy(ho.data(), o, nb * 4, cudaMemcpyDeviceToHost);
                for (int b = 0; b < nb; b++) {
                    int want = 0;
                    for (int i = 0; i < 128; i++) want += hx[b * 128 + i];
                    if (ho[b] != want) failures[k]++;
                }
            }
        });
    for (auto &th : ts) th.join();
    for (int k = 0; k < nthreads; k++) CHECK(failures[k] == 0);
    printf("OK\n");
}
""")
    run(exe, env={"GPUMEMNET_EMU_DEVICES": "2", "GPUMEMNET_EMU_MEMORY": "1M"})
