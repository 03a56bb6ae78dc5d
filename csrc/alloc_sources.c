/* csrc/alloc_sources.c — segment sources beyond posix_memalign and cudaMalloc (allocator.h lists them), at the
 * bottom of the allocator: files mapped into memory for the CPU fallback, and the address space and physical memory
 * of expandable segments (the CUDA driver's virtual memory management through cuda_vmm.c; fake addresses on meta,
 * where nothing is mapped but every byte is counted the same way). */
#include "allocator.h"
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#ifdef GM_WITH_CUDA
/* cuda_vmm.c */
size_t gm_cuda_vmm_granularity(int device);
void *gm_cuda_vmm_reserve(int device, size_t size);
void gm_cuda_vmm_free(void *base, size_t size);
void *gm_cuda_vmm_map(int device, void *addr, size_t size, int *out_of_memory);
void gm_cuda_vmm_unmap(void *addr, size_t size, void *handle);
int gm_cuda_vmm_sync(int device);
#endif

/* O_TMPFILE makes a file with no name at all; where the file system cannot, a named file is unlinked at once. */
static int anonymous_file(int dirfd) {
#ifdef O_TMPFILE
    int fd = openat(dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)) return fd;
#endif
    static unsigned long counter;
    char name[64];
    for (int tries = 0; tries < 100; tries++) {
        snprintf(name, sizeof name, ".gpumemnet-fallback-%ld-%lu", (long)getpid(),
                 __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
        int fd = openat(dirfd, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd >= 0) {
            unlinkat(dirfd, name, 0);
            return fd;
        }
        if (errno != EEXIST) return -1;
    }
    return -1;
}

char *gm_file_segment_alloc(int dirfd, size_t size, int *out_of_space) {
    *out_of_space = 0;
    int fd = anonymous_file(dirfd);
    if (fd < 0) return NULL;
    /* posix_fallocate, not ftruncate: a sparse file that cannot be filled later would kill the process with SIGBUS
     * at the first write; allocated now, a full disk is an ordinary out-of-memory here. */
    int rc = posix_fallocate(fd, 0, (off_t)size);
    if (rc == EOPNOTSUPP || rc == EINVAL) rc = ftruncate(fd, (off_t)size) == 0 ? 0 : errno;
    if (rc != 0) {
        *out_of_space = rc == ENOSPC || rc == EFBIG || rc == EDQUOT;
        close(fd);
        return NULL;
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd); /* the mapping keeps the file alive; the file goes with the mapping */
    if (p == MAP_FAILED) {
        *out_of_space = errno == ENOMEM;
        return NULL;
    }
    return p;
}

void gm_file_segment_free(char *p, size_t size) { munmap(p, size); }

/* ---- expandable segments' address space and memory ---------------------------------------------------------------
 * Meta hands out fake addresses (never dereferenced) from a range of its own and maps nothing: the handle is a
 * token. The granularity is the one CUDA reports on current GPUs (2 MiB), so an estimate maps the same granules. */
#define META_GRANULE (2 * MiB)
static uintptr_t meta_vm_next = (uintptr_t)1 << 52;

size_t gm_vm_granularity(gm_device dev) {
    if (dev.type == GM_DEV_META) return META_GRANULE;
#ifdef GM_WITH_CUDA
    if (dev.type == GM_DEV_CUDA) return gm_cuda_vmm_granularity(dev.index);
#endif
    return 0;
}

char *gm_vm_reserve(gm_device dev, size_t size) {
    if (dev.type == GM_DEV_META) {
        char *p = (char *)__atomic_fetch_add(&meta_vm_next, size + META_GRANULE, __ATOMIC_RELAXED);
        return p;
    }
#ifdef GM_WITH_CUDA
    if (dev.type == GM_DEV_CUDA) return gm_cuda_vmm_reserve(dev.index, size);
#endif
    return NULL;
}

void gm_vm_release(gm_device dev, char *base, size_t size) {
#ifdef GM_WITH_CUDA
    if (dev.type == GM_DEV_CUDA) gm_cuda_vmm_free(base, size);
#endif
    (void)dev, (void)base, (void)size;
}

void *gm_vm_map(gm_device dev, char *addr, size_t size, int *out_of_memory) {
    *out_of_memory = 0;
    if (dev.type == GM_DEV_META) return (void *)addr; /* any non-NULL token */
#ifdef GM_WITH_CUDA
    if (dev.type == GM_DEV_CUDA) return gm_cuda_vmm_map(dev.index, addr, size, out_of_memory);
#endif
    (void)size;
    return NULL;
}

void gm_vm_sync(gm_device dev) {
#ifdef GM_WITH_CUDA
    if (dev.type == GM_DEV_CUDA) (void)gm_cuda_vmm_sync(dev.index);
#endif
    (void)dev;
}

void gm_vm_unmap(gm_device dev, char *addr, size_t size, void *handle) {
#ifdef GM_WITH_CUDA
    if (dev.type == GM_DEV_CUDA) gm_cuda_vmm_unmap(addr, size, handle);
#endif
    (void)dev, (void)addr, (void)size, (void)handle;
}
