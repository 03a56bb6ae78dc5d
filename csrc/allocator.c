/* csrc/allocator.c — the one caching allocator (DESIGN.md "The allocator"), written once over a segment source:
 * malloc for cpu, a counter of fake addresses for meta (simulation), cudaMalloc for cuda:N.
 * Because the policy is shared, a program run on meta makes the same decisions, byte for byte, as on cpu.
 *
 * Policy (the same as PyTorch's CUDA caching allocator, so figures are comparable and familiar):
 *   - every request is rounded up to a multiple of 512 bytes (blocks stay 512-aligned: SIMD- and cache-friendly);
 *   - requests <= 1 MiB come from the small pool, carved out of 2 MiB segments;
 *   - requests < 10 MiB come from the large pool, carved out of 20 MiB segments;
 *   - larger requests get a segment of their own, rounded up to 2 MiB;
 *   - best fit: the smallest free block of the pool that is large enough (ties: the lowest address);
 *   - a block is split when the rest is worth keeping (>= 512 B in the small pool, > 1 MiB in the large pool);
 *     freed blocks merge with free neighbours of the same segment;
 *   - when a new segment would cross the limit or the capacity, a segment of exactly the rounded request is
 *     tried instead; then the cache (segments holding no live block) is released and the request retried;
 *     only then OutOfMemoryError is raised.
 * Statistics are kept per device and per category, current and peak. Everything runs under the GIL.
 *
 * Why PyTorch's sizes on the GPU too: cudaMalloc and cudaFree are slow (cudaFree synchronises the device), so
 * segments are few and reused; 2 MiB small segments pack the many tiny tensors of a step (biases, BN
 * statistics, scalars) together, 20 MiB large segments serve the mid-sized ones, and a request of 10 MiB or more
 * (activations, weights) gets a segment rounded to 2 MiB so that at most 2 MiB is lost per big tensor. Blocks are
 * only handed to the same stream (one per device), so a freed block is reused in stream order without an event.
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
 * its exact curve). Disabled, the alloc/free paths pay one pointer test. */
#include "gm.h"
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)
#define ROUND 512
#define SMALL_REQUEST (1 * MiB)
#define SMALL_SEGMENT (2 * MiB)
#define LARGE_SEGMENT (20 * MiB)
#define LARGE_REQUEST (10 * MiB)
#define HUGE_ROUND (2 * MiB)
#define MAX_REQUEST ((size_t)1 << 56) /* 64 PiB: anything larger is a size computation gone wrong */

const char *const gm_category_names[GM_NCAT] = {"parameter", "gradient", "optimizer", "activation",
                                                "workspace", "input",    "other"};

typedef struct { int64_t current, peak; } gm_stat;

typedef struct gm_allocator gm_allocator;

enum { EV_ALLOC, EV_FREE, EV_RETAG };
static const char *const event_kinds[] = {"alloc", "free", "retag"};

typedef struct {
    int64_t t_ns;      /* since recording started */
    int64_t delta;     /* +block bytes (alloc), -block bytes (free) */
    int64_t allocated; /* the device's allocated bytes after the event */
    const char *scope; /* interned (scope_names): lives as long as the module */
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
    int quiet;           /* gm_try_alloc in progress: running out of memory returns NULL without an exception */
    int pinned;          /* page-locked host memory from cudaHostAlloc (dev is cpu) */
    gm_block *pending;   /* pinned: freed blocks whose last copy had not run yet (still counted as allocated) */
    int ready;
};

static gm_allocator cpu_alloc, meta_alloc, pinned_alloc;
#ifdef GM_WITH_CUDA
static gm_allocator cuda_alloc[GM_MAX_CUDA_DEVICES];
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
void gm_cuda_host_free(void *p);
int gm_cuda_event_record(void **event, int *event_dev, int device);
int gm_cuda_event_done(void *event);
void gm_cuda_event_destroy(void *event);
#endif
/* Thread-local: set from Python (gm.memory scopes, modules, autograd) and read at every allocation. */
static _Thread_local int cur_category = GM_CAT_OTHER;
static _Thread_local const char *cur_scope = "";
static PyObject *scope_names; /* dict str -> str: interned scope strings kept alive for blocks to point at */

int gm_current_category(void) { return cur_category; }

int gm_swap_category(int category) {
    int prev = cur_category;
    cur_category = category;
    return prev;
}

/* ---- segment sources ---------------------------------------------------------------------------- */
static char *source_alloc(gm_allocator *A, size_t size) {
    if (A->dev.type == GM_DEV_META) {
        /* Fake, never dereferenced, unique and 512-aligned addresses. */
        char *p = (char *)A->meta_next;
        A->meta_next += size + HUGE_ROUND;
        return p;
    }
#ifdef GM_WITH_CUDA
    if (A->dev.type == GM_DEV_CUDA || A->pinned) {
        int oom = 0;
        char *p = A->pinned ? gm_cuda_host_alloc(size, &oom) : gm_cuda_segment_alloc(A->dev.index, size, &oom);
        if (!p && !oom) A->source_failed = 1;
        return p;
    }
#endif
    void *p = NULL;
    if (posix_memalign(&p, 4096, size) != 0) return NULL;
    return p;
}

static void source_free(gm_allocator *A, char *p) {
#ifdef GM_WITH_CUDA
    if (A->pinned) {
        gm_cuda_host_free(p);
        return;
    }
    if (A->dev.type == GM_DEV_CUDA) {
        gm_cuda_segment_free(A->dev.index, p);
        return;
    }
#endif
    if (A->dev.type != GM_DEV_META) free(p);
}

/* ---- statistics ------------------------------------------------------------------------------- */
static inline void stat_add(gm_stat *s, int64_t delta) {
    s->current += delta;
    if (s->current > s->peak) s->peak = s->current;
}

/* Remember the composition of a new allocated peak (a handful of integers: cheap on every new peak). */
static void snapshot_peak(gm_allocator *A, const char *scope, int category, size_t request) {
    for (int i = 0; i < GM_NCAT; i++) A->at_peak[i] = A->cat[i].current;
    A->peak_scope = scope;
    A->peak_category = category;
    A->peak_request = request;
}

/* ---- history --------------------------------------------------------------------------------- */
static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Called only when A->history is set: the disabled cost stays the caller's one branch. */
static void record_event(gm_allocator *A, int kind, int64_t delta, int category, const char *scope) {
    gm_history *h = A->history;
    gm_event *e = &h->ev[h->head];
    e->t_ns = now_ns() - h->t0;
    e->delta = delta;
    e->allocated = A->allocated.current;
    e->scope = scope;
    e->category = (int8_t)category;
    e->kind = (int8_t)kind;
    h->head = (h->head + 1) % h->cap;
    if (h->count < h->cap) h->count++;
}

static void history_free(gm_allocator *A) {
    if (!A->history) return;
    free(A->history->ev);
    free(A->history);
    A->history = NULL;
}

/* ---- free lists --------------------------------------------------------------------------------- */
static int block_less(const gm_block *a, const gm_block *b) {
    return a->size < b->size || (a->size == b->size && a->addr < b->addr);
}

static void free_list_insert(gm_allocator *A, gm_block *b) {
    gm_block **head = &A->free_list[b->pool], *prev = NULL, *cur = *head;
    while (cur && block_less(cur, b)) { prev = cur; cur = cur->fnext; }
    b->fprev = prev;
    b->fnext = cur;
    if (cur) cur->fprev = b;
    if (prev) prev->fnext = b; else *head = b;
}

static void free_list_remove(gm_allocator *A, gm_block *b) {
    if (b->fprev) b->fprev->fnext = b->fnext; else A->free_list[b->pool] = b->fnext;
    if (b->fnext) b->fnext->fprev = b->fprev;
    b->fprev = b->fnext = NULL;
}

/* ---- devices ---------------------------------------------------------------------------------- */
static size_t physical_memory(void) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return (pages > 0 && page > 0) ? (size_t)pages * (size_t)page : (size_t)1 << 40;
}

int gm_allocator_init(void) {
    memset(&cpu_alloc, 0, sizeof cpu_alloc);
    memset(&meta_alloc, 0, sizeof meta_alloc);
    cpu_alloc.dev = (gm_device){GM_DEV_CPU, 0};
    cpu_alloc.capacity = physical_memory();
    meta_alloc.dev = (gm_device){GM_DEV_META, 0};
    meta_alloc.capacity = (size_t)1 << 50; /* 1 PiB: simulation is unbounded until told otherwise */
    meta_alloc.meta_next = (uintptr_t)1 << 44;
    memset(&pinned_alloc, 0, sizeof pinned_alloc);
    pinned_alloc.dev = (gm_device){GM_DEV_CPU, 0};
    pinned_alloc.capacity = cpu_alloc.capacity; /* page-locked memory is host memory */
    pinned_alloc.pinned = 1;
    cpu_alloc.ready = meta_alloc.ready = pinned_alloc.ready = 1;
    const char *nc = getenv("GPUMEMNET_NO_CACHING");
    no_caching = nc && nc[0] && strcmp(nc, "0") != 0;
    scope_names = PyDict_New();
    return scope_names ? 0 : -1;
}

/* Returns the allocator of dev, or NULL with RuntimeError (no such CUDA device, or no CUDA in this build).
 * A CUDA device's allocator is set up on first use; its capacity is the device's total memory. */
static gm_allocator *allocator_for(gm_device dev) {
    if (dev.type == GM_DEV_CPU) return &cpu_alloc;
    if (dev.type == GM_DEV_META) return &meta_alloc;
#ifdef GM_WITH_CUDA
    if (dev.index >= 0 && dev.index < GM_MAX_CUDA_DEVICES && cuda_alloc[dev.index].ready)
        return &cuda_alloc[dev.index];
    int n = gm_cuda_device_count();
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
    size_t free_bytes, total;
    if (gm_cuda_mem_info(dev.index, &free_bytes, &total) < 0) {
        PyErr_Format(PyExc_RuntimeError, "device cuda:%d: cannot read its memory size: %s", dev.index,
                     gm_cuda_last_error());
        return NULL;
    }
    gm_allocator *A = &cuda_alloc[dev.index];
    memset(A, 0, sizeof *A);
    A->dev = dev;
    A->capacity = total;
    A->ready = 1;
    return A;
#else
    PyErr_Format(PyExc_RuntimeError,
                 "device cuda:%d: this build of gpumemnet has no CUDA support (nvcc was not found when it was "
                 "built, or GPUMEMNET_CUDA=0); use device='cpu', or 'meta' to simulate a GPU", dev.index);
    return NULL;
#endif
}

/* ---- the error that explains -------------------------------------------------------------------- */
/* "cpu", "meta", "cuda:N", or "cpu-pinned" for the pinned host allocator (buf >= 16 bytes). */
static const char *allocator_name(const gm_allocator *A, char *buf) {
    if (A->pinned) return strcpy(buf, "cpu-pinned");
    return gm_device_str(A->dev, buf);
}

static const char *fmt_bytes(double b, char *buf) {
    const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    while (b >= 1024.0 && u < 5) { b /= 1024.0; u++; }
    if (u == 0) snprintf(buf, 32, "%.0f B", b); else snprintf(buf, 32, "%.2f %s", b, units[u]);
    return buf;
}

static size_t largest_free_block(gm_allocator *A) {
    size_t best = 0;
    for (int p = 0; p < 2; p++)
        for (gm_block *b = A->free_list[p]; b; b = b->fnext)
            if (b->size > best) best = b->size;
    return best;
}

/* The n largest live blocks (n <= 5), largest first. */
#define GM_TOP_BLOCKS 5
static int largest_live_blocks(gm_allocator *A, const gm_block **top) {
    int n = 0;
    for (gm_segment *sg = A->segments; sg; sg = sg->snext) {
        for (const gm_block *b = sg->head; b; b = b->next) {
            if (!b->allocated) continue;
            int i = n < GM_TOP_BLOCKS ? n++ : GM_TOP_BLOCKS;
            if (i == GM_TOP_BLOCKS) {
                if (b->size <= top[GM_TOP_BLOCKS - 1]->size) continue;
                i = GM_TOP_BLOCKS - 1;
            }
            while (i > 0 && top[i - 1]->size < b->size) { top[i] = top[i - 1]; i--; }
            top[i] = b;
        }
    }
    return n;
}

/* "fc1.weight", or what it is and where it was made: "activation from features.3 forward". */
static const char *block_description(const gm_block *b, char *buf, size_t len) {
    if (b->label) return b->label;
    snprintf(buf, len, "%s%s%s", gm_category_names[b->category], b->scope[0] ? " from " : "", b->scope);
    return buf;
}

/* Suggestions ranked by what holds the memory: each names the share it addresses and the API that helps. */
#define GM_MAX_SUGGESTIONS 4
static int oom_suggestions(gm_allocator *A, size_t nbytes, size_t cached, size_t largest,
                           char out[GM_MAX_SUGGESTIONS][240]) {
    double used = (double)(A->allocated.current > 0 ? A->allocated.current : 1);
    double states = (double)(A->cat[GM_CAT_PARAMETER].current + A->cat[GM_CAT_GRADIENT].current +
                             A->cat[GM_CAT_OPTIMIZER].current) / used;
    double acts = (double)A->cat[GM_CAT_ACTIVATION].current / used;
    double ws = (double)A->cat[GM_CAT_WORKSPACE].current / used;
    struct suggestion { double share; char text[240]; } s[GM_MAX_SUGGESTIONS];
    int n = 0;
    if (states >= 0.4) {
        s[n].share = states;
        snprintf(s[n++].text, 240, "parameters, gradients and optimizer state are %.0f%% of use: a global pooling head "
                 "(nn.GlobalAvgPool2d) instead of a huge Linear removes most of its weights; SGD keeps half of "
                 "Adam's state", 100 * states);
    }
    if (acts >= 0.3) {
        s[n].share = acts;
        snprintf(s[n++].text, 240, "activations saved for backward are %.0f%% of use: checkpointing "
                 "(gm.utils.checkpoint_sequential), autocast (half the bytes), or a smaller micro-batch with "
                 "gradient accumulation (gm.memory.plan picks one)", 100 * acts);
    }
    if (ws >= 0.2) {
        s[n].share = ws;
        snprintf(s[n++].text, 240, "kernel workspace is %.0f%% of use: lower it with "
                 "gpumemnet._C.set_conv_workspace_limit", 100 * ws);
    }
    if (cached >= nbytes && largest < nbytes) {
        s[n].share = (double)cached / used;
        snprintf(s[n++].text, 240, "enough memory is cached but free, yet no free block holds the request "
                 "(fragmentation): gm.memory.empty_cache() between phases lets the segments be made anew");
    }
    for (int i = 1; i < n; i++) /* largest share first */
        for (int j = i; j > 0 && s[j].share > s[j - 1].share; j--) {
            struct suggestion tmp = s[j];
            s[j] = s[j - 1];
            s[j - 1] = tmp;
        }
    for (int i = 0; i < n; i++) memcpy(out[i], s[i].text, 240);
    return n;
}

static void raise_oom(gm_allocator *A, size_t nbytes) {
    char dev[16], a[32], c[32], l[32], u[32], f[32], g[32];
    size_t cached = (size_t)(A->reserved.current - A->allocated.current);
    size_t largest = largest_free_block(A);
    const char *prefix = A->dev.type == GM_DEV_CUDA ? "CUDA out of memory" : "out of memory";
    char cats[512] = "";
    size_t pos = 0;
    for (int i = 0; i < GM_NCAT; i++) {
        if (A->cat[i].current == 0) continue;
        pos += snprintf(cats + pos, sizeof cats - pos, "%s%s %s", pos ? " · " : "", gm_category_names[i],
                        fmt_bytes((double)A->cat[i].current, u));
        if (pos >= sizeof cats) break;
    }
    const gm_block *top[GM_TOP_BLOCKS];
    int ntop = largest_live_blocks(A, top);
    char tops[640] = "";
    size_t tpos = 0;
    for (int i = 0; i < ntop && tpos < sizeof tops; i++) {
        char d[160], sz[32];
        tpos += snprintf(tops + tpos, sizeof tops - tpos, "%s%s %s", i ? " · " : "\n  largest tensors: ",
                         block_description(top[i], d, sizeof d), fmt_bytes((double)top[i]->size, sz));
    }
    char sugg[GM_MAX_SUGGESTIONS][240];
    int nsugg = oom_suggestions(A, nbytes, cached, largest, sugg);
    char sugs[GM_MAX_SUGGESTIONS * 250 + 8] = "";
    size_t spos = 0;
    for (int i = 0; i < nsugg && spos < sizeof sugs; i++)
        spos += snprintf(sugs + spos, sizeof sugs - spos, "\n    - %s", sugg[i]);
    /* On a GPU the driver's view matters too: other processes (or another framework in this one) hold memory
     * that our capacity figure does not show. */
    char driver[128] = "", r[32], df[32];
    snprintf(driver, sizeof driver, "; reserved %s", fmt_bytes((double)A->reserved.current, r));
#ifdef GM_WITH_CUDA
    size_t dfree, dtotal;
    if (A->dev.type == GM_DEV_CUDA && gm_cuda_mem_info(A->dev.index, &dfree, &dtotal) == 0)
        snprintf(driver, sizeof driver, "; reserved %s, free on the device %s",
                 fmt_bytes((double)A->reserved.current, r), fmt_bytes((double)dfree, df));
#endif
    (void)df;
    PyObject *msg = PyUnicode_FromFormat(
        "%s on %s: tried to allocate %s (%s%s%s)\n"
        "  capacity %s, limit %s%s; in use %s%s%s\n"
        "  cached but free %s (largest free block %s)%s%s%s",
        prefix, allocator_name(A, dev), fmt_bytes((double)nbytes, a), gm_category_names[cur_category],
        cur_scope[0] ? " in " : "", cur_scope, fmt_bytes((double)A->capacity, c),
        A->limit ? fmt_bytes((double)A->limit, l) : "none", driver, fmt_bytes((double)A->allocated.current, g),
        pos ? ": " : "", cats, fmt_bytes((double)cached, f), fmt_bytes((double)largest, u), tops,
        nsugg ? "\n  suggestions:" : "", sugs);
    if (!msg) return;
    PyObject *exc = PyObject_CallOneArg(GM_OutOfMemoryError, msg);
    Py_DECREF(msg);
    if (!exc) return;
    PyObject *bycat = PyDict_New();
    for (int i = 0; bycat && i < GM_NCAT; i++) {
        PyObject *v = PyLong_FromLongLong(A->cat[i].current);
        if (v) PyDict_SetItemString(bycat, gm_category_names[i], v);
        Py_XDECREF(v);
    }
    PyObject *limit = A->limit ? PyLong_FromSize_t(A->limit) : Py_NewRef(Py_None);
    PyObject *suggestion_list = PyList_New(0);
    for (int i = 0; suggestion_list && i < nsugg; i++) {
        PyObject *item = PyUnicode_FromString(sugg[i]);
        if (item) PyList_Append(suggestion_list, item);
        Py_XDECREF(item);
    }
    PyObject *largest_list = PyList_New(0);
    for (int i = 0; largest_list && i < ntop; i++) {
        char d[160];
        PyObject *item = Py_BuildValue("(sn)", block_description(top[i], d, sizeof d), (Py_ssize_t)top[i]->size);
        if (item) PyList_Append(largest_list, item);
        Py_XDECREF(item);
    }
    /* The fields are attributes too, so tools need not parse the text. */
    struct { const char *name; PyObject *value; } attrs[] = {
        {"requested_bytes", PyLong_FromSize_t(nbytes)},
        {"device", PyUnicode_FromString(dev)},
        {"capacity", PyLong_FromSize_t(A->capacity)},
        {"limit", limit},
        {"allocated_bytes", PyLong_FromLongLong(A->allocated.current)},
        {"reserved_bytes", PyLong_FromLongLong(A->reserved.current)},
        {"cached_free_bytes", PyLong_FromSize_t(cached)},
        {"largest_free_block", PyLong_FromSize_t(largest)},
        {"by_category", bycat},
        {"largest_tensors", largest_list},
        {"suggestions", suggestion_list},
        {"category", PyUnicode_FromString(gm_category_names[cur_category])},
        {"scope", PyUnicode_FromString(cur_scope)},
    };
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
        if (attrs[i].value) PyObject_SetAttrString(exc, attrs[i].name, attrs[i].value);
        Py_XDECREF(attrs[i].value);
    }
    PyErr_Clear(); /* a failed attribute is not worth hiding the OOM for */
    PyErr_SetObject(GM_OutOfMemoryError, exc);
    Py_DECREF(exc);
}

/* ---- allocation ---------------------------------------------------------------------------------- */
static gm_block *new_block(gm_allocator *A, gm_segment *seg, char *addr, size_t size, int pool) {
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

/* A new segment of `size` bytes as one free block, or NULL (no exception) when the limit, the capacity or
 * the source says no. */
static gm_block *new_segment(gm_allocator *A, size_t size, int pool) {
    size_t reserved = (size_t)A->reserved.current;
    if (A->limit && reserved + size > A->limit) return NULL;
    if (reserved + size > A->capacity) return NULL;
    gm_segment *seg = calloc(1, sizeof *seg);
    if (!seg) return NULL;
    seg->base = source_alloc(A, size);
    if (!seg->base) { free(seg); return NULL; }
    seg->size = size;
    seg->pool = pool;
    gm_block *b = new_block(A, seg, seg->base, size, pool);
    if (!b) { source_free(A, seg->base); free(seg); return NULL; }
    seg->head = b;
    seg->snext = A->segments;
    if (A->segments) A->segments->sprev = seg;
    A->segments = seg;
    stat_add(&A->reserved, (int64_t)size);
    A->num_segment_allocs++;
    free_list_insert(A, b);
    return b;
}

static void process_pending(gm_allocator *A);

/* Release every segment that holds no live block. Returns the bytes released. */
static size_t release_cached(gm_allocator *A) {
    size_t released = 0;
    if (A->pending) process_pending(A);
    for (int p = 0; p < 2; p++) {
        gm_block *b = A->free_list[p];
        while (b) {
            gm_block *next = b->fnext;
            if (!b->prev && !b->next) { /* the block is its whole segment */
                free_list_remove(A, b);
                source_free(A, b->seg->base);
                stat_add(&A->reserved, -(int64_t)b->seg->size);
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
    return released;
}

static gm_block *best_fit(gm_allocator *A, int pool, size_t size) {
    for (gm_block *b = A->free_list[pool]; b; b = b->fnext)
        if (b->size >= size) return b;
    return NULL;
}

/* The allocation itself; A->quiet decides whether running out of memory raises. */
static gm_block *alloc_block(gm_allocator *A, size_t nbytes) {
    if (A->pending) process_pending(A);
    if (nbytes > MAX_REQUEST) {
        PyErr_Format(PyExc_RuntimeError, "allocation of %zu bytes on this device is larger than any device "
                     "can hold (the size computation probably overflowed)", nbytes);
        return NULL;
    }
    size_t size = nbytes < ROUND ? ROUND : (nbytes + ROUND - 1) / ROUND * ROUND;
    int pool = size <= SMALL_REQUEST ? 0 : 1;
    int exact = no_caching && A->dev.type != GM_DEV_META;
    gm_block *b = exact ? NULL : best_fit(A, pool, size);
    A->source_failed = 0;
    if (!b) {
        size_t seg_size = exact ? size
                          : pool == 0 ? SMALL_SEGMENT
                          : size < LARGE_REQUEST ? LARGE_SEGMENT
                                                 : (size + HUGE_ROUND - 1) / HUGE_ROUND * HUGE_ROUND;
        b = new_segment(A, seg_size, pool);
        if (!b && seg_size != size) b = new_segment(A, size, pool);
        if (!b) {
            A->num_retries++;
            release_cached(A);
            b = new_segment(A, seg_size, pool);
            if (!b && seg_size != size) b = new_segment(A, size, pool);
        }
        if (!b && A->source_failed) {
#ifdef GM_WITH_CUDA
            char name[16];
            PyErr_Format(PyExc_RuntimeError, "allocating %zu bytes on %s failed (not for lack of memory): %s",
                         nbytes, allocator_name(A, name), gm_cuda_last_error());
#else
            PyErr_NoMemory();
#endif
            return NULL;
        }
        if (!b) {
            if (A->quiet) return NULL; /* the caller has a fallback: no report, not an OOM */
            A->num_ooms++;
            raise_oom(A, nbytes);
            return NULL;
        }
    }
    free_list_remove(A, b);
    size_t rest = b->size - size;
    if (pool == 0 ? rest >= ROUND : rest > SMALL_REQUEST) {
        gm_block *r = new_block(A, b->seg, b->addr + size, rest, pool);
        if (!r) {
            free_list_insert(A, b);
            PyErr_NoMemory();
            return NULL;
        }
        r->prev = b;
        r->next = b->next;
        if (b->next) b->next->prev = r;
        b->next = r;
        b->size = size;
        free_list_insert(A, r);
    }
    b->allocated = 1;
    b->requested = nbytes;
    b->category = cur_category;
    b->scope = cur_scope;
    b->label = NULL;
    int64_t old_peak = A->allocated.peak;
    stat_add(&A->allocated, (int64_t)b->size);
    stat_add(&A->requested, (int64_t)nbytes);
    stat_add(&A->cat[b->category], (int64_t)b->size);
    A->num_allocs++;
    if (A->allocated.peak > old_peak) snapshot_peak(A, b->scope, b->category, nbytes);
    if (A->history) record_event(A, EV_ALLOC, (int64_t)b->size, b->category, b->scope);
    return b;
}

gm_block *gm_alloc(gm_device dev, size_t nbytes) {
    gm_allocator *A = allocator_for(dev);
    return A ? alloc_block(A, nbytes) : NULL;
}

gm_block *gm_try_alloc(gm_device dev, size_t nbytes) {
    gm_allocator *A = allocator_for(dev);
    if (!A) return NULL;
    A->quiet = 1;
    gm_block *b = alloc_block(A, nbytes);
    A->quiet = 0;
    return b;
}

gm_block *gm_alloc_pinned(size_t nbytes) {
#ifdef GM_WITH_CUDA
    /* cudaHostAlloc needs a driver and a device: say so plainly rather than with the runtime's error code */
    if (gm_cuda_device_count() == 0) {
        const char *why = gm_cuda_last_error();
        PyErr_Format(PyExc_RuntimeError, "pin_memory: pinned host memory needs a CUDA device, and none is available "
                     "(%s)", why[0] ? why : "none found");
        return NULL;
    }
    return alloc_block(&pinned_alloc, nbytes);
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
    return gm_cuda_event_record(&b->event, &b->event_dev, device);
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

/* Merge free neighbour `n` into `b` (n directly follows b in the segment). */
static void absorb_next(gm_allocator *A, gm_block *b) {
    gm_block *n = b->next;
    free_list_remove(A, n);
    b->size += n->size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    free(n);
}

static void free_block(gm_allocator *A, gm_block *b);

void gm_free(gm_block *b) {
    if (!b) return;
#ifdef GM_WITH_CUDA
    if (b->event && !copies_done(b)) { /* a queued copy still reads it: reusable once the stream passed it */
        b->pending_next = b->owner->pending;
        b->owner->pending = b;
        return;
    }
#endif
    free_block(b->owner, b);
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
    if (A->history) record_event(A, EV_FREE, -(int64_t)b->size, b->category, b->scope);
    b->allocated = 0;
    b->requested = 0;
    if (b->next && !b->next->allocated) absorb_next(A, b);
    if (b->prev && !b->prev->allocated) { /* fold b into its free predecessor */
        gm_block *p = b->prev;
        free_list_remove(A, p);
        p->size += b->size;
        p->next = b->next;
        if (b->next) b->next->prev = p;
        free(b);
        b = p;
    }
    free_list_insert(A, b);
    if (no_caching && A->dev.type != GM_DEV_META && !b->prev && !b->next) release_cached(A);
}

char *gm_block_data(const gm_block *b) { return b->addr; }

const char *gm_intern(PyObject *str) {
    PyObject *kept = PyDict_SetDefault(scope_names, str, str); /* kept alive as long as the process */
    return kept ? PyUnicode_AsUTF8(kept) : NULL;
}

void gm_block_set_label(gm_block *b, const char *label) {
    if (b) b->label = label;
}
int gm_block_category(const gm_block *b) { return b->category; }

void gm_block_set_category(gm_block *b, int category) {
    if (!b || b->category == category) return;
    gm_allocator *A = b->owner;
    stat_add(&A->cat[b->category], -(int64_t)b->size);
    stat_add(&A->cat[category], (int64_t)b->size);
    if (A->history) {
        record_event(A, EV_RETAG, -(int64_t)b->size, b->category, b->scope);
        record_event(A, EV_RETAG, (int64_t)b->size, category, b->scope);
    }
    b->category = category;
}

/* ---- Python interface ---------------------------------------------------------------------------- */
/* label_unnamed(tensor, label): name the tensor's block in memory reports ("activation saved by features.3
 * (Conv2d)") unless it has a name already (a parameter's "fc1.weight" stays). Autograd calls it when it keeps a
 * tensor for backward; the label goes with the block, so reusing the block (gm_alloc) forgets it. */
static PyObject *py_label_unnamed(PyObject *self, PyObject *args) {
    PyObject *t, *label;
    if (!PyArg_ParseTuple(args, "OU:label_unnamed", &t, &label)) return NULL;
    if (!gm_is_tensor(t)) {
        PyErr_Format(PyExc_TypeError, "label_unnamed: expected a Tensor, got %.100s", Py_TYPE(t)->tp_name);
        return NULL;
    }
    gm_storage *st = ((GMTensor *)t)->storage;
    if (st && st->block && !st->block->label) {
        const char *s = gm_intern(label);
        if (!s) return NULL;
        st->block->label = s;
    }
    Py_RETURN_NONE;
}

/* A device name, or "cpu-pinned" for the pinned host memory allocator (statistics, limit, cache, history). */
static gm_allocator *parse_allocator(PyObject *arg) {
    if (PyUnicode_Check(arg) && PyUnicode_CompareWithASCIIString(arg, "cpu-pinned") == 0) return &pinned_alloc;
    gm_device dev;
    if (gm_parse_device(arg, &dev, "device") < 0) return NULL;
    return allocator_for(dev);
}

static PyObject *stat_dict(const gm_stat *s) {
    return Py_BuildValue("{s:L,s:L}", "current", (long long)s->current, "peak", (long long)s->peak);
}

static PyObject *py_memory_stats(PyObject *self, PyObject *arg) {
    gm_allocator *A = parse_allocator(arg);
    if (!A) return NULL;
    PyObject *cats = PyDict_New();
    if (!cats) return NULL;
    for (int i = 0; i < GM_NCAT; i++) {
        PyObject *d = stat_dict(&A->cat[i]);
        if (!d || PyDict_SetItemString(cats, gm_category_names[i], d) < 0) {
            Py_XDECREF(d);
            Py_DECREF(cats);
            return NULL;
        }
        Py_DECREF(d);
    }
    PyObject *at_peak = PyDict_New();
    if (!at_peak) {
        Py_DECREF(cats);
        return NULL;
    }
    for (int i = 0; i < GM_NCAT; i++) {
        PyObject *v = PyLong_FromLongLong(A->at_peak[i]);
        if (!v || PyDict_SetItemString(at_peak, gm_category_names[i], v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(at_peak);
            Py_DECREF(cats);
            return NULL;
        }
        Py_DECREF(v);
    }
    PyObject *peak_info = Py_BuildValue("{s:N,s:s,s:s,s:n}", "by_category", at_peak, "scope",
                                        A->peak_scope ? A->peak_scope : "", "category",
                                        gm_category_names[A->peak_category], "request", (Py_ssize_t)A->peak_request);
    if (!peak_info) {
        Py_DECREF(cats);
        return NULL;
    }
    return Py_BuildValue(
        "{s:N,s:N,s:N,s:N,s:N,s:L,s:L,s:L,s:L,s:L,s:L,s:n,s:n,s:n,s:n}", "allocated", stat_dict(&A->allocated),
        "at_peak", peak_info,
        "reserved", stat_dict(&A->reserved), "requested", stat_dict(&A->requested), "by_category", cats,
        "num_allocs", (long long)A->num_allocs, "num_frees", (long long)A->num_frees, "num_segment_allocs",
        (long long)A->num_segment_allocs, "num_segment_frees", (long long)A->num_segment_frees,
        "num_retries", (long long)A->num_retries, "num_ooms", (long long)A->num_ooms, "cached_free",
        (Py_ssize_t)(A->reserved.current - A->allocated.current), "largest_free_block",
        (Py_ssize_t)largest_free_block(A), "limit", (Py_ssize_t)A->limit, "capacity", (Py_ssize_t)A->capacity);
}

static PyObject *py_memory_allocated(PyObject *self, PyObject *arg) {
    gm_allocator *A = parse_allocator(arg);
    return A ? PyLong_FromLongLong(A->allocated.current) : NULL;
}

static PyObject *py_max_memory_allocated(PyObject *self, PyObject *arg) {
    gm_allocator *A = parse_allocator(arg);
    return A ? PyLong_FromLongLong(A->allocated.peak) : NULL;
}

static PyObject *py_memory_reserved(PyObject *self, PyObject *arg) {
    gm_allocator *A = parse_allocator(arg);
    return A ? PyLong_FromLongLong(A->reserved.current) : NULL;
}

static PyObject *py_reset_peak(PyObject *self, PyObject *arg) {
    gm_allocator *A = parse_allocator(arg);
    if (!A) return NULL;
    A->allocated.peak = A->allocated.current;
    snapshot_peak(A, "", GM_CAT_OTHER, 0);
    A->reserved.peak = A->reserved.current;
    A->requested.peak = A->requested.current;
    for (int i = 0; i < GM_NCAT; i++) A->cat[i].peak = A->cat[i].current;
    Py_RETURN_NONE;
}

static PyObject *py_empty_cache(PyObject *self, PyObject *arg) {
    gm_allocator *A = parse_allocator(arg);
    if (!A) return NULL;
    return PyLong_FromSize_t(release_cached(A));
}

static PyObject *py_set_limit(PyObject *self, PyObject *args) {
    PyObject *devobj, *limobj;
    if (!PyArg_ParseTuple(args, "OO:set_limit", &devobj, &limobj)) return NULL;
    gm_allocator *A = parse_allocator(devobj);
    if (!A) return NULL;
    if (limobj == Py_None) {
        A->limit = 0;
        Py_RETURN_NONE;
    }
    long long v = PyLong_AsLongLong(limobj);
    if (v == -1 && PyErr_Occurred()) {
        PyErr_Format(PyExc_TypeError, "set_limit: limit must be an int number of bytes or None, got %R", limobj);
        return NULL;
    }
    if (v <= 0) {
        PyErr_Format(PyExc_ValueError, "set_limit: limit must be a positive number of bytes or None, got %lld", v);
        return NULL;
    }
    A->limit = (size_t)v;
    Py_RETURN_NONE;
}

static PyObject *py_get_limit(PyObject *self, PyObject *arg) {
    gm_allocator *A = parse_allocator(arg);
    if (!A) return NULL;
    if (!A->limit) Py_RETURN_NONE;
    return PyLong_FromSize_t(A->limit);
}

static PyObject *py_memory_capacity(PyObject *self, PyObject *arg) {
    gm_allocator *A = parse_allocator(arg);
    return A ? PyLong_FromSize_t(A->capacity) : NULL;
}

static PyObject *py_set_meta_capacity(PyObject *self, PyObject *arg) {
    long long v = PyLong_AsLongLong(arg);
    if (v == -1 && PyErr_Occurred()) return NULL;
    if (v <= 0) {
        PyErr_Format(PyExc_ValueError, "set_meta_capacity: capacity must be positive, got %lld", v);
        return NULL;
    }
    meta_alloc.capacity = (size_t)v;
    Py_RETURN_NONE;
}

static PyObject *py_set_category(PyObject *self, PyObject *arg) {
    const char *name = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
    if (!name) {
        PyErr_Format(PyExc_TypeError, "category must be a str, got %R", arg);
        return NULL;
    }
    for (int i = 0; i < GM_NCAT; i++) {
        if (strcmp(name, gm_category_names[i]) == 0) {
            int prev = cur_category;
            cur_category = i;
            return PyUnicode_FromString(gm_category_names[prev]);
        }
    }
    PyErr_Format(PyExc_ValueError, "unknown memory category %R; expected one of parameter, gradient, optimizer, "
                 "activation, workspace, input, other", arg);
    return NULL;
}

static PyObject *py_get_category(PyObject *self, PyObject *unused) {
    return PyUnicode_FromString(gm_category_names[cur_category]);
}

static PyObject *py_set_scope(PyObject *self, PyObject *arg) {
    if (!PyUnicode_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "scope must be a str, got %R", arg);
        return NULL;
    }
    /* Intern: blocks keep a pointer to the scope's UTF-8, so the string must outlive them. */
    PyObject *kept = PyDict_SetDefault(scope_names, arg, arg);
    if (!kept) return NULL;
    const char *s = PyUnicode_AsUTF8(kept);
    if (!s) return NULL;
    PyObject *prev = PyUnicode_FromString(cur_scope);
    cur_scope = s;
    return prev;
}

static PyObject *py_get_scope(PyObject *self, PyObject *unused) { return PyUnicode_FromString(cur_scope); }

/* record_history(device, enabled, max_entries): enabling (again) starts a fresh, empty recording. */
static PyObject *py_record_history(PyObject *self, PyObject *args) {
    PyObject *devobj;
    int enabled;
    Py_ssize_t max_entries;
    if (!PyArg_ParseTuple(args, "Opn:record_history", &devobj, &enabled, &max_entries)) return NULL;
    gm_allocator *A = parse_allocator(devobj);
    if (!A) return NULL;
    if (enabled && (max_entries <= 0 || (size_t)max_entries > ((size_t)1 << 32))) {
        PyErr_Format(PyExc_ValueError, "record_history: max_entries must be in [1, 2**32], got %zd", max_entries);
        return NULL;
    }
    history_free(A);
    if (!enabled) Py_RETURN_NONE;
    gm_history *h = calloc(1, sizeof *h);
    gm_event *ev = h ? malloc((size_t)max_entries * sizeof *ev) : NULL;
    if (!ev) {
        free(h);
        return PyErr_NoMemory();
    }
    h->ev = ev;
    h->cap = (size_t)max_entries;
    h->t0 = now_ns();
    A->history = h;
    Py_RETURN_NONE;
}

/* get_history(device) -> [(t_ns, delta_bytes, category, scope, allocated_after, kind), ...], oldest first. */
static PyObject *py_get_history(PyObject *self, PyObject *arg) {
    gm_allocator *A = parse_allocator(arg);
    if (!A) return NULL;
    gm_history *h = A->history;
    PyObject *list = PyList_New(h ? (Py_ssize_t)h->count : 0);
    if (!list || !h) return list;
    size_t first = (h->head + h->cap - h->count) % h->cap;
    for (size_t i = 0; i < h->count; i++) {
        const gm_event *e = &h->ev[(first + i) % h->cap];
        PyObject *t = Py_BuildValue("(LLssLs)", (long long)e->t_ns, (long long)e->delta,
                                    gm_category_names[(int)e->category], e->scope, (long long)e->allocated,
                                    event_kinds[(int)e->kind]);
        if (!t) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    return list;
}

static PyObject *py_history_enabled(PyObject *self, PyObject *arg) {
    gm_allocator *A = parse_allocator(arg);
    if (!A) return NULL;
    return PyBool_FromLong(A->history != NULL);
}

PyMethodDef gm_allocator_methods[] = {
    {"memory_stats", py_memory_stats, METH_O, "Allocator statistics of a device as a dict."},
    {"memory_allocated", py_memory_allocated, METH_O, "Bytes in live blocks on a device."},
    {"max_memory_allocated", py_max_memory_allocated, METH_O, "Peak bytes in live blocks since the last reset."},
    {"memory_reserved", py_memory_reserved, METH_O, "Bytes held in segments (live + cached)."},
    {"reset_peak_memory_stats", py_reset_peak, METH_O, "Set every peak to its current value."},
    {"empty_cache", py_empty_cache, METH_O, "Release cached segments; returns the bytes released."},
    {"set_limit", py_set_limit, METH_VARARGS, "Cap a device's reserved bytes (None: no cap)."},
    {"get_limit", py_get_limit, METH_O, "The device's limit in bytes, or None."},
    {"memory_capacity", py_memory_capacity, METH_O, "Bytes the device has."},
    {"set_meta_capacity", py_set_meta_capacity, METH_O, "Capacity the meta device pretends to have."},
    {"set_category", py_set_category, METH_O, "Set this thread's allocation category; returns the previous."},
    {"get_category", py_get_category, METH_NOARGS, "This thread's allocation category."},
    {"set_scope", py_set_scope, METH_O, "Set this thread's allocation scope; returns the previous."},
    {"get_scope", py_get_scope, METH_NOARGS, "This thread's allocation scope."},
    {"record_history", py_record_history, METH_VARARGS,
     "record_history(device, enabled, max_entries): start a fresh ring of allocation events, or stop and free it."},
    {"get_history", py_get_history, METH_O,
     "Recorded events, oldest first: (t_ns, delta_bytes, category, scope, allocated_after, kind)."},
    {"history_enabled", py_history_enabled, METH_O, "Whether a device is recording its history."},
    {"label_unnamed", py_label_unnamed, METH_VARARGS,
     "label_unnamed(tensor, label): name the tensor's block in memory reports unless it is named already."},
    {NULL, NULL, 0, NULL},
};
