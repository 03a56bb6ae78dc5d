/* csrc/cuda_vmm.c — the CUDA driver's virtual memory management, for expandable segments (alloc_expand.c through
 * alloc_sources.c): reserve a range of device addresses once, then create physical memory a granule at a time and map
 * it into the range, so that one segment grows (and shrinks in its middle) without moving any block.
 *
 * The driver functions are reached through cudaGetDriverEntryPointByVersion, not by linking libcuda: the build links
 * cudart statically so that it imports on machines with no driver (DESIGN.md "Build"), and a libcuda dependency would
 * break that. The emulator (GPUMEMNET_CUDA=emu) answers the same query with its stand-ins (kernels/cuda/emu/
 * emu_vmm.cpp), so this file is the same in both builds. */
#include "gm.h"

#ifdef GM_WITH_CUDA
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>

int gm_cuda_check_driver(int code, const char *call, const char *file, int line); /* cuda.c */
int gm_cuda_check_cudart(cudaError_t st, const char *call, const char *file, int line);
#define DRV_CHECK(call) gm_cuda_check_driver((int)(call), #call, __FILE__, __LINE__)
#define RT_CHECK(call) gm_cuda_check_cudart((call), #call, __FILE__, __LINE__)

static struct {
    CUresult (*granularity)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
    CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*address_free)(CUdeviceptr, size_t);
    CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
    CUresult (*release)(CUmemGenericAllocationHandle);
    CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
    CUresult (*unmap)(CUdeviceptr, size_t);
    CUresult (*set_access)(CUdeviceptr, const size_t, const CUmemAccessDesc *, size_t);
} drv;
static int drv_state; /* 0: not looked up yet, 1: usable, -1: missing (recorded once) */
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;

static int entry(const char *name, void **fn) {
    enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    /* 12000: the cuMem* functions as of CUDA 12 (their ABI has not changed since 10.2) */
#if CUDART_VERSION >= 12050
    if (RT_CHECK(cudaGetDriverEntryPointByVersion(name, fn, 12000, cudaEnableDefault, &q))) return -1;
#else
    if (RT_CHECK(cudaGetDriverEntryPoint(name, fn, cudaEnableDefault, &q))) return -1;
#endif
    return q == cudaDriverEntryPointSuccess && *fn ? 0 : -1;
}

static void lookup(void) {
    int bad = entry("cuMemGetAllocationGranularity", (void **)&drv.granularity) ||
              entry("cuMemAddressReserve", (void **)&drv.reserve) ||
              entry("cuMemAddressFree", (void **)&drv.address_free) || entry("cuMemCreate", (void **)&drv.create) ||
              entry("cuMemRelease", (void **)&drv.release) || entry("cuMemMap", (void **)&drv.map) ||
              entry("cuMemUnmap", (void **)&drv.unmap) || entry("cuMemSetAccess", (void **)&drv.set_access);
    drv_state = bad ? -1 : 1;
}

static int ready(void) {
    pthread_once(&drv_once, lookup);
    return drv_state == 1;
}

static CUmemAllocationProp device_prop(int device) {
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    return prop;
}

/* The granule physical memory is created and mapped in (2 MiB on current GPUs); 0 when the driver cannot. */
size_t gm_cuda_vmm_granularity(int device) {
    if (!ready()) return 0;
    size_t g = 0;
    CUmemAllocationProp prop = device_prop(device);
    if (DRV_CHECK(drv.granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))) return 0;
    return g;
}

void *gm_cuda_vmm_reserve(int device, size_t size) {
    CUdeviceptr p = 0;
    if (!ready() || RT_CHECK(cudaSetDevice(device)) || DRV_CHECK(drv.reserve(&p, size, 0, 0, 0))) return NULL;
    return (void *)(uintptr_t)p;
}

void gm_cuda_vmm_free(void *base, size_t size) {
    if (ready()) (void)DRV_CHECK(drv.address_free((CUdeviceptr)(uintptr_t)base, size));
}

/* New physical memory of `size` bytes on device, mapped at addr and made readable and writable by it: the handle,
 * or NULL (*out_of_memory when the device is full). */
void *gm_cuda_vmm_map(int device, void *addr, size_t size, int *out_of_memory) {
    *out_of_memory = 0;
    if (!ready()) return NULL;
    CUmemAllocationProp prop = device_prop(device);
    CUmemGenericAllocationHandle h = 0;
    CUresult st = drv.create(&h, size, &prop, 0);
    if (st == CUDA_ERROR_OUT_OF_MEMORY) {
        *out_of_memory = 1;
        return NULL;
    }
    if (DRV_CHECK(st)) return NULL;
    CUdeviceptr p = (CUdeviceptr)(uintptr_t)addr;
    if (DRV_CHECK(drv.map(p, size, 0, h, 0))) {
        (void)drv.release(h);
        return NULL;
    }
    CUmemAccessDesc access;
    memset(&access, 0, sizeof access);
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (DRV_CHECK(drv.set_access(p, size, &access, 1))) {
        (void)drv.unmap(p, size);
        (void)drv.release(h);
        return NULL;
    }
    /* The handle can go at once: the mapping keeps the memory until cuMemUnmap. */
    (void)DRV_CHECK(drv.release(h));
    return (void *)(uintptr_t)1;
}

/* Unmapping does not wait for the device (unlike cudaFree): before a batch of unmaps the allocator waits here for the
 * work queued on the device, which may still read the granules' last blocks. */
int gm_cuda_vmm_sync(int device) { return RT_CHECK(cudaSetDevice(device)) || RT_CHECK(cudaDeviceSynchronize()); }

/* The physical memory goes back to the device with the mapping (its handle was released when it was mapped). */
void gm_cuda_vmm_unmap(void *addr, size_t size, void *handle) {
    (void)handle;
    if (ready()) (void)DRV_CHECK(drv.unmap((CUdeviceptr)(uintptr_t)addr, size));
}
#endif /* GM_WITH_CUDA */
