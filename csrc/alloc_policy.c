/* csrc/alloc_policy.c — the allocator's policies as Python switches them (gm.memory.set_fallback, set_allocator),
 * above the core:
 *   - fallback: when a device is full, blocks of chosen categories come from memory it can address without owning
 *     it (allocator.c "fallback" says how; this file only switches it on and off and says what is set);
 *   - expandable segments: one growing, granule-mapped segment per pool instead of cached segments
 *     (alloc_expand.c). */
#include "allocator.h"
#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#ifdef GM_WITH_CUDA
const char *gm_cuda_last_error(void); /* cuda.c */
#endif

static const char *const location_names[] = {"device", "host", "file"};

const char *gm_location_name(int location) { return location_names[location]; }

/* set_fallback(device, location, category_mask, note): location None (off), "host", or a directory (cpu: the files
 * are made there; meta: a name only). note: the expected slowdown, said in the one warning; None: no warning (an
 * estimate mirroring the device's fallback on meta). */
static PyObject *py_set_fallback(PyObject *self, PyObject *args) {
    PyObject *devobj, *locobj;
    unsigned int mask;
    const char *note;
    if (!PyArg_ParseTuple(args, "OOIz:set_fallback", &devobj, &locobj, &mask, &note)) return NULL;
    gm_allocator *A = gm_allocator_parse(devobj);
    if (!A) return NULL;
    gm_allocator *F = gm_fallback_of(A);
    if (!F) {
        PyErr_SetString(PyExc_ValueError, "set_fallback: cpu-pinned has no fallback (it is host memory already)");
        return NULL;
    }
    if (locobj == Py_None) {
        gm_lock(A);
        A->fallback = NULL;
        gm_unlock(A);
        gm_lock(F);
        gm_release_cached(F); /* what falls back stays where it is until freed; the cache has no more use */
        gm_unlock(F);
        Py_RETURN_NONE;
    }
    const char *loc = PyUnicode_Check(locobj) ? PyUnicode_AsUTF8(locobj) : NULL;
    if (!loc) {
        PyErr_Format(PyExc_TypeError, "set_fallback: location must be a str or None, got %R", locobj);
        return NULL;
    }
    int location = strcmp(loc, "host") == 0 ? GM_LOC_HOST : GM_LOC_FILE;
    if ((A->dev.type == GM_DEV_CUDA && location != GM_LOC_HOST) || (A->dev.type == GM_DEV_CPU && location != GM_LOC_FILE)) {
        PyErr_Format(PyExc_ValueError, "set_fallback: %s falls back to %s, got %R", A->dev.type == GM_DEV_CUDA
                     ? "a CUDA device" : "the CPU", A->dev.type == GM_DEV_CUDA ? "'host'" : "a directory", locobj);
        return NULL;
    }
    int fd = -1;
    size_t capacity = 0;
    if (location == GM_LOC_FILE && A->dev.type == GM_DEV_CPU) {
        struct statvfs st;
        fd = open(loc, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0 || fstatvfs(fd, &st) != 0) {
            PyErr_SetFromErrnoWithFilename(PyExc_OSError, loc);
            if (fd >= 0) close(fd);
            return NULL;
        }
        capacity = (size_t)st.f_bavail * (size_t)st.f_frsize; /* what the disk can still take */
    }
    gm_lock(F);
    int old_fd = F->fallback_fd_dir;
    F->fallback_fd_dir = fd;
    F->location = location;
    if (capacity) F->capacity = capacity;
    F->warned = note == NULL;
    snprintf(F->note, sizeof F->note, "%s", note ? note : "");
    gm_unlock(F);
    if (old_fd >= 0) close(old_fd);
    gm_lock(A);
    A->fallback = F;
    A->fallback_mask = mask;
    A->transient_peak = A->reserved.current - A->persistent_reserved; /* from now on (allocator.c state_first) */
    A->largest_transient = 0;
    gm_unlock(A);
    Py_RETURN_NONE;
}

/* get_fallback(device) -> None, or (location, category_mask): "host" or "file". */
static PyObject *py_get_fallback(PyObject *self, PyObject *arg) {
    gm_allocator *A = gm_allocator_parse(arg);
    if (!A) return NULL;
    gm_lock(A);
    gm_allocator *F = A->fallback;
    unsigned mask = A->fallback_mask;
    gm_unlock(A);
    if (!F) Py_RETURN_NONE;
    return Py_BuildValue("(sI)", location_names[F->location], mask);
}

/* set_allocator(device, expandable): switch a device between cached segments and expandable ones. Only while the
 * device holds no live block: blocks never move, and the two kinds of segment do not share free lists (PyTorch
 * reads its setting once, before the first allocation, for the same reason). */
static PyObject *py_set_allocator(PyObject *self, PyObject *args) {
    PyObject *devobj;
    int expandable;
    if (!PyArg_ParseTuple(args, "Op:set_allocator", &devobj, &expandable)) return NULL;
    gm_allocator *A = gm_allocator_parse(devobj);
    if (!A) return NULL;
    char name[16];
    gm_allocator_name(A, name);
    size_t granule = 0;
    if (expandable && !A->pinned) granule = gm_vm_granularity(A->dev);
    if (expandable && !granule) {
#ifdef GM_WITH_CUDA
        const char *why = A->dev.type == GM_DEV_CUDA ? gm_cuda_last_error() : "";
#else
        const char *why = "";
#endif
        PyErr_Format(PyExc_ValueError, "set_allocator: expandable segments map device memory with the CUDA driver's "
                     "virtual memory management, which %s has not (cuda:N has it; meta simulates it)%s%s", name,
                     why[0] ? ": " : "", why);
        return NULL;
    }
    gm_lock(A);
    if (A->expandable == expandable) {
        gm_unlock(A);
        Py_RETURN_NONE;
    }
    int64_t live = A->allocated.current;
    if (live == 0) {
        gm_release_cached(A);
        if (A->expandable) gm_expandable_drop(A);
        A->expandable = expandable;
        A->granule = granule;
    }
    gm_unlock(A);
    if (live) {
        char b[32];
        PyErr_Format(PyExc_RuntimeError, "set_allocator: %s holds %s in live tensors; switch the allocator before "
                     "the first tensor is made there (or after every one is freed)", name,
                     gm_format_bytes((double)live, b));
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *py_get_allocator(PyObject *self, PyObject *arg) {
    gm_allocator *A = gm_allocator_parse(arg);
    if (!A) return NULL;
    gm_lock(A);
    int expandable = A->expandable;
    gm_unlock(A);
    return PyUnicode_FromString(expandable ? "expandable" : "caching");
}

PyMethodDef gm_alloc_policy_methods[] = {
    {"set_fallback", py_set_fallback, METH_VARARGS,
     "set_fallback(device, location, category_mask, note): location None, 'host' or a directory."},
    {"get_fallback", py_get_fallback, METH_O, "None, or (location, category_mask)."},
    {"set_allocator", py_set_allocator, METH_VARARGS, "set_allocator(device, expandable)."},
    {"get_allocator", py_get_allocator, METH_O, "'caching' or 'expandable'."},
    {NULL, NULL, 0, NULL},
};
