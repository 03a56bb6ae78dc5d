/* kernels/cuda/emu/emu_vmm.cpp — stand-ins for the CUDA driver's virtual memory management (include/cuda.h), the
 * one part of the driver API the emulator has, for expandable segments (csrc/cuda_vmm.c), and the runtime's
 * entry-point query that hands them out.
 *
 * As on a GPU: cuMemAddressReserve reserves address space only (here an mmap with PROT_NONE: no memory); cuMemCreate
 * charges physical memory to the device against its capacity (GPUMEMNET_EMU_MEMORY, shared with cudaMalloc, so
 * CUDA_ERROR_OUT_OF_MEMORY comes where a GPU would give it); cuMemMap places it in a reserved range and
 * cuMemSetAccess makes it readable and writable (mprotect; fresh memory is poisoned like cudaMalloc's), so a kernel
 * touching a page that is not mapped and accessible faults, as it would on a GPU. A handle may be released while
 * mapped: its memory goes back when it is unmapped. Reserved ranges count as the device's memory for the pointer
 * and copy checks (emu_internal.h add_vm_range). */
#include "emu_internal.h"

#include <cuda.h>
#include <map>
#include <mutex>
#include <string.h>
#include <sys/mman.h>

namespace {

const size_t kGranule = (size_t)2 << 20; /* what current GPUs report */

struct Phys {
    size_t size;
    int device;
    bool released, mapped;
};
struct Mapping {
    size_t size;
    CUmemGenericAllocationHandle handle;
};

std::mutex g_mu;
std::map<CUmemGenericAllocationHandle, Phys> g_phys;
CUmemGenericAllocationHandle g_next_handle = 1;
std::map<uintptr_t, size_t> g_reserved; /* base -> size */
std::map<uintptr_t, Mapping> g_mapped;  /* address -> mapping */

/* Whether [p, p + n) lies inside one reserved range; g_mu held. */
bool in_reserved(uintptr_t p, size_t n) {
    auto it = g_reserved.upper_bound(p);
    if (it == g_reserved.begin()) return false;
    --it;
    return p - it->first < it->second && n <= it->second - (p - it->first);
}

/* Whether [p, p + n) overlaps a mapping; g_mu held. */
bool overlaps_mapping(uintptr_t p, size_t n) {
    auto it = g_mapped.lower_bound(p);
    if (it != g_mapped.end() && it->first < p + n) return true;
    if (it == g_mapped.begin()) return false;
    --it;
    return it->first + it->second.size > p;
}

bool valid_device_prop(const CUmemAllocationProp *prop) {
    int n = 0;
    return prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE && cudaGetDeviceCount(&n) == cudaSuccess &&
           prop->location.id >= 0 && prop->location.id < n;
}

void drop_phys(std::map<CUmemGenericAllocationHandle, Phys>::iterator it) {
    gm_emu::uncharge(it->second.device, it->second.size);
    g_phys.erase(it);
}

} // namespace

extern "C" {

CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                       CUmemAllocationGranularity_flags option) {
    (void)option;
    if (!granularity || !valid_device_prop(prop)) return CUDA_ERROR_INVALID_VALUE;
    *granularity = kGranule;
    return CUDA_SUCCESS;
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags) {
    if (!ptr || size == 0 || size % kGranule || (alignment && alignment != kGranule) || addr || flags)
        return CUDA_ERROR_INVALID_VALUE;
    /* one granule more, to align the start */
    void *raw = mmap(nullptr, size + kGranule, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    uintptr_t base = ((uintptr_t)raw + kGranule - 1) / kGranule * kGranule;
    if (base > (uintptr_t)raw) munmap(raw, base - (uintptr_t)raw);
    size_t tail = (uintptr_t)raw + size + kGranule - (base + size);
    if (tail) munmap((void *)(base + size), tail);
    {
        std::lock_guard<std::mutex> g(g_mu);
        g_reserved[base] = size;
    }
    gm_emu::add_vm_range(base, size, gm_emu::current_device());
    *ptr = (CUdeviceptr)base;
    return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
    {
        std::lock_guard<std::mutex> g(g_mu);
        auto it = g_reserved.find((uintptr_t)ptr);
        if (it == g_reserved.end() || it->second != size || overlaps_mapping((uintptr_t)ptr, size))
            return CUDA_ERROR_INVALID_VALUE; /* not a reservation, or still mapped */
        g_reserved.erase(it);
    }
    gm_emu::remove_vm_range((uintptr_t)ptr);
    munmap((void *)(uintptr_t)ptr, size);
    return CUDA_SUCCESS;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                     unsigned long long flags) {
    if (!handle || size == 0 || size % kGranule || flags || !valid_device_prop(prop) ||
        prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    if (!gm_emu::charge(prop->location.id, size)) return CUDA_ERROR_OUT_OF_MEMORY;
    std::lock_guard<std::mutex> g(g_mu);
    *handle = g_next_handle++;
    g_phys[*handle] = Phys{size, prop->location.id, false, false};
    return CUDA_SUCCESS;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
    std::lock_guard<std::mutex> g(g_mu);
    auto it = g_phys.find(handle);
    if (it == g_phys.end() || it->second.released) return CUDA_ERROR_INVALID_VALUE;
    it->second.released = true;
    if (!it->second.mapped) drop_phys(it);
    return CUDA_SUCCESS;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
    std::lock_guard<std::mutex> g(g_mu);
    auto it = g_phys.find(handle);
    if (it == g_phys.end() || it->second.released || it->second.mapped || offset || flags ||
        size != it->second.size || (uintptr_t)ptr % kGranule || !in_reserved((uintptr_t)ptr, size) ||
        overlaps_mapping((uintptr_t)ptr, size))
        return CUDA_ERROR_INVALID_VALUE;
    it->second.mapped = true;
    g_mapped[(uintptr_t)ptr] = Mapping{size, handle};
    return CUDA_SUCCESS;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
    std::lock_guard<std::mutex> g(g_mu);
    auto m = g_mapped.find((uintptr_t)ptr);
    if (m == g_mapped.end() || m->second.size != size) return CUDA_ERROR_INVALID_VALUE;
    /* the memory is gone: a later mapping here starts from fresh (poisoned) pages, never from these */
    madvise((void *)(uintptr_t)ptr, size, MADV_DONTNEED);
    mprotect((void *)(uintptr_t)ptr, size, PROT_NONE);
    auto it = g_phys.find(m->second.handle);
    g_mapped.erase(m);
    if (it != g_phys.end()) {
        it->second.mapped = false;
        if (it->second.released) drop_phys(it);
    }
    return CUDA_SUCCESS;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count) {
    if (!desc || count != 1 || desc->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard<std::mutex> g(g_mu);
    /* every page of the range must be mapped */
    for (uintptr_t p = (uintptr_t)ptr; p < (uintptr_t)ptr + size;) {
        auto m = g_mapped.find(p);
        if (m == g_mapped.end()) return CUDA_ERROR_INVALID_VALUE;
        p += m->second.size;
    }
    int prot = desc->flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE ? PROT_READ | PROT_WRITE
               : desc->flags == CU_MEM_ACCESS_FLAGS_PROT_READ    ? PROT_READ
                                                                 : PROT_NONE;
    if (mprotect((void *)(uintptr_t)ptr, size, prot | (prot ? PROT_WRITE : 0)) != 0) return CUDA_ERROR_INVALID_VALUE;
    if (prot) memset((void *)(uintptr_t)ptr, gm_emu::poison_byte(), size);
    if (prot == PROT_READ) mprotect((void *)(uintptr_t)ptr, size, PROT_READ);
    return CUDA_SUCCESS;
}

cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr, unsigned int cudaVersion,
                                             unsigned long long flags,
                                             enum cudaDriverEntryPointQueryResult *driverStatus) {
    (void)cudaVersion, (void)flags;
    if (!symbol || !funcPtr) return cudaErrorInvalidValue;
    static const struct {
        const char *name;
        void *fn;
    } table[] = {
        {"cuMemGetAllocationGranularity", (void *)cuMemGetAllocationGranularity},
        {"cuMemAddressReserve", (void *)cuMemAddressReserve},
        {"cuMemAddressFree", (void *)cuMemAddressFree},
        {"cuMemCreate", (void *)cuMemCreate},
        {"cuMemRelease", (void *)cuMemRelease},
        {"cuMemMap", (void *)cuMemMap},
        {"cuMemUnmap", (void *)cuMemUnmap},
        {"cuMemSetAccess", (void *)cuMemSetAccess},
    };
    *funcPtr = nullptr;
    for (const auto &e : table)
        if (!strcmp(e.name, symbol)) *funcPtr = e.fn;
    if (driverStatus) *driverStatus = *funcPtr ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
    return cudaSuccess;
}

} /* extern "C" */
