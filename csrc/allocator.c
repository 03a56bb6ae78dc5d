/* csrc/allocator.c — the one caching allocator (DESIGN.md "The allocator"), written once over a segment source:
 * malloc for cpu, a counter of fake addresses for meta (simulation), cudaMalloc for cuda:N.
 * Because the policy is shared, a program run on meta makes the same decisions, byte for byte, as on cpu.
 *
 * Policy (the same as PyTorch's CUDA caching allocator, so figures are comparable and familiar):
 *   - every request is rounded up to a multiple of 512 bytes (blocks stay 512-aligned: SIMD- and cache-friendly);
 *   - requests <= 1 MiB come from the small pool, carved out of 2 MiB segments;
 *   - requests < 10 MiB come from the large pool, carved out of 20 MiB segments;
 *   - larger requests get a segment of their own, rounded up to 2 MiB;
 *   - best fit: the smallest free block of the pool that is large enough (ties: the oldest segment, then the
 *     lowest address in it; PyTorch takes the lowest address, but where the system puts a new segment is not
 *     something meta can copy, while the order segments were made in is: so meta decides as the device does);
 *   - a block is split when the rest is worth keeping (>= 512 B in the small pool, > 1 MiB in the large pool);
 *     freed blocks merge with free neighbours of the same segment;
 *   - when a new segment would cross the limit or the capacity, a segment of exactly the rounded request is
 *     tried instead; then the cache (segments holding no live block) is released and the request retried;
 *     only then OutOfMemoryError is raised.
 * Statistics are kept per device and per category, current and peak. Each device's allocator has a lock
 * (allocator.h), so allocation and free are safe from any thread, with or without the GIL.
 *
 * Why PyTorch's sizes on the GPU too: cudaMalloc and cudaFree are slow (cudaFree synchronises the device), so
 * segments are few and reused; 2 MiB small segments pack the many tiny tensors of a step (biases, BN
 * statistics, scalars) together, 20 MiB large segments serve the mid-sized ones, and a request of 10 MiB or more
 * (activations, weights) gets a segment rounded to 2 MiB so that at most 2 MiB is lost per big tensor. Blocks are
 * only handed to the compute stream (one per device), so a freed block is reused in stream order without an event;
 * a block offload's copy stream used (cuda.c _copy_async) is parked on the pending list until its event passed.
 * GPUMEMNET_NO_CACHING=1 (read at import) gives every block its own exact segment and returns it at once: slow,
 * but then compute-sanitizer (cuda) or AddressSanitizer/valgrind (cpu) see every tensor's true bounds.
 *
 * Pinned host memory (Tensor.pin_memory) is a fourth instance of the same allocator over cudaHostAlloc: page-locked
 * memory is slow to get and to give back (cudaHostAlloc maps it for the GPU; cudaFreeHost synchronises), which is
 * exactly what caching is for. Its statistics are those of a pseudo-device "cpu-pinned" (gm.memory.memory_stats(
 * "cpu-pinned"), its own limit and empty_cache), kept apart from "cpu" so that a CPU limit or a CPU estimate is not
 * changed by staging buffers. A non-blocking copy from a pinned block records an event on the device's stream
 * (gm_block_record_stream); when such a block is freed before the stream passed the event, it stays allocated (on
 * a pending list) and is only made reusable once the event has passed: the next pinned allocation or empty_cache
 * looks. So `x.pin_memory().cuda(non_blocking=True)` may drop the pinned tensor at once, as in PyTorch.
 *
 * gm_try_alloc is gm_alloc for callers with a fallback (cuDNN algorithms tried best first): the same policy,
 * cache release and retry included, but running out of memory returns NULL with no exception and is not counted
 * in num_ooms; an OutOfMemoryError (and its report) is only built by the allocation that finally fails.
 *
 * History (off by default): a per-device ring of the newest N events, one per alloc, free and category retag
 * (a retag is a pair: -bytes in the old category, +bytes in the new one, so summing a category's deltas gives
 * its exact curve). Disabled, the alloc/free paths pay one pointer test.
 *
 * A run on meta that stands for a GPU also has host memory (an offloading optimizer's fp32 masters and state,
 * activations saved on the CPU): a fifth instance, "meta-host", hands out fake addresses like meta's but counts
 * apart, so that an estimate gives the device peak and the host peak separately. Its tensors are meta tensors
 * (ops on them run nothing); only their bytes are counted elsewhere (gm_alloc_pinned on meta).
 *
 * This file is the core (pools, segments, blocks, sources, the lock); the OOM report is alloc_report.c, the
 * statistics, limits and history as Python sees them alloc_stats.c, the per-thread category and scope
 * category.c. */
#include "allocator.h"
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static gm_allocator cpu_alloc, meta_alloc, pinned_alloc, meta_host_alloc;
/* Each device's fallback allocator (alloc_policy.c switches it on): host memory for cuda:N and meta, files for cpu. */
static gm_allocator cpu_fallback, meta_fallback;
#ifdef GM_WITH_CUDA
static gm_allocator cuda_alloc[GM_MAX_CUDA_DEVICES], cuda_fallback[GM_MAX_CUDA_DEVICES];
/* Guards the first use of a CUDA device's allocator (its setup), not the allocators themselves. */
static pthread_mutex_t cuda_setup_lock = PTHREAD_MUTEX_INITIALIZER;
#endif
static int no_caching; /* GPUMEMNET_NO_CACHING=1 */

#ifdef GM_WITH_CUDA
/* csrc/cuda.c */
void *gm_cuda_segment_alloc(int i, size_t size, int *out_of_memory);
void gm_cuda_segment_free(int i, void *p);
int gm_cuda_mem_info(int i, size_t *free_bytes, size_t *total);
int gm_cuda_device_count(void);
const char *gm_cuda_last_error(void);
void *gm_cuda_host_alloc(size_t size, int *out_of_memory);
void *gm_cuda_host_alloc_mapped(size_t size, int *out_of_memory);
void gm_cuda_host_free(void *p);
int gm_cuda_event_record(void **event, int *event_dev, int device);
int gm_cuda_event_record_copy(void **event, int *event_dev, int device);
int gm_cuda_event_done(void *event);
void gm_cuda_event_destroy(void *event);
#endif

/* ---- segment sources ---------------------------------------------------------------------------- */
static char *source_alloc(gm_allocator *A, size_t size) {
    if (A->location == GM_LOC_FILE && A->dev.type != GM_DEV_META) {
        int full = 0;
        char *p = gm_file_segment_alloc(A->fallback_fd_dir, size, &full);
        if (!p && !full) A->source_failed = 1;
        return p;
    }
    if (A->dev.type == GM_DEV_META) {
        /* Fake, never dereferenced, unique and 512-aligned addresses. */
        char *p = (char *)A->meta_next;
        A->meta_next += size + HUGE_ROUND;
        return p;
    }
#ifdef GM_WITH_CUDA
    if (A->dev.type == GM_DEV_CUDA || A->pinned) {
        int oom = 0;
        char *p = A->pinned                      ? gm_cuda_host_alloc(size, &oom)
                  : A->location == GM_LOC_HOST ? gm_cuda_host_alloc_mapped(size, &oom)
                                               : gm_cuda_segment_alloc(A->dev.index, size, &oom);
        if (!p && !oom) A->source_failed = 1;
        return p;
    }
#endif
    /* Straight from the kernel, not malloc: glibc serves a block below its mmap threshold from the heap, and the
     * threshold rises to the size of every mmapped block freed (up to 32 MiB). After the first 20 MiB segment
     * was released, later 2 and 10 MiB segments came from the heap, where Python's objects above them keep the
     * freed pages resident: RSS grew by ~20 MiB over 900 OOM-and-recover steps (tests/test_oom_recover.py).
     * munmap always returns a segment's pages. Page-aligned, as posix_memalign(4096) was. */
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : (char *)p;
}

static void source_free(gm_allocator *A, char *p, size_t size) {
    if (A->location == GM_LOC_FILE && A->dev.type != GM_DEV_META) {
        gm_file_segment_free(p, size);
        return;
    }
#ifdef GM_WITH_CUDA
    if (A->pinned || (A->location == GM_LOC_HOST && A->dev.type == GM_DEV_CUDA)) {
        gm_cuda_host_free(p);
        return;
    }
    if (A->dev.type == GM_DEV_CUDA) {
        gm_cuda_segment_free(A->dev.index, p);
        return;
    }
#endif
    if (A->dev.type != GM_DEV_META) munmap(p, size);
}

void gm_snapshot_peak(gm_allocator *A, const char *scope, int category, size_t request) {
    for (int i = 0; i < GM_NCAT; i++) A->at_peak[i] = A->cat[i].current;
    A->peak_scope = scope;
    A->peak_category = category;
    A->peak_request = request;
}

/* ---- devices ---------------------------------------------------------------------------------- */
static size_t physical_memory(void) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return (pages > 0 && page > 0) ? (size_t)pages * (size_t)page : (size_t)1 << 40;
}

static void allocator_reset(gm_allocator *A, gm_device dev, size_t capacity) {
    memset(A, 0, sizeof *A);
    pthread_mutex_init(&A->lock, NULL);
    A->dev = dev;
    A->capacity = capacity;
}

int gm_allocator_init(void) {
    allocator_reset(&cpu_alloc, (gm_device){GM_DEV_CPU, 0}, physical_memory());
    /* 1 PiB: simulation is unbounded until told otherwise */
    allocator_reset(&meta_alloc, (gm_device){GM_DEV_META, 0}, (size_t)1 << 50);
    meta_alloc.meta_next = (uintptr_t)1 << 44;
    /* page-locked memory is host memory */
    allocator_reset(&pinned_alloc, (gm_device){GM_DEV_CPU, 0}, cpu_alloc.capacity);
    pinned_alloc.pinned = 1;
    allocator_reset(&meta_host_alloc, (gm_device){GM_DEV_META, 0}, (size_t)1 << 50);
    meta_host_alloc.meta_next = (uintptr_t)1 << 46; /* apart from meta's addresses: storages stay distinct */
    meta_host_alloc.host = 1;
    cpu_alloc.ready = meta_alloc.ready = pinned_alloc.ready = meta_host_alloc.ready = 1;
    const char *nc = getenv("GPUMEMNET_NO_CACHING");
    no_caching = nc && nc[0] && strcmp(nc, "0") != 0;
    return 0;
}

gm_allocator *gm_allocator_meta(void) { return &meta_alloc; }
int gm_no_caching(void) { return no_caching; }

#ifdef GM_WITH_CUDA
/* PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (what story 002's error message tells people to set), or the same
 * in GPUMEMNET_CUDA_ALLOC_CONF: a CUDA device starts with expandable segments, as gm.memory.set_allocator would set. */
static int wants_expandable(void) {
    const char *names[] = {"GPUMEMNET_CUDA_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"};
    for (int i = 0; i < 2; i++) {
        const char *v = getenv(names[i]), *k = v ? strstr(v, "expandable_segments:") : NULL;
        if (k) {
            k += strlen("expandable_segments:");
            return strncmp(k, "True", 4) == 0 || strncmp(k, "true", 4) == 0 || k[0] == '1';
        }
    }
    return 0;
}
#endif

/* A CUDA device's allocator is set up on first use; its capacity is the device's total memory. */
gm_allocator *gm_allocator_for(gm_device dev) {
    if (dev.type == GM_DEV_CPU) return &cpu_alloc;
    if (dev.type == GM_DEV_META) return &meta_alloc;
#ifdef GM_WITH_CUDA
    if (dev.index >= 0 && dev.index < GM_MAX_CUDA_DEVICES &&
        __atomic_load_n(&cuda_alloc[dev.index].ready, __ATOMIC_ACQUIRE))
        return &cuda_alloc[dev.index];
    int n = gm_cuda_device_count(); /* before the setup lock: the first call releases and retakes the GIL */
    if (dev.index < 0 || dev.index >= n) {
        const char *why = gm_cuda_last_error();
        if (n == 0)
            PyErr_Format(PyExc_RuntimeError, "device cuda:%d: no CUDA device is available (%s)", dev.index,
                         why[0] ? why : "none found");
        else
            PyErr_Format(PyExc_RuntimeError, "device cuda:%d: there %s %d CUDA device%s (cuda:0..cuda:%d)",
                         dev.index, n == 1 ? "is" : "are", n, n == 1 ? "" : "s", n - 1);
        return NULL;
    }
    gm_allocator *A = &cuda_alloc[dev.index];
    size_t free_bytes, total;
    int rc = 0;
    pthread_mutex_lock(&cuda_setup_lock);
    if (!A->ready) {
        rc = gm_cuda_mem_info(dev.index, &free_bytes, &total);
        if (rc == 0) {
            allocator_reset(A, dev, total);
            if (wants_expandable()) A->granule = gm_vm_granularity(dev), A->expandable = A->granule != 0;
            __atomic_store_n(&A->ready, 1, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&cuda_setup_lock);
    if (rc < 0) {
        PyErr_Format(PyExc_RuntimeError, "device cuda:%d: cannot read its memory size: %s", dev.index,
                     gm_cuda_last_error());
        return NULL;
    }
    return A;
#else
    PyErr_Format(PyExc_RuntimeError,
                 "device cuda:%d: this build of gpumemnet has no CUDA support (nvcc was not found when it was "
                 "built, or GPUMEMNET_CUDA=0); use device='cpu', or 'meta' to simulate a GPU", dev.index);
    return NULL;
#endif
}

/* A device name, or "cpu-pinned" for the pinned host memory allocator, or "meta-host" for a meta run's host
 * memory (statistics, limit, cache, history). */
gm_allocator *gm_allocator_parse(PyObject *arg) {
    if (PyUnicode_Check(arg) && PyUnicode_CompareWithASCIIString(arg, "cpu-pinned") == 0) return &pinned_alloc;
    if (PyUnicode_Check(arg) && PyUnicode_CompareWithASCIIString(arg, "meta-host") == 0) return &meta_host_alloc;
    gm_device dev;
    if (gm_parse_device(arg, &dev, "device") < 0) return NULL;
    return gm_allocator_for(dev);
}

/* ---- allocation ---------------------------------------------------------------------------------- */
/* A new segment of `size` bytes as one free block, or NULL (no exception) when the limit, the capacity or
 * the source says no. */
gm_block *gm_new_segment(gm_allocator *A, size_t size, int pool) {
    size_t reserved = (size_t)A->reserved.current;
    if (A->limit && reserved + size > A->limit) return NULL;
    if (reserved + size > A->capacity) return NULL;
    gm_segment *seg = calloc(1, sizeof *seg);
    if (!seg) return NULL;
    seg->base = source_alloc(A, size);
    if (!seg->base) { free(seg); return NULL; }
    seg->size = size;
    seg->pool = pool;
    seg->serial = ++A->segment_serial;
    gm_block *b = gm_new_block(A, seg, seg->base, size, pool);
    if (!b) { source_free(A, seg->base, size); free(seg); return NULL; }
    seg->head = b;
    seg->snext = A->segments;
    if (A->segments) A->segments->sprev = seg;
    A->segments = seg;
    stat_add(&A->reserved, (int64_t)size);
    A->num_segment_allocs++;
    gm_free_list_insert(A, b);
    return b;
}


static void process_pending(gm_allocator *A);

size_t gm_release_cached(gm_allocator *A) {
    size_t released = 0;
    if (A->pending) process_pending(A);
    for (int p = 0; p < 2; p++) {
        gm_block *b = A->free_list[p];
        while (b) {
            gm_block *next = b->fnext;
            if (!b->prev && !b->next && !b->seg->expandable) { /* the block is its whole segment */
                gm_free_list_remove(A, b);
                source_free(A, b->seg->base, b->seg->size);
                stat_add(&A->reserved, -(int64_t)b->seg->size);
                if (b->seg->persistent) A->persistent_reserved -= (int64_t)b->seg->size;
                released += b->seg->size;
                A->num_segment_frees++;
                gm_segment *sg = b->seg;
                if (sg->sprev) sg->sprev->snext = sg->snext; else A->segments = sg->snext;
                if (sg->snext) sg->snext->sprev = sg->sprev;
                free(sg);
                free(b);
            }
            b = next;
        }
    }
    if (A->expandable) released += gm_expandable_release(A);
    return released;
}

static gm_block *best_fit(gm_allocator *A, int pool, size_t size, int persistent) {
    for (gm_block *b = A->free_list[pool]; b; b = b->fnext)
        if (b->size >= size && (!persistent || b->seg->persistent) && b->seg->serial >= A->fresh_serial) return b;
    return NULL;
}

/* A new segment; for persistent state (state_first) only while the room a step needs besides the state
 * (transient_peak) stays free under the limit, and flagged so that later state shares it and nothing else counts
 * it as room. */
static gm_block *new_segment(gm_allocator *A, size_t size, int pool, int persistent) {
    if (persistent) {
        size_t cap = A->limit ? A->limit : A->capacity;
        /* the step's peak again, and room for its largest block besides: a later step's blocks may be laid out
         * otherwise in the cached segments, and the largest one then needs a segment of its own */
        if (A->transient_peak + A->largest_transient + A->persistent_reserved + (int64_t)size > (int64_t)cap) {
            /* said in the fallback's warning: the state left to keep the step's room, not for want of room */
            if (A->reserved.current + (int64_t)size <= (int64_t)cap) A->kept_room = 1;
            return NULL;
        }
    }
    gm_block *b = gm_new_segment(A, size, pool);
    if (b && persistent) {
        b->seg->persistent = 1;
        A->persistent_reserved += (int64_t)size;
    }
    return b;
}

/* The mirrored block the calling thread claimed for this allocation (gm_meta_claim), or NULL. Caller holds the
 * lock. A twin has the same request as its device block, so it fits; the block keeps the device block's size
 * (an unsplit remainder included), as the device counted it. */
static gm_block *take_claim(gm_allocator *A, size_t size, int pool) {
    gm_block *c = A->claim;
    if (!c || !pthread_equal(A->claim_thread, pthread_self())) return NULL;
    A->claim = NULL;
    if (!c->mirror || c->pool != pool || c->size < size) return NULL;
    c->mirror = 0;
    for (int i = 0; i < A->nmirrors; i++) /* claimed: from now on an ordinary block, which may be freed and merged */
        if (A->mirrors[i] == c) A->mirrors[i] = NULL;
    return c;
}

/* Why an allocation failed; the Python error is made from it after the lock is released. */
enum { FAIL_NONE, FAIL_TOO_LARGE, FAIL_SOURCE, FAIL_NO_MEMORY, FAIL_OOM };

/* The allocation itself, under A's lock. NULL with *fail set; with `quiet`, running out of memory is neither
 * counted nor reported (FAIL_OOM without a report). Touches no Python object: callable without the GIL. */
static gm_block *alloc_block(gm_allocator *A, size_t nbytes, int quiet, int persistent, int *fail,
                             gm_oom_report *report) {
    *fail = FAIL_NONE;
    if (nbytes > MAX_REQUEST) {
        *fail = FAIL_TOO_LARGE;
        return NULL;
    }
    gm_lock(A);
    if (A->pending) process_pending(A);
    size_t size = nbytes < ROUND ? ROUND : (nbytes + ROUND - 1) / ROUND * ROUND;
    int pool = size <= SMALL_REQUEST ? 0 : 1;
    int exact = no_caching && A->dev.type != GM_DEV_META && !A->expandable;
    gm_block *b = take_claim(A, size, pool);
    if (b) goto taken;
    A->source_failed = 0;
    A->kept_room = 0;
    if (A->expandable) { /* one growing segment per pool: no segment sizes, no exact-size retry */
        b = gm_expandable_fit(A, pool, size);
        if (!b && !A->source_failed) {
            A->num_retries++;
            gm_release_cached(A);
            b = gm_expandable_fit(A, pool, size);
        }
    } else if (!exact) {
        b = best_fit(A, pool, size, persistent);
    }
    if (!b && !A->expandable) {
        size_t seg_size = exact ? size
                          : pool == 0 ? SMALL_SEGMENT
                          : size < LARGE_REQUEST ? LARGE_SEGMENT
                                                 : (size + HUGE_ROUND - 1) / HUGE_ROUND * HUGE_ROUND;
        b = new_segment(A, seg_size, pool, persistent);
        if (!b && seg_size != size) b = new_segment(A, size, pool, persistent);
        if (!b) {
            A->num_retries++;
            gm_release_cached(A);
            b = new_segment(A, seg_size, pool, persistent);
            if (!b && seg_size != size) b = new_segment(A, size, pool, persistent);
        }
    }
    if (!b) {
        *fail = A->source_failed ? FAIL_SOURCE : FAIL_OOM;
        if (*fail == FAIL_OOM && !quiet) { /* the caller has no fallback: count it and say why */
            A->num_ooms++;
            gm_oom_snapshot(A, nbytes, report);
        }
        gm_unlock(A);
        return NULL;
    }
    gm_free_list_remove(A, b);
    size_t rest = b->size - size;
    /* Expandable segments split off any rest: their blocks are carved from granules, not from 20 MiB segments, and
     * a block then holds what the caching allocator's would (the same allocated bytes in both modes). */
    if ((pool == 0 || A->expandable) ? rest >= ROUND : rest > SMALL_REQUEST) {
        gm_block *r = gm_new_block(A, b->seg, b->addr + size, rest, pool);
        if (!r) {
            gm_free_list_insert(A, b);
            *fail = FAIL_NO_MEMORY;
            gm_unlock(A);
            return NULL;
        }
        r->prev = b;
        r->next = b->next;
        if (b->next) b->next->prev = r;
        b->next = r;
        b->size = size;
        gm_free_list_insert(A, r);
    }
taken:
    b->allocated = 1;
    b->requested = nbytes;
    b->category = gm_current_category();
    b->scope = gm_current_scope();
    b->label = NULL;
    int64_t old_peak = A->allocated.peak;
    stat_add(&A->allocated, (int64_t)b->size);
    stat_add(&A->requested, (int64_t)nbytes);
    stat_add(&A->cat[b->category], (int64_t)b->size);
    b->serial = ++A->num_allocs;
    if (A->allocated.peak > old_peak) gm_snapshot_peak(A, b->scope, b->category, nbytes);
    int64_t transient = A->reserved.current - A->persistent_reserved;
    if (b->category != GM_CAT_OPTIMIZER) {
        if (transient > A->transient_peak) A->transient_peak = transient;
        if ((int64_t)b->size > A->largest_transient) A->largest_transient = (int64_t)b->size;
    }
    if (gm_recording(A)) gm_record_event(A, EV_ALLOC, (int64_t)b->size, b->category, b->scope);
    gm_unlock(A);
    return b;
}

/* The Python error for a failed alloc_block (with the GIL, without the lock). */
static void raise_failure(gm_allocator *A, size_t nbytes, int fail, const gm_oom_report *report) {
    char name[16];
    switch (fail) {
    case FAIL_TOO_LARGE:
        PyErr_Format(PyExc_RuntimeError, "allocation of %zu bytes on this device is larger than any device "
                     "can hold (the size computation probably overflowed)", nbytes);
        break;
    case FAIL_SOURCE:
#ifdef GM_WITH_CUDA
        PyErr_Format(PyExc_RuntimeError, "allocating %zu bytes on %s failed (not for lack of memory): %s",
                     nbytes, gm_allocator_name(A, name), gm_cuda_last_error());
#else
        (void)name;
        PyErr_NoMemory();
#endif
        break;
    case FAIL_OOM:
        gm_oom_raise(report);
        break;
    default:
        PyErr_NoMemory();
        break;
    }
}

/* ---- fallback (switched on and off by alloc_policy.c) ------------------------------------------------------------
 * When the device cannot serve a request (after releasing its cache and retrying) and the calling thread's category
 * may fall back, the block comes from the device's fallback allocator: the same caching policy over memory the
 * device can address without owning it (mapped pinned host memory for cuda:N, a memory-mapped file for cpu, fake
 * addresses for meta, so that an estimate makes the same split). The block belongs to the fallback allocator: it is
 * counted there (memory_stats' by_location), freed there, and every kernel reads it through the same pointer. */
gm_allocator *gm_fallback_of(gm_allocator *A) {
    gm_allocator *F = A == &cpu_alloc ? &cpu_fallback : A == &meta_alloc ? &meta_fallback : NULL;
#ifdef GM_WITH_CUDA
    if (A->dev.type == GM_DEV_CUDA && !A->pinned) F = &cuda_fallback[A->dev.index];
#endif
    if (F && !F->ready) {
        allocator_reset(F, A->dev, cpu_alloc.capacity);
        F->parent = A;
        F->location = GM_LOC_HOST;
        F->fallback_fd_dir = -1;
        F->meta_next = (uintptr_t)1 << 54; /* apart from meta's own fake addresses */
        F->ready = 1;
    }
    return F;
}

/* The allocator a request of the calling thread's category falls back to, or NULL. */
static gm_allocator *fallback_for(gm_allocator *A) {
    gm_lock(A);
    gm_allocator *F = A->fallback && (A->fallback_mask >> gm_current_category() & 1u) ? A->fallback : NULL;
    gm_unlock(A);
    return F;
}

/* Whether a block is optimizer state that must leave room for later steps (under a fallback that takes state, on
 * an allocator of segments). State lives through every later step, and each of them needs again the segments its
 * forward and backward held at their peak. set_fallback used to decide block by block: step 1's state took the
 * cached room its backward had just freed, and step 2's backward failed in a category that may not fall back. So
 * state goes on the device only into segments of its own (persistent), made while the room a step needs besides
 * the state (transient_peak) stays free under the limit; the rest goes to the fallback at once. The decision
 * depends on the run so far, identically on meta: an estimate makes the same split. Expandable segments keep the
 * block-by-block rule (they have no segments to set apart). */
static int state_first(gm_allocator *A) {
    return gm_current_category() == GM_CAT_OPTIMIZER && !A->expandable;
}

/* With the GIL: the one warning a fallback gives, at its first block since set_fallback; -1 when the warning was
 * turned into an exception. kept_room: the block is optimizer state sent away before the device was full, to keep
 * the room forward and backward need (state_first), which the text says rather than "full". */
static int warn_fallback(gm_allocator *F, const gm_block *b, int kept_room) {
    gm_allocator *A = F->parent;
    gm_lock(F);
    int first = !F->warned;
    F->warned = 1;
    gm_unlock(F);
    if (!first) return 0;
    char name[16], sz[32], cap[32], room[32], held[32];
    gm_lock(A);
    size_t cap_bytes = A->limit ? A->limit : A->capacity;
    int limited = A->limit != 0;
    int64_t transient = A->transient_peak, in_use = A->allocated.current;
    gm_unlock(A);
    gm_allocator_name(A, name);
    const char *where = F->location == GM_LOC_FILE   ? "a memory-mapped file"
                        : A->dev.type == GM_DEV_CUDA ? "host memory the GPU reads over the bus"
                                                     : "host memory";
    if (kept_room)
        return PyErr_WarnFormat(
            PyExc_UserWarning, 1,
            "%s was not full (%s of its %s %s allocated), but a %s block of %s%s%s was placed in %s, as "
            "gm.memory.set_fallback allows: optimizer state lives through every later step, and on the device it "
            "would leave less than the %s that forward and backward have needed besides the state; later state goes "
            "the same way, and blocks of the other allowed categories when the device is full; %s. "
            "memory_stats('%s')['by_location'] counts them (this warning is given once)",
            name, gm_format_bytes((double)in_use, held), limited ? "limit" : "capacity",
            gm_format_bytes((double)cap_bytes, cap), gm_format_bytes((double)b->size, sz),
            gm_category_names[b->category], b->scope[0] ? " in " : "", b->scope, where,
            gm_format_bytes((double)transient, room),
            F->note[0] ? F->note : "expect the operations on them to be slower", name);
    return PyErr_WarnFormat(
        PyExc_UserWarning, 1,
        "%s is full (%s %s): a %s block of %s%s%s was placed in %s instead, as gm.memory.set_fallback allows, and "
        "so will later blocks of its categories while the device stays full; %s. memory_stats('%s')['by_location'] "
        "counts them (this warning is given once)",
        name, limited ? "limit" : "capacity", gm_format_bytes((double)cap_bytes, cap),
        gm_format_bytes((double)b->size, sz), gm_category_names[b->category], b->scope[0] ? " in " : "", b->scope,
        where, F->note[0] ? F->note : "expect the operations on them to be slower", name);
}

static gm_block *alloc_or_raise(gm_allocator *A, size_t nbytes, int quiet) {
    int fail;
    gm_oom_report report;
    gm_allocator *F = fallback_for(A);
    gm_block *b = alloc_block(A, nbytes, quiet || F, F && state_first(A), &fail, &report);
    if (!b && F && fail == FAIL_OOM) {
        gm_lock(A);
        int kept_room = A->kept_room;
        gm_unlock(A);
        b = alloc_block(F, nbytes, 1, 0, &fail, &report);
        if (b && warn_fallback(F, b, kept_room) < 0) {
            gm_free(b);
            return NULL;
        }
        if (!b && fail == FAIL_OOM) b = alloc_block(A, nbytes, quiet, 0, &fail, &report); /* the device's report */
    }
    if (!b && !(quiet && fail == FAIL_OOM)) raise_failure(A, nbytes, fail, &report);
    return b;
}

gm_block *gm_alloc(gm_device dev, size_t nbytes) {
    gm_allocator *A = gm_allocator_for(dev);
    return A ? alloc_or_raise(A, nbytes, 0) : NULL;
}

gm_block *gm_try_alloc(gm_device dev, size_t nbytes) {
    gm_allocator *A = gm_allocator_for(dev);
    return A ? alloc_or_raise(A, nbytes, 1) : NULL;
}

gm_block *gm_alloc_nogil(gm_device dev, size_t nbytes) {
    if (dev.type == GM_DEV_CUDA) return NULL; /* its first use needs the GIL (gm_allocator_for) */
    int fail;
    gm_oom_report report;
    gm_allocator *A = dev.type == GM_DEV_CPU ? &cpu_alloc : &meta_alloc, *F = fallback_for(A);
    gm_block *b = alloc_block(A, nbytes, 1, F && state_first(A), &fail, &report);
    if (!b && fail == FAIL_OOM && F) /* without the GIL no warning: the next gm_alloc gives it */
        b = alloc_block(F, nbytes, 1, 0, &fail, &report);
    return b;
}

gm_block *gm_alloc_meta_host(size_t nbytes) { return alloc_or_raise(&meta_host_alloc, nbytes, 0); }

gm_block *gm_alloc_pinned(size_t nbytes) {
#ifdef GM_WITH_CUDA
    /* cudaHostAlloc needs a driver and a device: say so plainly rather than with the runtime's error code */
    if (gm_cuda_device_count() == 0) {
        const char *why = gm_cuda_last_error();
        PyErr_Format(PyExc_RuntimeError, "pin_memory: pinned host memory needs a CUDA device, and none is available "
                     "(%s)", why[0] ? why : "none found");
        return NULL;
    }
    return alloc_or_raise(&pinned_alloc, nbytes, 0);
#else
    (void)nbytes;
    PyErr_SetString(PyExc_RuntimeError, "pin_memory: pinned host memory needs CUDA, and this build of gpumemnet has "
                    "no CUDA support (nvcc was not found when it was built, or GPUMEMNET_CUDA=0)");
    return NULL;
#endif
}

int gm_block_is_pinned(const gm_block *b) { return b && b->owner->pinned; }

#ifdef GM_WITH_CUDA
int gm_block_record_stream(gm_block *b, int device) {
    if (!b) return 0; /* NumPy's memory (a borrowed storage): nothing of ours to keep */
    return gm_cuda_event_record(&b->event, &b->event_dev, device);
}

/* A block the copy stream used: the same pending list holds it once freed. Blocks are otherwise handed out in the
 * compute stream's order only, so this is what keeps a block the copy stream still reads (a gradient going down)
 * or writes (a prefetch coming up) from going to the next op. */
int gm_block_record_copy_stream(gm_block *b, int device) {
    if (!b) return 0;
    return gm_cuda_event_record_copy(&b->event, &b->event_dev, device);
}

void *gm_block_copy_event(gm_block *b, int *device) {
    if (!b) { *device = -1; return NULL; }
    gm_lock(b->owner);
    void *ev = b->event;
    *device = b->event_dev;
    gm_unlock(b->owner);
    return ev;
}

/* Whether the last copy from pinned block b has run (then its event is destroyed). */
static int copies_done(gm_block *b) {
    if (!b->event) return 1;
    if (!gm_cuda_event_done(b->event)) return 0;
    gm_cuda_event_destroy(b->event);
    b->event = NULL;
    return 1;
}
#endif

static void free_block(gm_allocator *A, gm_block *b);

void gm_free(gm_block *b) {
    if (!b) return;
    gm_allocator *A = b->owner;
    gm_lock(A);
#ifdef GM_WITH_CUDA
    if (b->event && !copies_done(b)) { /* a queued copy still reads it: reusable once the stream passed it */
        b->pending_next = A->pending;
        A->pending = b;
        gm_unlock(A);
        return;
    }
#endif
    free_block(A, b);
    gm_unlock(A);
}

/* Free the pending blocks whose copies have run. */
static void process_pending(gm_allocator *A) {
#ifdef GM_WITH_CUDA
    gm_block **link = &A->pending;
    while (*link) {
        gm_block *b = *link;
        if (copies_done(b)) {
            *link = b->pending_next;
            b->pending_next = NULL;
            free_block(A, b);
        } else {
            link = &b->pending_next;
        }
    }
#else
    (void)A;
#endif
}

static void free_block(gm_allocator *A, gm_block *b) {
    stat_add(&A->allocated, -(int64_t)b->size);
    stat_add(&A->requested, -(int64_t)b->requested);
    stat_add(&A->cat[b->category], -(int64_t)b->size);
    A->num_frees++;
    if (gm_recording(A)) gm_record_event(A, EV_FREE, -(int64_t)b->size, b->category, b->scope);
    b->allocated = 0;
    b->requested = 0;
    if (b->next && !b->next->allocated) {
        gm_free_list_remove(A, b->next);
        gm_merge_next(b);
    }
    if (b->prev && !b->prev->allocated) { /* fold b into its free predecessor */
        b = b->prev;
        gm_free_list_remove(A, b);
        gm_merge_next(b);
    }
    gm_free_list_insert(A, b);
    if (no_caching && A->dev.type != GM_DEV_META && !b->prev && !b->next && !b->seg->expandable) gm_release_cached(A);
}

char *gm_block_data(const gm_block *b) { return b->addr; }

void gm_block_label_unnamed(gm_block *b, const char *label) {
    if (!b) return;
    gm_lock(b->owner);
    if (!b->label) b->label = label;
    gm_unlock(b->owner);
}

void gm_block_set_label(gm_block *b, const char *label) {
    if (!b) return;
    gm_lock(b->owner);
    b->label = label;
    gm_unlock(b->owner);
}

int gm_block_category(const gm_block *b) {
    if (!b) return GM_CAT_INPUT; /* NumPy's memory (from_numpy): data from outside, as a batch is, for the policies
                                  * that ask (max pooling keeps such an input instead of indices) */
    gm_lock(b->owner);
    int category = b->category;
    gm_unlock(b->owner);
    return category;
}

void gm_block_set_category(gm_block *b, int category) {
    if (!b) return;
    gm_allocator *A = b->owner;
    gm_lock(A);
    if (b->category == category) {
        gm_unlock(A);
        return;
    }
    stat_add(&A->cat[b->category], -(int64_t)b->size);
    stat_add(&A->cat[category], (int64_t)b->size);
    if (gm_recording(A)) {
        gm_record_event(A, EV_RETAG, -(int64_t)b->size, b->category, b->scope);
        gm_record_event(A, EV_RETAG, (int64_t)b->size, category, b->scope);
    }
    b->category = category;
    gm_unlock(A);
}

int64_t gm_block_serial(const gm_block *b) { return b ? b->serial : -1; }
