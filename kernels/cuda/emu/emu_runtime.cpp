/* kernels/cuda/emu/emu_runtime.cpp — the CUDA emulator's host API: devices, memory, streams, events, errors.
 *
 * GPUMEMNET_CUDA=emu builds the CUDA backend against kernels/cuda/emu/include/ so that the CUDA kernels and
 * csrc's CUDA paths are tested on machines without a GPU. The emulated devices are configured from the
 * environment (cuda_runtime_api.h) and everything runs synchronously on the calling thread: a stream or an
 * event is a token, "device" memory is host memory from posix_memalign, and kernels run during the launch call
 * (emu_launch.cpp).
 *
 * What it checks, where a GPU would fail too (so that bugs fail here rather than on the first real run):
 *  - capacity: cudaMalloc past a device's capacity fails with cudaErrorMemoryAllocation (how OOM is tested);
 *  - fresh cudaMalloc memory is filled with GPUMEMNET_EMU_POISON (0xCD: -4.3e8 as float32, large as any
 *    dtype), so a kernel that reads memory nobody wrote gives visibly wrong results;
 *  - cudaFree of a pointer that is not a live cudaMalloc block; cudaMemcpy/cudaMemset whose device range is
 *    not inside one live block (overruns included) or whose direction does not match the pointers;
 *  - launches (emu_launch.cpp): the configuration; pointer arguments that a GPU could not dereference (host,
 *    freed, or another device's memory: cudaErrorIllegalAddress); divergent __syncthreads(); __trap(). The
 *    last three are sticky, like a crashed context: every later call on that device returns the error until
 *    gm_emu_reset();
 *  - order dependence: GPUMEMNET_EMU_SCHEDULE=reverse or random:SEED runs blocks and threads in other orders,
 *    so a missing __syncthreads or an assumption about block order changes the results.
 * Known limits (what only a real GPU shows): no concurrency, so no data races inside a phase between
 * barriers, no memory-model, warp-scheduling or stream-ordering bugs (all work is finished when a call
 * returns); out-of-bounds accesses inside kernels are not caught (a wild one may crash the process instead of
 * raising cudaErrorIllegalAddress), nor pointers hidden in struct arguments; shared memory is a static that
 * keeps the previous block's (or launch's) values instead of being undefined, so a read before any write goes
 * unnoticed; threads waiting at different __syncthreads() calls are released together; the fast-math
 * intrinsics are exact; no timing, occupancy, register, stack or shared-memory limits; cuDNN/cuBLAS are
 * replaced by plain loops (emu/<name>_emu.cpp). */
#include "emu_internal.h"

#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include <algorithm>
#include <atomic>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

namespace gm_emu {
namespace {

const int kMaxDevices = 64;
const size_t kAlign = 512; /* cudaMalloc's alignment on current GPUs (at least 256) */
const int kRuntimeVersion = CUDART_VERSION;

/* ---- configuration: read once from the environment ---- */
struct Config {
    int ndev = 1;
    size_t capacity[kMaxDevices];
    unsigned char poison = 0xCD;
    Schedule schedule = SCHEDULE_FORWARD;
    unsigned long long seed = 0;
    bool check_pointers = true;
    char error[256] = ""; /* a malformed variable: every call fails with cudaErrorInitializationError */
};
Config g_cfg;
std::once_flag g_cfg_once;

/* Parses "123", "512K", "64M", "8G", "1GiB", "1T" (powers of 1024); false on anything else or overflow. */
bool parse_bytes(const char *s, size_t *out) {
    errno = 0;
    char *end = nullptr;
    if (!isdigit((unsigned char)*s)) return false;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno) return false;
    unsigned shift = 0;
    switch (toupper((unsigned char)*end)) {
    case 'K': shift = 10; end++; break;
    case 'M': shift = 20; end++; break;
    case 'G': shift = 30; end++; break;
    case 'T': shift = 40; end++; break;
    default: break;
    }
    if (shift && (end[0] == 'i' || end[0] == 'I') && toupper((unsigned char)end[1]) == 'B') end += 2;
    else if (toupper((unsigned char)end[0]) == 'B') end += 1;
    if (*end) return false;
    if (shift && v > (~0ull >> shift)) return false;
    *out = (size_t)(v << shift);
    return true;
}

void configure() {
    size_t cap = (size_t)8 << 30;
    const char *s = getenv("GPUMEMNET_EMU_DEVICES");
    if (s && *s) {
        char *end = nullptr;
        long n = strtol(s, &end, 10);
        if (*end || end == s || n < 0 || n > kMaxDevices)
            snprintf(g_cfg.error, sizeof g_cfg.error,
                     "GPUMEMNET_EMU_DEVICES=%.40s: expected a number of devices from 0 to %d", s, kMaxDevices);
        else
            g_cfg.ndev = (int)n;
    }
    s = getenv("GPUMEMNET_EMU_MEMORY");
    if (s && *s && !parse_bytes(s, &cap))
        snprintf(g_cfg.error, sizeof g_cfg.error,
                 "GPUMEMNET_EMU_MEMORY=%.40s: expected bytes per device, e.g. 1073741824 or 1G", s);
    for (int i = 0; i < kMaxDevices; i++) g_cfg.capacity[i] = cap;
    s = getenv("GPUMEMNET_EMU_POISON");
    if (s && *s) {
        char *end = nullptr;
        long b = strtol(s, &end, 0);
        if (*end || end == s || b < 0 || b > 255)
            snprintf(g_cfg.error, sizeof g_cfg.error, "GPUMEMNET_EMU_POISON=%.40s: expected a byte, 0 to 255", s);
        else
            g_cfg.poison = (unsigned char)b;
    }
    s = getenv("GPUMEMNET_EMU_SCHEDULE");
    if (s && *s) {
        char *end = nullptr;
        if (!strcmp(s, "forward"))
            g_cfg.schedule = SCHEDULE_FORWARD;
        else if (!strcmp(s, "reverse"))
            g_cfg.schedule = SCHEDULE_REVERSE;
        else if (!strcmp(s, "random"))
            g_cfg.schedule = SCHEDULE_RANDOM;
        else if (!strncmp(s, "random:", 7) && isdigit((unsigned char)s[7]) &&
                 (g_cfg.seed = strtoull(s + 7, &end, 10), !*end))
            g_cfg.schedule = SCHEDULE_RANDOM;
        else
            snprintf(g_cfg.error, sizeof g_cfg.error,
                     "GPUMEMNET_EMU_SCHEDULE=%.40s: expected forward, reverse, random or random:SEED", s);
    }
    s = getenv("GPUMEMNET_EMU_CHECK_POINTERS");
    if (s && *s) {
        if (!strcmp(s, "0") || !strcmp(s, "1"))
            g_cfg.check_pointers = s[0] == '1';
        else
            snprintf(g_cfg.error, sizeof g_cfg.error, "GPUMEMNET_EMU_CHECK_POINTERS=%.40s: expected 0 or 1", s);
    }
}

const Config &config() {
    std::call_once(g_cfg_once, configure);
    return g_cfg;
}

/* ---- per-thread state, like the real runtime's ---- */
thread_local int tl_device = 0;
thread_local cudaError_t tl_last = cudaSuccess;
thread_local char tl_message[768];

/* ---- sticky errors: per device, like a crashed context ---- */
std::atomic<int> g_sticky[kMaxDevices];
std::mutex g_launch_msg_mu;
char g_launch_msg[768]; /* text of the last sticky failure (cudaGetErrorString of it); stays until reset */
cudaError_t g_launch_msg_code = cudaSuccess;

/* ---- memory ----
 * Each cudaMalloc block sits between two red zones filled with kRedzoneByte: after every launch the zones of
 * the launch's device are checked, so a kernel that writes just before or past the end of a block is caught
 * (as the fault or corruption it would be on a GPU). With the caching allocator's segments that covers the
 * ends of segments; with GPUMEMNET_NO_CACHING=1 every tensor has its own block and zones. */
const size_t kRedzoneFront = kAlign; /* keeps the block 512-aligned */
const size_t kRedzoneBack = 256;
const unsigned char kRedzoneByte = 0xFB;

struct Block {
    size_t size;
    int device;
    bool vm; /* an address range of cuMemAddressReserve (emu_vmm.cpp): no red zones, not for cudaFree */
};

void *block_base(uintptr_t p) { return (void *)(p - kRedzoneFront); }

/* The offset from p (negative: before the block) of the first red-zone byte of block (p, b) that is not
 * kRedzoneByte, or 0 when both zones are intact. */
ptrdiff_t broken_redzone(uintptr_t p, const Block &b) {
    static unsigned char intact[kRedzoneFront > kRedzoneBack ? kRedzoneFront : kRedzoneBack];
    if (!intact[0]) memset(intact, kRedzoneByte, sizeof intact);
    const unsigned char *front = (const unsigned char *)block_base(p), *back = (const unsigned char *)p + b.size;
    if (!memcmp(front, intact, kRedzoneFront) && !memcmp(back, intact, kRedzoneBack)) return 0;
    for (size_t i = 0; i < kRedzoneFront; i++)
        if (front[i] != kRedzoneByte) return (ptrdiff_t)i - (ptrdiff_t)kRedzoneFront;
    for (size_t i = 0;; i++)
        if (back[i] != kRedzoneByte) return (ptrdiff_t)(b.size + i);
}

void fill_redzones(uintptr_t p, size_t size) {
    memset(block_base(p), kRedzoneByte, kRedzoneFront);
    memset((char *)p + size, kRedzoneByte, kRedzoneBack);
}
std::mutex g_mem_mu;
std::map<uintptr_t, Block> g_device_blocks; /* by address, so a range lookup finds the enclosing block */
std::map<uintptr_t, size_t> g_host_blocks;  /* cudaMallocHost / cudaHostAlloc */
std::map<uintptr_t, size_t> g_mapped_host;  /* the cudaHostAllocMapped ones: device-addressable */

/* Whether [p, p + n) lies inside one mapped host block; g_mem_mu held. */
bool in_mapped_host(const void *p, size_t n) {
    auto it = g_mapped_host.upper_bound((uintptr_t)p);
    if (it == g_mapped_host.begin()) return false;
    --it;
    size_t off = (uintptr_t)p - it->first;
    return off <= it->second && n <= it->second - off;
}
/* __device__ variables whose address was taken (cudaGetSymbolAddress): device memory of every device, since the
 * emulator's one global stands for each device's copy. Not in g_device_blocks: they have no red zones. */
std::map<uintptr_t, size_t> g_symbols;

/* Whether [p, p + n) lies inside one registered symbol; g_mem_mu held. */
bool in_symbol(const void *p, size_t n) {
    auto it = g_symbols.upper_bound((uintptr_t)p);
    if (it == g_symbols.begin()) return false;
    --it;
    size_t off = (uintptr_t)p - it->first;
    return off <= it->second && n <= it->second - off;
}
size_t g_used[kMaxDevices];

enum RangeKind { NOT_DEVICE, IN_BLOCK, OVERRUN };
struct Range {
    RangeKind kind;
    uintptr_t base; /* the enclosing block (IN_BLOCK, OVERRUN) */
    size_t size;
    int device;
};

/* Where [p, p + n) lies relative to the live device blocks; g_mem_mu held. */
Range find_range(const void *p, size_t n) {
    uintptr_t a = (uintptr_t)p;
    auto it = g_device_blocks.upper_bound(a);
    if (it == g_device_blocks.begin()) return {NOT_DEVICE, 0, 0, -1};
    --it;
    uintptr_t base = it->first;
    size_t size = it->second.size;
    if (a - base >= size) return {NOT_DEVICE, 0, 0, -1};
    RangeKind k = n <= size - (a - base) ? IN_BLOCK : OVERRUN;
    return {k, base, size, it->second.device};
}

/* ---- streams and events: tokens that remember their device ---- */
} // namespace
} // namespace gm_emu

struct CUstream_st {
    int device;
    unsigned flags;
};
struct CUevent_st {
    int device;
    unsigned flags;
    bool recorded;
    bool pending; /* recorded while gm_emu_hold_streams(1): "not ready" until a synchronize */
    std::chrono::steady_clock::time_point when;
};

namespace gm_emu {
namespace {
std::mutex g_handle_mu;
std::set<cudaStream_t> g_streams;
std::set<cudaEvent_t> g_events;
bool g_hold; /* gm_emu_hold_streams; g_handle_mu held */

/* gm_emu_stream_log: the lines, under their own mutex (a launch logs without g_handle_mu). */
std::mutex g_log_mu;
std::atomic<bool> g_log_on{false};
std::string g_log;

void log_line(const char *fmt, ...) {
    if (!g_log_on.load(std::memory_order_relaxed)) return;
    char line[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    std::lock_guard<std::mutex> g(g_log_mu);
    g_log += line;
    g_log += '\n';
}

const char *kind_short(cudaMemcpyKind k) {
    return k == cudaMemcpyDeviceToHost   ? "D2H"
           : k == cudaMemcpyHostToDevice ? "H2D"
           : k == cudaMemcpyDeviceToDevice ? "D2D"
           : k == cudaMemcpyHostToHost   ? "H2H"
                                          : "default";
}

/* The work of device dev (all devices: -1) has "run": its held events are no longer pending; g_handle_mu held. */
void drain(int dev) {
    for (cudaEvent_t e : g_events)
        if (dev < 0 || e->device == dev) e->pending = false;
}

bool is_builtin_stream(cudaStream_t s) { return s == 0 || s == cudaStreamLegacy || s == cudaStreamPerThread; }

/* The device a stream belongs to (the current one for the built-in streams), or -1 for an unknown handle. */
int stream_device(cudaStream_t s) {
    if (is_builtin_stream(s)) return tl_device;
    std::lock_guard<std::mutex> g(g_handle_mu);
    return g_streams.count(s) ? s->device : -1;
}

/* The device's sticky error, recorded as the last error too; cudaSuccess when healthy. */
cudaError_t sticky(int dev) {
    cudaError_t e = (cudaError_t)g_sticky[dev].load();
    if (e != cudaSuccess) tl_last = e;
    return e;
}

/* Configured and with at least one device (without looking at any device's state). */
cudaError_t configured() {
    const Config &c = config();
    if (c.error[0]) return fail(cudaErrorInitializationError, "%s", c.error);
    if (c.ndev == 0) return fail(cudaErrorNoDevice, "GPUMEMNET_EMU_DEVICES=0: the emulator has no device");
    return cudaSuccess;
}

cudaError_t check_device_index(int device) {
    cudaError_t e = configured();
    if (e) return e;
    if (device < 0 || device >= g_cfg.ndev)
        return fail(cudaErrorInvalidDevice, "device %d does not exist (the emulator has %d, GPUMEMNET_EMU_DEVICES)",
                    device, g_cfg.ndev);
    return cudaSuccess;
}

const char *kind_name(cudaMemcpyKind k) {
    switch (k) {
    case cudaMemcpyHostToHost: return "cudaMemcpyHostToHost";
    case cudaMemcpyHostToDevice: return "cudaMemcpyHostToDevice";
    case cudaMemcpyDeviceToHost: return "cudaMemcpyDeviceToHost";
    case cudaMemcpyDeviceToDevice: return "cudaMemcpyDeviceToDevice";
    default: return "cudaMemcpyDefault";
    }
}

/* Checks that [p, p + n) is device memory inside one live block (want_device) or not device memory at all;
 * g_mem_mu held. `what` names the operand in the message. */
cudaError_t check_operand(const char *fn, const char *what, const void *p, size_t n, bool want_device) {
    Range r = find_range(p, n);
    if (r.kind == OVERRUN)
        return fail(cudaErrorInvalidValue,
                    "%s: %s %p + %zu bytes runs %zu bytes past the end of its cudaMalloc block (%zu bytes at %p)",
                    fn, what, p, n, (size_t)((uintptr_t)p + n - (r.base + r.size)), r.size, (void *)r.base);
    if (want_device && r.kind == NOT_DEVICE && (in_symbol(p, n) || in_mapped_host(p, n))) return cudaSuccess;
    if (want_device && r.kind != IN_BLOCK)
        return fail(cudaErrorInvalidValue, "%s: %s %p is not device memory (no live cudaMalloc block holds it)",
                    fn, what, p);
    if (!want_device && r.kind == IN_BLOCK)
        return fail(cudaErrorInvalidValue,
                    "%s: %s %p is device memory (cudaMalloc block at %p on device %d) where host memory was expected",
                    fn, what, p, (void *)r.base, r.device);
    return cudaSuccess;
}

cudaError_t memcpy_impl(const char *fn, void *dst, const void *src, size_t count, cudaMemcpyKind kind) {
    int dev;
    if (cudaError_t e = ready(&dev)) return e;
    if ((unsigned)kind > (unsigned)cudaMemcpyDefault)
        return fail(cudaErrorInvalidMemcpyDirection, "%s: kind %d is not a cudaMemcpyKind", fn, (int)kind);
    if (count == 0) return cudaSuccess;
    if (!dst || !src) return fail(cudaErrorInvalidValue, "%s: NULL %s for %zu bytes", fn, dst ? "src" : "dst", count);
    {
        std::lock_guard<std::mutex> g(g_mem_mu);
        bool dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
        bool src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
        cudaError_t e;
        if (kind == cudaMemcpyDefault) { /* any direction, but a device range must not overrun its block */
            Range rd = find_range(dst, count), rs = find_range(src, count);
            dst_dev = rd.kind != NOT_DEVICE;
            src_dev = rs.kind != NOT_DEVICE;
        }
        char what[64];
        snprintf(what, sizeof what, "dst of %s", kind_name(kind));
        if ((e = check_operand(fn, what, dst, count, dst_dev))) return e;
        snprintf(what, sizeof what, "src of %s", kind_name(kind));
        if ((e = check_operand(fn, what, src, count, src_dev))) return e;
        /* a GPU copy of overlapping ranges is undefined; memmove at least does something sane */
        memmove(dst, src, count);
    }
    return cudaSuccess;
}

cudaError_t memset_impl(const char *fn, void *ptr, int value, size_t count) {
    int dev;
    if (cudaError_t e = ready(&dev)) return e;
    if (count == 0) return cudaSuccess;
    if (!ptr) return fail(cudaErrorInvalidValue, "%s: NULL pointer for %zu bytes", fn, count);
    std::lock_guard<std::mutex> g(g_mem_mu);
    if (cudaError_t e = check_operand(fn, "ptr", ptr, count, true)) return e;
    memset(ptr, value, count);
    return cudaSuccess;
}

cudaError_t check_stream(const char *fn, cudaStream_t s, int *dev) {
    int d = stream_device(s);
    if (d < 0) return fail(cudaErrorInvalidResourceHandle, "%s: stream %p is not a live stream", fn, (void *)s);
    *dev = d;
    return cudaSuccess;
}

cudaError_t host_alloc(const char *fn, void **ptr, size_t size, bool mapped = false) {
    if (!ptr) return fail(cudaErrorInvalidValue, "%s: ptr is NULL", fn);
    *ptr = nullptr;
    int dev;
    if (cudaError_t e = ready(&dev)) return e;
    if (size == 0) return cudaSuccess;
    void *p = nullptr;
    if (posix_memalign(&p, kAlign, size) != 0)
        return fail(cudaErrorMemoryAllocation, "%s: the host could not allocate %zu bytes", fn, size);
    memset(p, config().poison, size);
    std::lock_guard<std::mutex> g(g_mem_mu);
    g_host_blocks[(uintptr_t)p] = size;
    if (mapped) g_mapped_host[(uintptr_t)p] = size;
    *ptr = p;
    return cudaSuccess;
}

} // namespace

void add_vm_range(uintptr_t base, size_t size, int dev) {
    std::lock_guard<std::mutex> g(g_mem_mu);
    g_device_blocks[base] = Block{size, dev, true};
}

void remove_vm_range(uintptr_t base) {
    std::lock_guard<std::mutex> g(g_mem_mu);
    g_device_blocks.erase(base);
}

bool charge(int dev, size_t size) {
    std::lock_guard<std::mutex> g(g_mem_mu);
    size_t cap = config().capacity[dev], used = g_used[dev];
    if (used > cap || size > cap - used) return false;
    g_used[dev] += size;
    return true;
}

void uncharge(int dev, size_t size) {
    std::lock_guard<std::mutex> g(g_mem_mu);
    g_used[dev] -= size;
}

int current_device() { return tl_device; }

cudaError_t fail(cudaError_t e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tl_message, sizeof tl_message, fmt, ap);
    va_end(ap);
    tl_last = e;
    return e;
}

cudaError_t ready(int *dev) {
    if (cudaError_t e = configured()) return e;
    *dev = tl_device;
    return sticky(tl_device);
}

Schedule schedule(unsigned long long *seed) {
    *seed = config().seed;
    return g_cfg.schedule;
}

unsigned char poison_byte() { return config().poison; }

cudaError_t check_kernel_pointers(const void *const *ptrs, const int *arg_index, int n, int dev, char *why,
                                  size_t why_len) {
    if (!config().check_pointers) return cudaSuccess;
    std::lock_guard<std::mutex> g(g_mem_mu);
    for (int i = 0; i < n; i++) {
        const void *p = ptrs[i];
        if (!p) continue;
        /* one past the end of a block is a valid pointer to pass (an end pointer), so look up p - 1 for it */
        Range r = find_range(p, 0);
        if (r.kind == NOT_DEVICE) {
            Range before = find_range((const char *)p - 1, 1);
            if (before.kind == IN_BLOCK && (uintptr_t)p == before.base + before.size) r = before;
        }
        if (r.kind != NOT_DEVICE && r.device == dev) continue;
        if (r.kind != NOT_DEVICE) {
            snprintf(why, why_len,
                     "kernel argument %d is %p, memory of device %d, but the kernel runs on device %d", arg_index[i],
                     p, r.device, dev);
            return cudaErrorIllegalAddress;
        }
        auto h = g_host_blocks.upper_bound((uintptr_t)p);
        if (h != g_host_blocks.begin() && (uintptr_t)p - (--h)->first <= h->second) continue; /* pinned */
        if (in_symbol(p, 0)) continue;
        snprintf(why, why_len,
                 "kernel argument %d is %p, which is not device memory (no live cudaMalloc block holds it: a host "
                 "pointer, or freed memory?); a GPU faults when it is dereferenced", arg_index[i], p);
        return cudaErrorIllegalAddress;
    }
    return cudaSuccess;
}

cudaError_t check_redzones(int dev, char *why, size_t why_len) {
    std::lock_guard<std::mutex> g(g_mem_mu);
    for (auto &kv : g_device_blocks) {
        if (kv.second.device != dev || kv.second.vm) continue;
        ptrdiff_t off = broken_redzone(kv.first, kv.second);
        if (!off) continue;
        snprintf(why, why_len,
                 "wrote outside the %zu-byte cudaMalloc block at %p: at byte offset %td, %s (found in its red zone "
                 "after the launch)",
                 kv.second.size, (void *)kv.first, off, off < 0 ? "before its start" : "past its end");
        fill_redzones(kv.first, kv.second.size); /* reported once */
        return cudaErrorIllegalAddress;
    }
    return cudaSuccess;
}

void set_sticky(int dev, cudaError_t e, const char *msg) {
    {
        std::lock_guard<std::mutex> g(g_launch_msg_mu);
        snprintf(g_launch_msg, sizeof g_launch_msg, "%s: %s",
                 e == cudaErrorIllegalAddress ? "an illegal memory access was encountered" : "unspecified launch failure",
                 msg);
        g_launch_msg_code = e;
    }
    g_sticky[dev].store(e);
    fail(e, "%s", msg);
}

} // namespace gm_emu

using namespace gm_emu;

/* cudaErrorInvalidResourceHandle, naming the call, unless event is live (called with g_handle_mu held). */
static cudaError_t check_event(const char *call, cudaEvent_t event) {
    if (g_events.count(event)) return cudaSuccess;
    return fail(cudaErrorInvalidResourceHandle, "%s: %p is not a live event", call, (void *)event);
}

/* cudaStreamDestroy / cudaEventDestroy: forget a live handle and free it, or fail naming the call. */
template <typename H> static cudaError_t destroy_live(std::set<H> &live, H h, const char *call, const char *kind) {
    if (cudaError_t e = configured()) return e;
    std::lock_guard<std::mutex> g(g_handle_mu);
    if (!live.erase(h)) return fail(cudaErrorInvalidResourceHandle, "%s: %p is not a live %s", call, (void *)h, kind);
    delete h;
    return cudaSuccess;
}

extern "C" {

/* ---- devices ---------------------------------------------------------------------------------------------- */
cudaError_t cudaGetDeviceCount(int *count) {
    if (!count) return fail(cudaErrorInvalidValue, "cudaGetDeviceCount: count is NULL");
    *count = 0;
    if (cudaError_t e = configured()) return e;
    *count = g_cfg.ndev;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device) {
    if (!device) return fail(cudaErrorInvalidValue, "cudaGetDevice: device is NULL");
    if (cudaError_t e = configured()) return e;
    *device = tl_device;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
    if (cudaError_t e = check_device_index(device)) return e;
    tl_device = device;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int device) {
    if (!p) return fail(cudaErrorInvalidValue, "cudaGetDeviceProperties: prop is NULL");
    if (cudaError_t e = check_device_index(device)) return e;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "gpumemnet CUDA emulator");
    {
        std::lock_guard<std::mutex> g(g_mem_mu);
        p->totalGlobalMem = g_cfg.capacity[device];
    }
    p->sharedMemPerBlock = 48 << 10;
    p->sharedMemPerBlockOptin = 227 << 10;
    p->sharedMemPerMultiprocessor = 228 << 10;
    p->regsPerBlock = p->regsPerMultiprocessor = 65536;
    p->warpSize = 32;
    p->memPitch = (size_t)1 << 31;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
    p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 0x7fffffff;
    p->maxGridSize[1] = p->maxGridSize[2] = 65535;
    p->clockRate = 1000000; /* kHz */
    p->memoryClockRate = 1000000;
    p->memoryBusWidth = 64;
    p->l2CacheSize = 1 << 20;
    p->totalConstMem = 64 << 10;
    p->major = 9;
    p->minor = 0;
    p->textureAlignment = 512;
    p->multiProcessorCount = 4;
    p->maxThreadsPerMultiProcessor = 2048;
    p->maxBlocksPerMultiProcessor = 32;
    p->canMapHostMemory = 1;
    p->unifiedAddressing = 1;
    p->managedMemory = 0;
    p->pciBusID = device;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device) {
    if (!value) return fail(cudaErrorInvalidValue, "cudaDeviceGetAttribute: value is NULL");
    struct cudaDeviceProp p;
    if (cudaError_t e = cudaGetDeviceProperties(&p, device)) return e;
    switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
    case cudaDevAttrMaxBlockDimX: *value = p.maxThreadsDim[0]; break;
    case cudaDevAttrMaxBlockDimY: *value = p.maxThreadsDim[1]; break;
    case cudaDevAttrMaxBlockDimZ: *value = p.maxThreadsDim[2]; break;
    case cudaDevAttrMaxGridDimX: *value = p.maxGridSize[0]; break;
    case cudaDevAttrMaxGridDimY: *value = p.maxGridSize[1]; break;
    case cudaDevAttrMaxGridDimZ: *value = p.maxGridSize[2]; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = (int)p.sharedMemPerBlock; break;
    case cudaDevAttrTotalConstantMemory: *value = (int)p.totalConstMem; break;
    case cudaDevAttrWarpSize: *value = p.warpSize; break;
    case cudaDevAttrMaxRegistersPerBlock: *value = p.regsPerBlock; break;
    case cudaDevAttrClockRate: *value = p.clockRate; break;
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
    case cudaDevAttrIntegrated: *value = p.integrated; break;
    case cudaDevAttrCanMapHostMemory: *value = p.canMapHostMemory; break;
    case cudaDevAttrComputeMode: *value = p.computeMode; break;
    case cudaDevAttrConcurrentKernels: *value = p.concurrentKernels; break;
    case cudaDevAttrEccEnabled: *value = p.ECCEnabled; break;
    case cudaDevAttrPciBusId: *value = p.pciBusID; break;
    case cudaDevAttrPciDeviceId: *value = p.pciDeviceID; break;
    case cudaDevAttrPciDomainId: *value = p.pciDomainID; break;
    case cudaDevAttrMemoryClockRate: *value = p.memoryClockRate; break;
    case cudaDevAttrGlobalMemoryBusWidth: *value = p.memoryBusWidth; break;
    case cudaDevAttrL2CacheSize: *value = p.l2CacheSize; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *value = p.maxThreadsPerMultiProcessor; break;
    case cudaDevAttrUnifiedAddressing: *value = p.unifiedAddressing; break;
    case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *value = (int)p.sharedMemPerMultiprocessor; break;
    case cudaDevAttrMaxRegistersPerMultiprocessor: *value = p.regsPerMultiprocessor; break;
    case cudaDevAttrManagedMemory: *value = p.managedMemory; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = (int)p.sharedMemPerBlockOptin; break;
    case cudaDevAttrMaxBlocksPerMultiprocessor: *value = p.maxBlocksPerMultiProcessor; break;
    default: return fail(cudaErrorInvalidValue, "cudaDeviceGetAttribute: attribute %d is not emulated", (int)attr);
    }
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
    int dev;
    if (cudaError_t e = ready(&dev)) return e; /* everything already ran; only a crashed device has something to say */
    log_line("sync device");
    std::lock_guard<std::mutex> g(g_handle_mu);
    drain(dev);
    return cudaSuccess;
}

/* Like the real one: destroys the current device's allocations and its crashed state. */
cudaError_t cudaDeviceReset(void) {
    if (cudaError_t e = configured()) return e;
    int dev = tl_device;
    std::lock_guard<std::mutex> g(g_mem_mu);
    for (auto it = g_device_blocks.begin(); it != g_device_blocks.end();) {
        if (it->second.device == dev) {
            free(block_base(it->first));
            it = g_device_blocks.erase(it);
        } else {
            ++it;
        }
    }
    g_used[dev] = 0;
    g_sticky[dev].store(cudaSuccess);
    return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *version) {
    if (!version) return fail(cudaErrorInvalidValue, "cudaDriverGetVersion: version is NULL");
    *version = kRuntimeVersion;
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *version) {
    if (!version) return fail(cudaErrorInvalidValue, "cudaRuntimeGetVersion: version is NULL");
    *version = kRuntimeVersion;
    return cudaSuccess;
}

/* ---- memory ----------------------------------------------------------------------------------------------- */
cudaError_t cudaMalloc(void **ptr, size_t size) {
    if (!ptr) return fail(cudaErrorInvalidValue, "cudaMalloc: ptr is NULL");
    *ptr = nullptr;
    int dev;
    if (cudaError_t e = ready(&dev)) return e;
    if (size == 0) return cudaSuccess; /* as the real one: success and a NULL pointer */
    std::lock_guard<std::mutex> g(g_mem_mu);
    size_t cap = g_cfg.capacity[dev], used = g_used[dev];
    if (used > cap || size > cap - used)
        return fail(cudaErrorMemoryAllocation,
                    "cudaMalloc of %zu bytes on device %d: %zu of its %zu bytes are allocated (GPUMEMNET_EMU_MEMORY)",
                    size, dev, used, cap);
    void *base = nullptr;
    if (size > SIZE_MAX - kRedzoneFront - kRedzoneBack ||
        posix_memalign(&base, kAlign, kRedzoneFront + size + kRedzoneBack) != 0)
        return fail(cudaErrorMemoryAllocation, "cudaMalloc of %zu bytes on device %d: the host is out of memory",
                    size, dev);
    char *p = (char *)base + kRedzoneFront;
    memset(p, g_cfg.poison, size);
    fill_redzones((uintptr_t)p, size);
    g_device_blocks[(uintptr_t)p] = Block{size, dev, false};
    g_used[dev] += size;
    *ptr = p;
    return cudaSuccess;
}

cudaError_t cudaFree(void *ptr) {
    if (cudaError_t e = configured()) return e;
    if (!ptr) return sticky(tl_device);
    std::lock_guard<std::mutex> g(g_mem_mu);
    auto it = g_device_blocks.find((uintptr_t)ptr);
    if (it == g_device_blocks.end() || it->second.vm) {
        Range r = find_range(ptr, 1);
        if (r.kind != NOT_DEVICE)
            return fail(cudaErrorInvalidDevicePointer,
                        "cudaFree(%p): points %zu bytes into the cudaMalloc block at %p, not at its start", ptr,
                        (size_t)((uintptr_t)ptr - r.base), (void *)r.base);
        return fail(cudaErrorInvalidDevicePointer,
                    "cudaFree(%p): not a live cudaMalloc pointer (never allocated, or already freed)", ptr);
    }
    int dev = it->second.device;
    if (cudaError_t e = sticky(dev)) return e; /* a crashed context frees nothing */
    g_used[dev] -= it->second.size;
    g_device_blocks.erase(it);
    free(block_base((uintptr_t)ptr));
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void **ptr, size_t size) { return host_alloc("cudaMallocHost", ptr, size); }

cudaError_t cudaHostAlloc(void **ptr, size_t size, unsigned int flags) {
    if (flags & ~0x7u) return fail(cudaErrorInvalidValue, "cudaHostAlloc: unknown flags 0x%x", flags);
    return host_alloc("cudaHostAlloc", ptr, size, (flags & cudaHostAllocMapped) != 0);
}

cudaError_t cudaFreeHost(void *ptr) {
    int dev;
    if (cudaError_t e = ready(&dev)) return e;
    if (!ptr) return cudaSuccess;
    std::lock_guard<std::mutex> g(g_mem_mu);
    auto it = g_host_blocks.find((uintptr_t)ptr);
    if (it == g_host_blocks.end())
        return fail(cudaErrorInvalidValue, "cudaFreeHost(%p): not a live cudaMallocHost/cudaHostAlloc pointer", ptr);
    g_host_blocks.erase(it);
    g_mapped_host.erase((uintptr_t)ptr);
    free(ptr);
    return cudaSuccess;
}

cudaError_t cudaHostGetDevicePointer(void **pDevice, void *pHost, unsigned int flags) {
    if (!pDevice) return fail(cudaErrorInvalidValue, "cudaHostGetDevicePointer: pDevice is NULL");
    *pDevice = nullptr;
    int dev;
    if (cudaError_t e = ready(&dev)) return e;
    if (flags) return fail(cudaErrorInvalidValue, "cudaHostGetDevicePointer: flags must be 0, got %u", flags);
    std::lock_guard<std::mutex> g(g_mem_mu);
    if (!in_mapped_host(pHost, 0))
        return fail(cudaErrorInvalidValue, "cudaHostGetDevicePointer(%p): not in memory from cudaHostAlloc with "
                    "cudaHostAllocMapped", pHost);
    *pDevice = pHost;
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
    if (!free_bytes || !total_bytes) return fail(cudaErrorInvalidValue, "cudaMemGetInfo: NULL argument");
    int dev;
    if (cudaError_t e = ready(&dev)) return e;
    std::lock_guard<std::mutex> g(g_mem_mu);
    size_t cap = g_cfg.capacity[dev], used = g_used[dev];
    *free_bytes = used < cap ? cap - used : 0;
    *total_bytes = cap;
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind) {
    log_line("sync copy %s %zu", kind_short(kind), count); /* the host waits for the device's queued work */
    return memcpy_impl("cudaMemcpy", dst, src, count, kind);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t s) {
    int sdev;
    if (cudaError_t e = check_stream("cudaMemcpyAsync", s, &sdev)) return e;
    log_line("copy %p %s %zu", (void *)s, kind_short(kind), count);
    return memcpy_impl("cudaMemcpyAsync", dst, src, count, kind);
}

cudaError_t cudaMemset(void *ptr, int value, size_t count) { return memset_impl("cudaMemset", ptr, value, count); }

cudaError_t cudaMemsetAsync(void *ptr, int value, size_t count, cudaStream_t s) {
    int sdev;
    if (cudaError_t e = check_stream("cudaMemsetAsync", s, &sdev)) return e;
    return memset_impl("cudaMemsetAsync", ptr, value, count);
}

/* ---- streams ---------------------------------------------------------------------------------------------- */
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags) {
    if (!stream) return fail(cudaErrorInvalidValue, "cudaStreamCreate: stream is NULL");
    if (flags & ~1u) return fail(cudaErrorInvalidValue, "cudaStreamCreateWithFlags: unknown flags 0x%x", flags);
    int dev;
    if (cudaError_t e = ready(&dev)) return e;
    cudaStream_t s = new CUstream_st{dev, flags};
    std::lock_guard<std::mutex> g(g_handle_mu);
    g_streams.insert(s);
    *stream = s;
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    return destroy_live(g_streams, stream, "cudaStreamDestroy", "stream");
}

/* cudaStreamSynchronize and cudaStreamQuery (everything already ran); a synchronize, which on a GPU makes the
 * host wait, is logged as "sync". */
static cudaError_t stream_drain(const char *fn, cudaStream_t stream, bool waits) {
    if (cudaError_t e = configured()) return e;
    int dev;
    if (cudaError_t e = check_stream(fn, stream, &dev)) return e;
    if (waits) log_line("sync %p", (void *)stream);
    {
        std::lock_guard<std::mutex> g(g_handle_mu);
        drain(dev); /* one stream per device in gpumemnet: its events are this stream's */
    }
    return sticky(dev);
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) { return stream_drain("cudaStreamSynchronize", stream, true); }

cudaError_t cudaStreamQuery(cudaStream_t stream) { return stream_drain("cudaStreamQuery", stream, false); }

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
    int dev;
    if (cudaError_t e = ready(&dev)) return e;
    if (cudaError_t e = check_stream("cudaStreamWaitEvent", stream, &dev)) return e;
    (void)flags;
    std::lock_guard<std::mutex> g(g_handle_mu);
    cudaError_t e = check_event("cudaStreamWaitEvent", event);
    if (e == cudaSuccess) log_line("wait %p %p", (void *)stream, (void *)event);
    return e;
}

/* ---- events ----------------------------------------------------------------------------------------------- */
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags) {
    if (!event) return fail(cudaErrorInvalidValue, "cudaEventCreate: event is NULL");
    if (flags & ~0xfu) return fail(cudaErrorInvalidValue, "cudaEventCreateWithFlags: unknown flags 0x%x", flags);
    int dev;
    if (cudaError_t e = ready(&dev)) return e;
    cudaEvent_t ev = new CUevent_st{dev, flags, false, false, {}};
    std::lock_guard<std::mutex> g(g_handle_mu);
    g_events.insert(ev);
    *event = ev;
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
    int dev;
    if (cudaError_t e = ready(&dev)) return e;
    if (cudaError_t e = check_stream("cudaEventRecord", stream, &dev)) return e;
    std::lock_guard<std::mutex> g(g_handle_mu);
    if (cudaError_t e = check_event("cudaEventRecord", event)) return e;
    event->recorded = true;
    event->pending = g_hold;
    log_line("record %p %p", (void *)stream, (void *)event);
    event->when = std::chrono::steady_clock::now();
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
    int dev;
    if (cudaError_t e = ready(&dev)) return e;
    std::lock_guard<std::mutex> g(g_handle_mu);
    if (cudaError_t e = check_event("cudaEventQuery", event)) return e;
    return event->pending ? cudaErrorNotReady : cudaSuccess; /* not ready is no error: the last error stays */
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
    int dev;
    if (cudaError_t e = ready(&dev)) return e;
    std::lock_guard<std::mutex> g(g_handle_mu);
    if (cudaError_t e = check_event("cudaEventSynchronize", event)) return e;
    log_line("sync event %p", (void *)event);
    event->pending = false;
    return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
    if (!ms) return fail(cudaErrorInvalidValue, "cudaEventElapsedTime: ms is NULL");
    int dev;
    if (cudaError_t e = ready(&dev)) return e;
    std::lock_guard<std::mutex> g(g_handle_mu);
    if (!g_events.count(start) || !g_events.count(end))
        return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: not a live event");
    if (!start->recorded || !end->recorded)
        return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: an event was never recorded");
    if ((start->flags | end->flags) & cudaEventDisableTiming)
        return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: an event has cudaEventDisableTiming");
    *ms = std::chrono::duration<float, std::milli>(end->when - start->when).count();
    return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) { return destroy_live(g_events, event, "cudaEventDestroy", "event"); }

/* ---- errors ----------------------------------------------------------------------------------------------- */
cudaError_t cudaGetLastError(void) {
    cudaError_t e = tl_last;
    tl_last = cudaSuccess;
    if (e == cudaSuccess && !config().error[0] && g_cfg.ndev > 0)
        e = (cudaError_t)g_sticky[tl_device].load(); /* a crashed device keeps reporting */
    return e;
}

cudaError_t cudaPeekAtLastError(void) {
    cudaError_t e = tl_last;
    if (e == cudaSuccess && !config().error[0] && g_cfg.ndev > 0) e = (cudaError_t)g_sticky[tl_device].load();
    return e;
}

const char *cudaGetErrorName(cudaError_t e) {
    switch (e) {
#define GM_EMU_NAME(x) case x: return #x;
    GM_EMU_NAME(cudaSuccess)
    GM_EMU_NAME(cudaErrorInvalidValue)
    GM_EMU_NAME(cudaErrorMemoryAllocation)
    GM_EMU_NAME(cudaErrorInitializationError)
    GM_EMU_NAME(cudaErrorCudartUnloading)
    GM_EMU_NAME(cudaErrorInvalidConfiguration)
    GM_EMU_NAME(cudaErrorInvalidPitchValue)
    GM_EMU_NAME(cudaErrorInvalidSymbol)
    GM_EMU_NAME(cudaErrorInvalidDevicePointer)
    GM_EMU_NAME(cudaErrorInvalidMemcpyDirection)
    GM_EMU_NAME(cudaErrorInsufficientDriver)
    GM_EMU_NAME(cudaErrorInvalidDeviceFunction)
    GM_EMU_NAME(cudaErrorNoDevice)
    GM_EMU_NAME(cudaErrorInvalidDevice)
    GM_EMU_NAME(cudaErrorInvalidResourceHandle)
    GM_EMU_NAME(cudaErrorNotReady)
    GM_EMU_NAME(cudaErrorIllegalAddress)
    GM_EMU_NAME(cudaErrorLaunchOutOfResources)
    GM_EMU_NAME(cudaErrorLaunchFailure)
    GM_EMU_NAME(cudaErrorNotPermitted)
    GM_EMU_NAME(cudaErrorNotSupported)
    GM_EMU_NAME(cudaErrorUnknown)
#undef GM_EMU_NAME
    }
    return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorCudartUnloading: return "driver shutting down";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidPitchValue: return "invalid pitch argument";
    case cudaErrorInvalidSymbol: return "invalid device symbol";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorInvalidDeviceFunction: return "invalid device function";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: {
        std::lock_guard<std::mutex> g(g_launch_msg_mu);
        return g_launch_msg_code == e && g_launch_msg[0] ? g_launch_msg : "an illegal memory access was encountered";
    }
    case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
    case cudaErrorLaunchFailure: {
        /* the emulator knows why: say it (the text stays until the next failure or gm_emu_reset) */
        std::lock_guard<std::mutex> g(g_launch_msg_mu);
        return g_launch_msg_code == e && g_launch_msg[0] ? g_launch_msg : "unspecified launch failure";
    }
    case cudaErrorNotPermitted: return "operation not permitted";
    case cudaErrorNotSupported: return "operation not supported";
    case cudaErrorUnknown: return "unknown error";
    }
    return "unrecognized error code";
}

/* ---- emulator only ---------------------------------------------------------------------------------------- */
void gm_emu_reset(void) {
    for (int i = 0; i < kMaxDevices; i++) g_sticky[i].store(cudaSuccess);
    {
        std::lock_guard<std::mutex> g(g_launch_msg_mu);
        g_launch_msg[0] = '\0';
        g_launch_msg_code = cudaSuccess;
    }
    tl_last = cudaSuccess;
    tl_message[0] = '\0';
}

const char *gm_emu_last_message(void) { return tl_message; }

size_t gm_emu_stream_log(int on, char *buf, size_t cap) {
    std::lock_guard<std::mutex> g(g_log_mu);
    if (!buf) return g_log.size();
    size_t n = cap ? std::min(cap - 1, g_log.size()) : 0;
    if (cap) {
        memcpy(buf, g_log.data(), n);
        buf[n] = '\0';
    }
    g_log.clear();
    g_log_on.store(on != 0);
    return n;
}

void gm_emu_log_launch(const void *stream) { log_line("kernel %p", stream); }

void gm_emu_hold_streams(int on) {
    std::lock_guard<std::mutex> g(g_handle_mu);
    g_hold = on != 0;
    if (!on) drain(-1);
}

cudaError_t gm_emu_stream_ready(const char *fn, cudaStream_t stream) {
    int dev;
    if (cudaError_t e = ready(&dev)) return e;
    return check_stream(fn, stream, &dev);
}

cudaError_t gm_emu_register_symbol(const void *symbol, size_t size) {
    if (cudaError_t e = configured()) return e;
    std::lock_guard<std::mutex> g(g_mem_mu);
    g_symbols[(uintptr_t)symbol] = size;
    return cudaSuccess;
}

cudaError_t gm_emu_set_device_memory(int device, size_t bytes) {
    if (cudaError_t e = check_device_index(device)) return e;
    std::lock_guard<std::mutex> g(g_mem_mu);
    g_cfg.capacity[device] = bytes;
    return cudaSuccess;
}

} /* extern "C" */
