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
} gm_event;

typedef struct {
    gm_event *ev;
    size_t cap, head, count; /* head: where the next event goes */
    int64_t t0;
} gm_history;

typedef struct gm_segment {
    char *base;
    size_t size;
    int pool;
    struct gm_block *head;               /* the block at base: splits and merges never remove it */
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
    void *event;             /* pinned only: cudaEvent_t recorded after the last non-blocking copy from it */
    int event_dev;           /* the device whose stream `event` was recorded on */
    gm_block *pending_next;  /* on the owner's pending list: freed, but a queued copy may still read it */
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
    int host;            /* meta only: the host memory of a meta run ("meta-host"), apart from its device's */
    gm_block *pending;   /* pinned: freed blocks whose last copy had not run yet (still counted as allocated) */
    int ready;
};

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

/* ---- allocator.c (the core) ---------------------------------------------------------------------------------- */
/* The allocator of dev, or NULL with RuntimeError (no such CUDA device, or no CUDA in this build). */
gm_allocator *gm_allocator_for(gm_device dev);
/* A device name, "cpu-pinned" or "meta-host"; NULL with the exception. */
gm_allocator *gm_allocator_parse(PyObject *arg);
gm_allocator *gm_allocator_meta(void);
/* Release every segment that holds no live block; the bytes released. Caller holds the lock. */
size_t gm_release_cached(gm_allocator *A);
/* Remember the composition of a new allocated peak. Caller holds the lock. */
void gm_snapshot_peak(gm_allocator *A, const char *scope, int category, size_t request);

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
/* The largest free block of A's pools. Caller holds the lock. */
size_t gm_largest_free_block(const gm_allocator *A);
/* Fill r for a request of nbytes that A cannot serve. Caller holds the lock; touches no Python object. */
void gm_oom_snapshot(const gm_allocator *A, size_t nbytes, gm_oom_report *r);
/* Raise gm.OutOfMemoryError from r (with the GIL, without the lock). */
void gm_oom_raise(const gm_oom_report *r);

/* ---- history (the ring is appended to under the lock) ------------------------------------------------------- */
static inline void gm_record_event(gm_allocator *A, int kind, int64_t delta, int category, const char *scope) {
    gm_history *h = A->history;
    gm_event *e = &h->ev[h->head];
    e->t_ns = gm_now_ns() - h->t0;
    e->delta = delta;
    e->allocated = A->allocated.current;
    e->scope = scope;
    e->category = (int8_t)category;
    e->kind = (int8_t)kind;
    h->head = (h->head + 1) % h->cap;
    if (h->count < h->cap) h->count++;
}

#endif
