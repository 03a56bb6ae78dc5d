/* csrc/alloc_stats.c — the allocator as Python sees it (gm.memory): statistics, peaks, the cache, limits and
 * capacities, and the allocation history. Each function copies what it reports out of the allocator under its lock
 * and builds the Python objects after releasing it (allocator.h says why). Also _allocator_stress, the test hook
 * that hammers one allocator from several native threads without the GIL. */
#include "allocator.h"
#include <stdlib.h>

static PyObject *stat_dict(const gm_stat *s) {
    return Py_BuildValue("{s:L,s:L}", "current", (long long)s->current, "peak", (long long)s->peak);
}

/* {category name: value}: of the integers `values`, or of the statistics `stats` when given. */
static PyObject *category_dict(const int64_t *values, const gm_stat *stats) {
    PyObject *d = PyDict_New();
    for (int i = 0; d && i < GM_NCAT; i++) {
        PyObject *v = stats ? stat_dict(&stats[i]) : PyLong_FromLongLong(values[i]);
        if (!v || PyDict_SetItemString(d, gm_category_names[i], v) < 0) Py_CLEAR(d);
        Py_XDECREF(v);
    }
    return d;
}

/* What memory_stats reports, copied under the lock. */
typedef struct {
    gm_stat allocated, reserved, requested, cat[GM_NCAT];
    int64_t num_allocs, num_frees, num_segment_allocs, num_segment_frees, num_retries, num_ooms, at_peak[GM_NCAT];
    const char *peak_scope;
    int peak_category;
    size_t peak_request, limit, capacity;
} stats_copy;

/* A's fallback allocator when one was ever set up (its blocks may outlive set_fallback(None)), else NULL. */
static gm_allocator *fallback_used(gm_allocator *A) {
    if (A->pinned) return NULL;
    gm_allocator *F = gm_fallback_of(A);
    return F && F->ready && (F->num_allocs || A->fallback) ? F : NULL;
}

/* {"device": {allocated, reserved, by_category}, and where a fallback is or was used "host" or "file": the same}:
 * what lives where. The device's own figures are memory_stats' top-level ones; the fallback's are not in them. */
static PyObject *by_location(gm_allocator *A, const stats_copy *s) {
    PyObject *d = Py_BuildValue("{s:{s:N,s:N,s:N}}", "device", "allocated", stat_dict(&s->allocated), "reserved",
                                stat_dict(&s->reserved), "by_category", category_dict(NULL, s->cat));
    gm_allocator *F = d ? fallback_used(A) : NULL;
    if (!F) return d;
    gm_stat allocated, reserved, cat[GM_NCAT];
    int64_t num_allocs;
    gm_lock(F);
    allocated = F->allocated, reserved = F->reserved, num_allocs = F->num_allocs;
    memcpy(cat, F->cat, sizeof cat);
    int location = F->location;
    gm_unlock(F);
    PyObject *f = Py_BuildValue("{s:N,s:N,s:N,s:L}", "allocated", stat_dict(&allocated), "reserved",
                                stat_dict(&reserved), "by_category", category_dict(NULL, cat), "num_allocs",
                                (long long)num_allocs);
    if (!f || PyDict_SetItemString(d, gm_location_name(location), f) < 0) Py_CLEAR(d);
    Py_XDECREF(f);
    return d;
}

static PyObject *py_memory_stats(PyObject *self, PyObject *arg) {
    gm_allocator *A = gm_allocator_parse(arg);
    if (!A) return NULL;
    stats_copy s;
    gm_lock(A);
    s.allocated = A->allocated, s.reserved = A->reserved, s.requested = A->requested;
    memcpy(s.cat, A->cat, sizeof s.cat);
    memcpy(s.at_peak, A->at_peak, sizeof s.at_peak);
    s.num_allocs = A->num_allocs, s.num_frees = A->num_frees, s.num_retries = A->num_retries;
    s.num_segment_allocs = A->num_segment_allocs, s.num_segment_frees = A->num_segment_frees;
    s.num_ooms = A->num_ooms;
    s.peak_scope = A->peak_scope, s.peak_category = A->peak_category, s.peak_request = A->peak_request;
    s.limit = A->limit, s.capacity = A->capacity;
    size_t largest = gm_largest_free_block(A);
    int expandable = A->expandable;
    gm_unlock(A);
    PyObject *locations = by_location(A, &s);
    if (!locations) return NULL;
    PyObject *cats = category_dict(NULL, s.cat);
    PyObject *at_peak = cats ? category_dict(s.at_peak, NULL) : NULL;
    if (!at_peak) {
        Py_XDECREF(cats);
        Py_DECREF(locations);
        return NULL;
    }
    PyObject *peak_info = Py_BuildValue("{s:N,s:s,s:s,s:n}", "by_category", at_peak, "scope",
                                        s.peak_scope ? s.peak_scope : "", "category",
                                        gm_category_names[s.peak_category], "request", (Py_ssize_t)s.peak_request);
    if (!peak_info) {
        Py_DECREF(cats);
        Py_DECREF(locations);
        return NULL;
    }
    return Py_BuildValue(
        "{s:N,s:s,s:N,s:N,s:N,s:N,s:N,s:L,s:L,s:L,s:L,s:L,s:L,s:n,s:n,s:n,s:n}", "by_location", locations,
        "allocator", expandable ? "expandable" : "caching", "allocated", stat_dict(&s.allocated),
        "at_peak", peak_info,
        "reserved", stat_dict(&s.reserved), "requested", stat_dict(&s.requested), "by_category", cats,
        "num_allocs", (long long)s.num_allocs, "num_frees", (long long)s.num_frees, "num_segment_allocs",
        (long long)s.num_segment_allocs, "num_segment_frees", (long long)s.num_segment_frees,
        "num_retries", (long long)s.num_retries, "num_ooms", (long long)s.num_ooms, "cached_free",
        (Py_ssize_t)(s.reserved.current - s.allocated.current), "largest_free_block",
        (Py_ssize_t)largest, "limit", (Py_ssize_t)s.limit, "capacity", (Py_ssize_t)s.capacity);
}

enum { READ_ALLOCATED, READ_PEAK, READ_RESERVED, READ_LIMIT, READ_CAPACITY, READ_HISTORY };

/* One figure of an allocator, read under its lock. */
static int read_figure(PyObject *arg, int which, int64_t *out) {
    gm_allocator *A = gm_allocator_parse(arg);
    if (!A) return -1;
    gm_lock(A);
    *out = which == READ_ALLOCATED ? A->allocated.current
           : which == READ_PEAK    ? A->allocated.peak
           : which == READ_RESERVED ? A->reserved.current
           : which == READ_LIMIT   ? (int64_t)A->limit
           : which == READ_CAPACITY ? (int64_t)A->capacity
                                    : A->history != NULL;
    gm_unlock(A);
    return 0;
}

static PyObject *py_memory_allocated(PyObject *self, PyObject *arg) {
    int64_t v;
    return read_figure(arg, READ_ALLOCATED, &v) < 0 ? NULL : PyLong_FromLongLong(v);
}

static PyObject *py_max_memory_allocated(PyObject *self, PyObject *arg) {
    int64_t v;
    return read_figure(arg, READ_PEAK, &v) < 0 ? NULL : PyLong_FromLongLong(v);
}

static PyObject *py_memory_reserved(PyObject *self, PyObject *arg) {
    int64_t v;
    return read_figure(arg, READ_RESERVED, &v) < 0 ? NULL : PyLong_FromLongLong(v);
}

static PyObject *py_get_limit(PyObject *self, PyObject *arg) {
    int64_t v;
    if (read_figure(arg, READ_LIMIT, &v) < 0) return NULL;
    if (!v) Py_RETURN_NONE;
    return PyLong_FromSize_t((size_t)v);
}

static PyObject *py_memory_capacity(PyObject *self, PyObject *arg) {
    int64_t v;
    return read_figure(arg, READ_CAPACITY, &v) < 0 ? NULL : PyLong_FromSize_t((size_t)v);
}

static PyObject *py_history_enabled(PyObject *self, PyObject *arg) {
    int64_t v;
    return read_figure(arg, READ_HISTORY, &v) < 0 ? NULL : PyBool_FromLong((long)v);
}

static PyObject *py_reset_peak(PyObject *self, PyObject *arg) {
    gm_allocator *A = gm_allocator_parse(arg);
    if (!A) return NULL;
    gm_lock(A);
    A->allocated.peak = A->allocated.current;
    gm_snapshot_peak(A, "", GM_CAT_OTHER, 0);
    A->reserved.peak = A->reserved.current;
    A->requested.peak = A->requested.current;
    for (int i = 0; i < GM_NCAT; i++) A->cat[i].peak = A->cat[i].current;
    gm_unlock(A);
    gm_allocator *F = fallback_used(A);
    if (F) {
        gm_lock(F);
        F->allocated.peak = F->allocated.current;
        F->reserved.peak = F->reserved.current;
        for (int i = 0; i < GM_NCAT; i++) F->cat[i].peak = F->cat[i].current;
        gm_unlock(F);
    }
    Py_RETURN_NONE;
}

static PyObject *py_empty_cache(PyObject *self, PyObject *arg) {
    gm_allocator *A = gm_allocator_parse(arg);
    if (!A) return NULL;
    gm_lock(A);
    size_t released = gm_release_cached(A);
    gm_unlock(A);
    gm_allocator *F = fallback_used(A);
    if (F) {
        gm_lock(F);
        released += gm_release_cached(F);
        gm_unlock(F);
    }
    return PyLong_FromSize_t(released);
}

/* _fresh_segments(device, on) -> the previous setting: while on (True), allocations reuse no free block of a
 * segment made before (allocator.h fresh_serial), as in a fresh process; segments made meanwhile are reused as
 * usual. False turns it off; an int from an earlier call restores that setting (estimates may nest). */
static PyObject *py_fresh_segments(PyObject *self, PyObject *args) {
    PyObject *devobj, *on;
    if (!PyArg_ParseTuple(args, "OO:_fresh_segments", &devobj, &on)) return NULL;
    gm_allocator *A = gm_allocator_parse(devobj);
    if (!A) return NULL;
    long long restore = 0;
    if (!PyBool_Check(on)) {
        restore = PyLong_AsLongLong(on);
        if (restore == -1 && PyErr_Occurred()) return NULL;
        if (restore < 0) {
            PyErr_Format(PyExc_ValueError, "_fresh_segments: on must be True, False or a serial >= 0, got %lld",
                         restore);
            return NULL;
        }
    }
    gm_lock(A);
    const int64_t was = A->fresh_serial;
    A->fresh_serial = on == Py_True ? A->segment_serial + 1 : on == Py_False ? 0 : (int64_t)restore;
    gm_unlock(A);
    return PyLong_FromLongLong(was);
}

static PyObject *py_set_limit(PyObject *self, PyObject *args) {
    PyObject *devobj, *limobj;
    if (!PyArg_ParseTuple(args, "OO:set_limit", &devobj, &limobj)) return NULL;
    gm_allocator *A = gm_allocator_parse(devobj);
    if (!A) return NULL;
    long long v = 0;
    if (limobj != Py_None) {
        v = PyLong_AsLongLong(limobj);
        if (v == -1 && PyErr_Occurred()) {
            PyErr_Format(PyExc_TypeError, "set_limit: limit must be an int number of bytes or None, got %R", limobj);
            return NULL;
        }
        if (v <= 0) {
            PyErr_Format(PyExc_ValueError, "set_limit: limit must be a positive number of bytes or None, got %lld",
                         v);
            return NULL;
        }
    }
    gm_lock(A);
    A->limit = (size_t)v; /* 0: none */
    gm_unlock(A);
    Py_RETURN_NONE;
}

static PyObject *py_set_meta_capacity(PyObject *self, PyObject *arg) {
    long long v = PyLong_AsLongLong(arg);
    if (v == -1 && PyErr_Occurred()) return NULL;
    if (v <= 0) {
        PyErr_Format(PyExc_ValueError, "set_meta_capacity: capacity must be positive, got %lld", v);
        return NULL;
    }
    gm_allocator *A = gm_allocator_meta();
    gm_lock(A);
    A->capacity = (size_t)v;
    gm_unlock(A);
    Py_RETURN_NONE;
}

static void history_free(gm_history *h) {
    if (!h) return;
    free(h->ev);
    free(h);
}

/* record_history(device, enabled, max_entries): enabling (again) starts a fresh, empty recording. */
static PyObject *py_record_history(PyObject *self, PyObject *args) {
    PyObject *devobj;
    int enabled;
    Py_ssize_t max_entries;
    if (!PyArg_ParseTuple(args, "Opn:record_history", &devobj, &enabled, &max_entries)) return NULL;
    gm_allocator *A = gm_allocator_parse(devobj);
    if (!A) return NULL;
    if (enabled && (max_entries <= 0 || (size_t)max_entries > ((size_t)1 << 32))) {
        PyErr_Format(PyExc_ValueError, "record_history: max_entries must be in [1, 2**32], got %zd", max_entries);
        return NULL;
    }
    gm_history *h = NULL;
    if (enabled) { /* made before taking the lock: the ring may be large */
        h = calloc(1, sizeof *h);
        gm_event *ev = h ? malloc((size_t)max_entries * sizeof *ev) : NULL;
        if (!ev) {
            free(h);
            return PyErr_NoMemory();
        }
        h->ev = ev;
        h->cap = (size_t)max_entries;
        h->t0 = gm_now_ns();
    }
    gm_lock(A);
    gm_history *old = A->history;
    A->history = h;
    gm_unlock(A);
    history_free(old);
    Py_RETURN_NONE;
}

/* get_history(device) -> [(t_ns, delta_bytes, category, scope, allocated_after, kind, location), ...], oldest first.
 * location: "device", or where a fallback block lives ("host", "file"); allocated_after is that location's. */
static PyObject *py_get_history(PyObject *self, PyObject *arg) {
    static const char *const event_kinds[] = {"alloc", "free", "retag"};
    gm_allocator *A = gm_allocator_parse(arg);
    if (!A) return NULL;
    gm_event *copy = NULL;
    size_t n = 0;
    gm_lock(A);
    gm_history *h = A->history;
    if (h && h->count && (copy = malloc(h->count * sizeof *copy))) {
        size_t first = (h->head + h->cap - h->count) % h->cap;
        for (n = 0; n < h->count; n++) copy[n] = h->ev[(first + n) % h->cap];
    }
    int failed = h && h->count && !copy;
    gm_unlock(A);
    if (failed) return PyErr_NoMemory();
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        const gm_event *e = &copy[i];
        PyObject *t = Py_BuildValue("(LLssLss)", (long long)e->t_ns, (long long)e->delta,
                                    gm_category_names[(int)e->category], e->scope, (long long)e->allocated,
                                    event_kinds[(int)e->kind], gm_location_name(e->location));
        if (!t) Py_CLEAR(list);
        else PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    free(copy);
    return list;
}

/* ---- _allocator_stress: the lock's test ----------------------------------------------------------------------
 * Native threads allocate and free blocks of many sizes (both pools, segments of their own) on cpu or meta
 * without the GIL, each under its own category. On cpu each thread writes its id every STRIDE bytes of a block and
 * checks them before freeing: two threads handed overlapping memory (blocks are 512-byte multiples) would see each
 * other's writes. */
#define STRIDE 256
typedef struct {
    gm_device dev;
    int id, rounds;
    unsigned seed;
    long corrupt, failed;
} stress_arg;

static void *stress_thread(void *p) {
    stress_arg *a = p;
    enum { LIVE = 8 };
    gm_block *live[LIVE] = {0};
    size_t sizes[LIVE] = {0};
    gm_swap_category(a->id % GM_NCAT);
    for (int r = 0; r < a->rounds; r++) {
        int k = (int)(rand_r(&a->seed) % LIVE);
        if (live[k]) {
            if (a->dev.type == GM_DEV_CPU) {
                const unsigned char *d = (const unsigned char *)gm_block_data(live[k]);
                for (size_t i = 0; i < sizes[k]; i += STRIDE)
                    if (d[i] != (unsigned char)a->id) { a->corrupt++; break; }
            }
            gm_free(live[k]);
            live[k] = NULL;
            continue;
        }
        unsigned kind = rand_r(&a->seed) % 16; /* mostly small, some large, a few with a segment of their own */
        size_t n = kind < 12 ? 1 + rand_r(&a->seed) % (64 * KiB)
                   : kind < 15 ? MiB + rand_r(&a->seed) % (3 * MiB)
                               : 10 * MiB + rand_r(&a->seed) % (2 * MiB);
        live[k] = gm_alloc_nogil(a->dev, n);
        if (!live[k]) { a->failed++; continue; }
        sizes[k] = n;
        if (a->dev.type == GM_DEV_CPU)
            for (size_t i = 0; i < n; i += STRIDE) gm_block_data(live[k])[i] = (char)a->id;
    }
    for (int k = 0; k < LIVE; k++) gm_free(live[k]);
    return NULL;
}

/* _allocator_stress(device, threads, rounds, seed) -> (corruptions, failed allocations). */
static PyObject *py_allocator_stress(PyObject *self, PyObject *args) {
    PyObject *devobj;
    int nthreads, rounds;
    unsigned seed;
    gm_device dev;
    if (!PyArg_ParseTuple(args, "OiiI:_allocator_stress", &devobj, &nthreads, &rounds, &seed)) return NULL;
    if (gm_parse_device(devobj, &dev, "device") < 0) return NULL;
    if (dev.type == GM_DEV_CUDA || nthreads < 1 || nthreads > 64 || rounds < 0) {
        PyErr_SetString(PyExc_ValueError, "_allocator_stress: device cpu or meta, 1..64 threads, rounds >= 0");
        return NULL;
    }
    stress_arg arg[64];
    pthread_t tid[64];
    int started = 0, rc = 0;
    Py_BEGIN_ALLOW_THREADS
    for (; started < nthreads; started++) {
        arg[started] = (stress_arg){dev, started + 1, rounds, seed * 2654435761u + (unsigned)started, 0, 0};
        if ((rc = pthread_create(&tid[started], NULL, stress_thread, &arg[started])) != 0) break;
    }
    for (int i = 0; i < started; i++) pthread_join(tid[i], NULL);
    Py_END_ALLOW_THREADS
    if (rc != 0) return PyErr_Format(PyExc_RuntimeError, "_allocator_stress: pthread_create failed (%d)", rc);
    long corrupt = 0, failed = 0;
    for (int i = 0; i < started; i++) corrupt += arg[i].corrupt, failed += arg[i].failed;
    return Py_BuildValue("(ll)", corrupt, failed);
}

/* _segments(device): the layout, [(pool, size, [(offset, size, allocated, serial), ...]), ...] in address order
 * (a test hook: what the estimate mirrors, and where a step's request lands). */
typedef struct { uintptr_t base; size_t off, size; int64_t serial; int pool, allocated, head; size_t seg_size; }
    block_copy;

static int block_copy_less(const void *a, const void *b) {
    const block_copy *x = a, *y = b;
    return x->base != y->base ? (x->base < y->base ? -1 : 1) : (x->off > y->off) - (x->off < y->off);
}

static PyObject *py_segments(PyObject *self, PyObject *arg) {
    gm_allocator *A = gm_allocator_parse(arg);
    if (!A) return NULL;
    size_t n = 0, cap = 256;
    block_copy *v = malloc(cap * sizeof *v);
    if (!v) return PyErr_NoMemory();
    gm_lock(A);
    for (gm_segment *g = A->segments; g && v; g = g->snext)
        for (gm_block *b = g->head; b && v; b = b->next) {
            if (n == cap) {
                block_copy *w = realloc(v, (cap *= 2) * sizeof *v);
                if (!w) free(v);
                v = w;
                if (!v) break;
            }
            v[n++] = (block_copy){(uintptr_t)g->base, (size_t)(b->addr - g->base), b->size, b->serial, g->pool,
                                  b->allocated, b == g->head, g->size};
        }
    gm_unlock(A);
    if (!v) return PyErr_NoMemory();
    qsort(v, n, sizeof *v, block_copy_less);
    PyObject *out = PyList_New(0), *blocks = NULL;
    for (size_t i = 0; out && i < n; i++) {
        if (v[i].head) {
            blocks = PyList_New(0);
            PyObject *seg = blocks ? Py_BuildValue("(inO)", v[i].pool, (Py_ssize_t)v[i].seg_size, blocks) : NULL;
            Py_XDECREF(blocks);
            if (!seg || PyList_Append(out, seg) < 0) Py_CLEAR(out);
            Py_XDECREF(seg);
            if (!out) break;
        }
        PyObject *b = Py_BuildValue("(nniL)", (Py_ssize_t)v[i].off, (Py_ssize_t)v[i].size, v[i].allocated,
                                    (long long)v[i].serial);
        if (!b || PyList_Append(blocks, b) < 0) Py_CLEAR(out);
        Py_XDECREF(b);
    }
    free(v);
    return out;
}

/* _meta_mirror(tensors): meta's segments laid out as the tensors' device has them (allocator.c, "mirroring");
 * the number of tensors given a twin block (0: nothing mirrored: tensors on meta, pinned or on several devices). */
static PyObject *py_meta_mirror(PyObject *self, PyObject *arg) {
    PyObject *seq = PySequence_Fast(arg, "_meta_mirror: a sequence of tensors");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > INT_MAX) n = 0;
    gm_block **blocks = PyMem_Calloc(n ? (size_t)n : 1, sizeof *blocks);
    if (!blocks) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(seq, i);
        if (!gm_is_tensor(o)) {
            PyMem_Free(blocks);
            Py_DECREF(seq);
            return PyErr_Format(PyExc_TypeError, "_meta_mirror: item %zd is a %s, not a Tensor", i,
                                Py_TYPE(o)->tp_name);
        }
        blocks[i] = ((GMTensor *)o)->storage->block;
    }
    int got = gm_meta_mirror(blocks, (int)n);
    PyMem_Free(blocks);
    Py_DECREF(seq);
    if (got < 0) return PyErr_NoMemory();
    return PyLong_FromLong(got);
}

static PyObject *py_meta_claim(PyObject *self, PyObject *arg) {
    long i = PyLong_AsLong(arg);
    if (i == -1 && PyErr_Occurred()) return NULL;
    gm_meta_claim(i < INT_MIN || i > INT_MAX ? -1 : (int)i);
    Py_RETURN_NONE;
}

static PyObject *py_meta_mirror_end(PyObject *self, PyObject *unused) {
    gm_meta_mirror_end();
    Py_RETURN_NONE;
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
    {"_fresh_segments", py_fresh_segments, METH_VARARGS,
     "_fresh_segments(device, on) -> previous: while on, no free block of an older segment is reused."},
    {"memory_capacity", py_memory_capacity, METH_O, "Bytes the device has."},
    {"set_meta_capacity", py_set_meta_capacity, METH_O, "Capacity the meta device pretends to have."},
    {"record_history", py_record_history, METH_VARARGS,
     "record_history(device, enabled, max_entries): start a fresh ring of allocation events, or stop and free it."},
    {"get_history", py_get_history, METH_O,
     "Recorded events, oldest first: (t_ns, delta_bytes, category, scope, allocated_after, kind, location)."},
    {"history_enabled", py_history_enabled, METH_O, "Whether a device is recording its history."},
    {"_allocator_stress", py_allocator_stress, METH_VARARGS,
     "_allocator_stress(device, threads, rounds, seed) -> (corruptions, failed): test hook, native threads "
     "allocating and freeing concurrently without the GIL."},
    {"_segments", py_segments, METH_O,
     "_segments(device) -> [(pool, size, [(offset, size, allocated, serial), ...]), ...]: the segments in address "
     "order and their blocks (a test hook)."},
    {"_meta_mirror", py_meta_mirror, METH_O,
     "_meta_mirror(tensors) -> n: meta's segments laid out as the tensors' device has them, each tensor's block "
     "held for its meta twin (estimate)."},
    {"_meta_claim", py_meta_claim, METH_O,
     "_meta_claim(i): this thread's next meta allocation takes the twin of _meta_mirror's tensors[i]."},
    {"_meta_mirror_end", py_meta_mirror_end, METH_NOARGS, "The twins nobody claimed become free meta space."},
    {NULL, NULL, 0, NULL},
};
