/* csrc/allocator.h — the caching allocator's internals, shared by its files and by nobody else (the rest of
 * csrc/ sees gm.h's gm_alloc / gm_free / gm_block_* only):
 *   allocator.c      pools, segments and blocks: the policy, the segment sources, the lock (the core);
 *   alloc_report.c   below the core: the OutOfMemoryError report, built from a snapshot taken under the lock;
 *   alloc_stats.c    above the core: statistics, limits, cache and history as the Python functions see them.
 *
 * Threads. Each allocator (cpu, meta, cpu-pinned, one per CUDA device) has one mutex that guards all of its
 * state: pools, segments, blocks, statistics, limit, history. Every entry point takes it, so allocation and free
 * are safe from several threads at once, with or without the GIL (a kernel's thread pool, a future free-threaded
 * Python). Two rules keep it deadlock-free: nothing runs Python while holding it (building a Python object may
 * run the garbage collector, whose finalizers free tensors, which takes the lock again: the OOM report and the
 * statistics are copied into C structs under the lock and turned into Python objects after), and nothing waits
 * for the GIL while holding it. A mutex per device rather than one for all: a CUDA allocation may wait in
 * cudaMalloc (which synchronises), and that must not stall CPU allocations of other threads. */
#ifndef GM_ALLOCATOR_H
#define GM_ALLOCATOR_H

#include "gm.h"
#include <pthread.h>
#include <time.h>
#include <stdlib.h>

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)
#define ROUND 512
#define SMALL_REQUEST (1 * MiB)
#define SMALL_SEGMENT (2 * MiB)
#define LARGE_SEGMENT (20 * MiB)
#define LARGE_REQUEST (10 * MiB)
#define HUGE_ROUND (2 * MiB)
#define MAX_REQUEST ((size_t)1 << 56) /* 64 PiB: anything larger is a size computation gone wrong */

typedef struct { int64_t current, peak; } gm_stat;

typedef struct gm_allocator gm_allocator;

enum { EV_ALLOC, EV_FREE, EV_RETAG };

typedef struct {
    int64_t t_ns;      /* since recording started */
    int64_t delta;     /* +block bytes (alloc), -block bytes (free) */
    int64_t allocated; /* the device's allocated bytes after the event */
    const char *scope; /* interned (gm_intern): lives as long as the module */
    int8_t category, kind;
    int8_t location;   /* GM_LOC_*: where the block lives (a fallback allocator records into its device's ring) */
} gm_event;

typedef struct {
    gm_event *ev;
    size_t cap, head, count; /* head: where the next event goes */
    int64_t t0;
} gm_history;

typedef struct gm_segment {
    char *base;
    size_t size;       /* bytes of address space the blocks cover (expandable: grows, mapped or not) */
    int pool;
    /* Expandable segments only (alloc_expand.c): address space reserved once, physical memory mapped per granule. */
    int expandable;
    size_t vsize;      /* bytes of address space reserved */
    void **handles;    /* per granule of the reserved range: its physical memory, NULL while unmapped */
    struct gm_block *head;               /* the block at base: splits and merges never remove it */
    int64_t serial;                      /* when it was made (1, 2, ... per device): best fit's tie-break */
    int persistent;                      /* made for optimizer state under a fallback (allocator.c state_first) */
    struct gm_segment *sprev, *snext;    /* every segment of the device, so an OOM report can list live blocks */
} gm_segment;

struct gm_block {
    char *addr;
    size_t size;      /* bytes of the block (rounded) */
    size_t requested; /* bytes asked for */
    int allocated;
    int pool;         /* 0 small, 1 large */
    int category;
    int64_t serial;   /* the allocator's allocation count when it was taken: the order tensors were made in */
    const char *scope;
    const char *label; /* the tensor's name ("fc1.weight"), interned, or NULL */
    gm_segment *seg;
    gm_block *prev, *next;   /* address-ordered neighbours inside the segment */
    gm_block *fprev, *fnext; /* the pool's free list, ordered by (size, addr) */
    gm_allocator *owner;
    void *event;             /* cudaEvent_t after the last non-blocking copy from it (pinned) or on the copy stream */
    int event_dev;           /* the device whose stream `event` was recorded on */
    gm_block *pending_next;  /* on the owner's pending list: freed, but a queued copy may still read it */
    int mirror;              /* meta only: held for the meta twin of a device block (gm_meta_mirror), not counted */
};

struct gm_allocator {
    pthread_mutex_t lock; /* guards everything below (see the header comment) */
    gm_device dev;
    gm_segment *segments;
    gm_block *free_list[2];
    gm_stat allocated, reserved, requested, cat[GM_NCAT];
    int64_t num_allocs, num_frees, num_segment_allocs, num_segment_frees, num_retries, num_ooms;
    /* What the allocated peak was made of, and the allocation that reached it: estimates report these. */
    int64_t at_peak[GM_NCAT];
    const char *peak_scope;
    int peak_category;
    size_t peak_request;
    size_t limit;    /* 0: none */
    size_t capacity; /* what the device has */
    uintptr_t meta_next;
    gm_history *history; /* NULL: not recording */
    int source_failed;   /* the segment source failed for another reason than "out of memory" */
    int pinned;          /* page-locked host memory from cudaHostAlloc (dev is cpu) */
    /* Fallback (alloc_policy.c): when the device is full, blocks of the categories in fallback_mask come from
     * `fallback`, a second allocator of the same device over memory the device can address but does not own. */
    gm_allocator *fallback;   /* the device's fallback allocator while set_fallback is on, else NULL */
    unsigned fallback_mask;   /* bit c: category c may fall back */
    gm_allocator *parent;     /* a fallback allocator: the device it serves (its events go to the parent's ring) */
    int location;             /* GM_LOC_*: where this allocator's memory is */
    int fallback_fd_dir;      /* GM_LOC_FILE: the directory's descriptor (files are made in it and unlinked) */
    int warned;               /* a fallback allocator: the one warning was given since set_fallback */
    /* Under a fallback (allocator.c state_first): the most bytes reserved outside persistent segments since
     * set_fallback, as of allocations other than optimizer state (what a step needs besides the state, which a
     * later step needs again), and the bytes of the persistent segments, which hold only state. */
    int64_t transient_peak, persistent_reserved;
    int64_t largest_transient; /* the largest block outside optimizer state since set_fallback (new_segment) */
    int kept_room;            /* the last request was refused by that rule while the device still had room */
    char note[320];           /* a fallback allocator: the expected slowdown, said in the warning */
    /* Expandable segments (alloc_expand.c): one growing segment per pool, mapped by granules. */
    int expandable;
    size_t granule;
    gm_segment *xseg[2];
    int host;            /* meta only: the host memory of a meta run ("meta-host"), apart from its device's */
    gm_block *pending;   /* pinned: freed blocks whose last copy had not run yet (still counted as allocated) */
    int ready;
    int64_t segment_serial; /* segments made so far (never reset, unlike the statistics) */
    /* Free blocks of segments older than this serial are not reused (0: all are): gm.memory.estimate sets it so
     * that the free tails of segments the caller's live tensors hold do not change what a fresh process does. */
    int64_t fresh_serial;
    /* meta only (gm_meta_mirror): the mirrored blocks, and the one the claiming thread's next allocation takes */
    gm_block **mirrors;
    int nmirrors;
    gm_block *claim;
    pthread_t claim_thread;
};

enum { GM_LOC_DEVICE, GM_LOC_HOST, GM_LOC_FILE };

static inline void gm_lock(gm_allocator *A) { pthread_mutex_lock(&A->lock); }
static inline void gm_unlock(gm_allocator *A) { pthread_mutex_unlock(&A->lock); }

static inline void stat_add(gm_stat *s, int64_t delta) {
    s->current += delta;
    if (s->current > s->peak) s->peak = s->current;
}

static inline int64_t gm_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- free lists and blocks (here, inline: the core and alloc_expand.c share them). Caller holds the lock. ---- */
/* Each pool's free list is ordered by (size, segment age, addr): the first block large enough is the best fit, and
 * among equal sizes the oldest segment's wins. Not the address alone (PyTorch's rule): where the system places a new
 * segment is something the meta device cannot reproduce, and the estimate must choose as the device does. */
static inline int gm_block_less(const gm_block *a, const gm_block *b) {
    if (a->size != b->size) return a->size < b->size;
    if (a->seg->serial != b->seg->serial) return a->seg->serial < b->seg->serial;
    return a->addr < b->addr;
}

static inline void gm_free_list_insert(gm_allocator *A, gm_block *b) {
    gm_block **head = &A->free_list[b->pool], *prev = NULL, *cur = *head;
    while (cur && gm_block_less(cur, b)) { prev = cur; cur = cur->fnext; }
    b->fprev = prev;
    b->fnext = cur;
    if (cur) cur->fprev = b;
    if (prev) prev->fnext = b; else *head = b;
}

static inline void gm_free_list_remove(gm_allocator *A, gm_block *b) {
    if (b->fprev) b->fprev->fnext = b->fnext; else A->free_list[b->pool] = b->fnext;
    if (b->fnext) b->fnext->fprev = b->fprev;
    b->fprev = b->fnext = NULL;
}

/* Fold b's successor in the segment into b (neither on a free list: the caller takes them off). */
static inline void gm_merge_next(gm_block *b) {
    gm_block *n = b->next;
    b->size += n->size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    free(n);
}

static inline gm_block *gm_new_block(gm_allocator *A, gm_segment *seg, char *addr, size_t size, int pool) {
    gm_block *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->addr = addr;
    b->size = size;
    b->pool = pool;
    b->seg = seg;
    b->owner = A;
    b->scope = "";
    return b;
}

/* Whether A's events are recorded: its own ring, or (a fallback allocator) its device's. */
static inline int gm_recording(const gm_allocator *A) { return A->history != NULL || A->parent != NULL; }

/* ---- alloc_sources.c (at the bottom: sources beyond malloc and cudaMalloc) --------------------------------------
 * A file of `size` bytes made in the directory `dirfd` names, unlinked at once (nothing is left behind, even after
 * a crash) and mapped shared: the CPU fallback's memory, paged to the disk by the kernel (ZeRO-Infinity's NVMe
 * tier). NULL when the disk is full or the file cannot be made; *out_of_space says which. */
char *gm_file_segment_alloc(int dirfd, size_t size, int *out_of_space);
void gm_file_segment_free(char *p, size_t size);
/* Expandable segments' address space and physical memory, for cuda:N and meta (fake addresses, nothing mapped).
 * The granularity: 0 when the device cannot (no virtual memory management). */
size_t gm_vm_granularity(gm_device dev);
char *gm_vm_reserve(gm_device dev, size_t size);
void gm_vm_release(gm_device dev, char *base, size_t size);
/* Map `size` bytes of new physical memory at addr: its handle (non-NULL), or NULL (*out_of_memory when the device
 * is full, else the failure is recorded for gm_cuda_last_error). */
void *gm_vm_map(gm_device dev, char *addr, size_t size, int *out_of_memory);
void gm_vm_unmap(gm_device dev, char *addr, size_t size, void *handle);
/* Wait for the device's queued work, before unmapping what it may still read. */
void gm_vm_sync(gm_device dev);

/* ---- allocator.c (the core) ---------------------------------------------------------------------------------- */
/* The allocator of dev, or NULL with RuntimeError (no such CUDA device, or no CUDA in this build). */
gm_allocator *gm_allocator_for(gm_device dev);
/* A device name, "cpu-pinned" or "meta-host"; NULL with the exception. */
gm_allocator *gm_allocator_parse(PyObject *arg);
gm_allocator *gm_allocator_meta(void);
int gm_no_caching(void); /* GPUMEMNET_NO_CACHING=1: every tensor its own segment */
/* A new segment of `size` bytes as one free block on A's free list, or NULL (no exception) when the limit, the
 * capacity or the source says no. Caller holds the lock. */
gm_block *gm_new_segment(gm_allocator *A, size_t size, int pool);
/* Lay out meta's segments as the source blocks' device has them (see allocator.c); the number of blocks mirrored,
 * or -1 (out of memory, no exception). gm_meta_claim(i): the calling thread's next meta allocation takes the
 * mirror of blocks[i]; gm_meta_mirror_end: the mirrors nobody claimed become free space. */
int gm_meta_mirror(gm_block **blocks, int n);
void gm_meta_claim(int i);
void gm_meta_mirror_end(void);
/* Release every segment that holds no live block; the bytes released. Caller holds the lock. */
size_t gm_release_cached(gm_allocator *A);
/* Remember the composition of a new allocated peak. Caller holds the lock. */
void gm_snapshot_peak(gm_allocator *A, const char *scope, int category, size_t request);
/* The fallback allocator of A's device (set up on first use, not switched on), or NULL for pinned memory. */
gm_allocator *gm_fallback_of(gm_allocator *A);

/* ---- alloc_expand.c (below the core: the core calls it) ------------------------------------------------------- */
/* Expandable mode: a free block of `pool` holding `size` bytes whose first `size` bytes are mapped, growing the
 * pool's segment when no free block is large enough; NULL when the limit, the capacity, the address space or the
 * source says no (*source_failed set for the last). Caller holds the lock. */
gm_block *gm_expandable_fit(gm_allocator *A, int pool, size_t size);
/* Unmap every granule that lies wholly inside a free block; the bytes released. Caller holds the lock. */
size_t gm_expandable_release(gm_allocator *A);
/* Unmap and give back both pools' segments (A holds no live block). Caller holds the lock. */
void gm_expandable_drop(gm_allocator *A);

/* ---- alloc_policy.c (above the core) -------------------------------------------------------------------------- */
/* "device", "host" or "file" for a GM_LOC_*. */
const char *gm_location_name(int location);

/* ---- alloc_report.c ------------------------------------------------------------------------------------------ */
#define GM_TOP_BLOCKS 5
#define GM_MAX_SUGGESTIONS 4
/* Everything an OutOfMemoryError says, copied out of the allocator under its lock. */
typedef struct {
    char device[16];
    int is_cuda, cuda_index;
    size_t requested, capacity, limit, cached, largest;
    int64_t allocated, reserved, by_category[GM_NCAT];
    int category;
    const char *scope; /* interned */
    int ntop;
    const char *top_label[GM_TOP_BLOCKS]; /* the block's interned name, or NULL: then top_name */
    char top_name[GM_TOP_BLOCKS][160];
    size_t top_size[GM_TOP_BLOCKS];
    int nsugg;
    char suggestions[GM_MAX_SUGGESTIONS][240];
} gm_oom_report;

/* "cpu", "meta", "cuda:N", "cpu-pinned" or "meta-host" (buf >= 16 bytes). */
const char *gm_allocator_name(const gm_allocator *A, char *buf);
/* "512 B", "1.50 KiB", "2.00 GiB" into buf (>= 32 bytes): the one unit of every figure shown. */
const char *gm_format_bytes(double b, char *buf);
/* The largest free block of A's pools. Caller holds the lock. */
size_t gm_largest_free_block(const gm_allocator *A);
/* Fill r for a request of nbytes that A cannot serve. Caller holds the lock; touches no Python object. */
void gm_oom_snapshot(const gm_allocator *A, size_t nbytes, gm_oom_report *r);
/* Raise gm.OutOfMemoryError from r (with the GIL, without the lock). */
void gm_oom_raise(const gm_oom_report *r);

/* ---- history (the ring is appended to under the lock) ------------------------------------------------------- */
/* A fallback allocator's events go to its device's ring, under the device's lock (taken inside the fallback's: the
 * one nesting of two allocator locks, always in that order). */
static inline void gm_record_event_in(gm_allocator *A, gm_history *h, int kind, int64_t delta, int category,
                                      const char *scope);
static inline void gm_record_event(gm_allocator *A, int kind, int64_t delta, int category, const char *scope) {
    if (A->parent) {
        gm_lock(A->parent);
        if (A->parent->history) gm_record_event_in(A, A->parent->history, kind, delta, category, scope);
        gm_unlock(A->parent);
    } else if (A->history) {
        gm_record_event_in(A, A->history, kind, delta, category, scope);
    }
}

static inline void gm_record_event_in(gm_allocator *A, gm_history *h, int kind, int64_t delta, int category,
                                      const char *scope) {
    gm_event *e = &h->ev[h->head];
    e->t_ns = gm_now_ns() - h->t0;
    e->delta = delta;
    e->allocated = A->allocated.current;
    e->scope = scope;
    e->category = (int8_t)category;
    e->kind = (int8_t)kind;
    e->location = (int8_t)A->location;
    h->head = (h->head + 1) % h->cap;
    if (h->count < h->cap) h->count++;
}

#endif
