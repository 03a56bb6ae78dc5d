/* csrc/cuda.c — CUDA device queries, the one check macro for CUDA / cuBLAS / cuDNN calls, and _build_info().
 *
 * Everything that needs the CUDA headers is under GM_WITH_CUDA (defined by setup.py for a CUDA build). A CUDA
 * build links cudart statically, so it imports on a machine with no driver and no GPU: cudaGetDeviceCount then
 * fails, which here means "0 devices", never an exception. Not here: allocation (allocator.c), cuDNN
 * convolution, the kernels (kernels/cuda/). */
#include "gm.h"

#include <stdio.h>
#include <cblas.h> /* scipy_openblas32's: scipy_openblas_get_config / _get_corename / _get_num_threads */
#ifdef _OPENMP
#include <omp.h>
#endif

#ifndef GM_VERSION
#define GM_VERSION "unknown"
#endif
#ifndef GM_BLAS_PACKAGE
#define GM_BLAS_PACKAGE "scipy-openblas32"
#endif

#ifdef GM_WITH_CUDA
#include <cuda_runtime_api.h>
#ifndef GM_CUDA_EMU /* the emulator has no cuBLAS / cuDNN: their kernels have plain-loop stand-ins there */
#include <cublas_v2.h>
#include <cudnn.h>
#endif

/* ---- the check macro ---------------------------------------------------------------------------------------
 * GM_CUDA_CHECK(call) evaluates a CUDA runtime, cuBLAS or cuDNN call once (_Generic picks the checker from the
 * status type without evaluating it). On success it is 0. On failure it records "call text at file:line:
 * error name (description)" for the calling thread and is -1; nothing exits or aborts. The caller returns its
 * status up; the binding turns the recorded text into a Python exception with gm_cuda_raise().
 * Other csrc files use it once gm.h carries these declarations (they are exported for that). */
int gm_cuda_check_cudart(cudaError_t st, const char *call, const char *file, int line);
#ifdef GM_CUDA_EMU
#define GM_CUDA_CHECK(call) gm_cuda_check_cudart((call), #call, __FILE__, __LINE__)
#else
int gm_cuda_check_cublas(cublasStatus_t st, const char *call, const char *file, int line);
int gm_cuda_check_cudnn(cudnnStatus_t st, const char *call, const char *file, int line);
#define GM_CUDA_CHECK(call)                                                                                  \
    _Generic((call), cudaError_t: gm_cuda_check_cudart, cublasStatus_t: gm_cuda_check_cublas,              \
             cudnnStatus_t: gm_cuda_check_cudnn)((call), #call, __FILE__, __LINE__)
#endif
#endif

/* TF32 switches (gm.backends): PyTorch's defaults, convolutions may use TF32 and matmuls may not. Process-wide,
 * read by every context made after they are set (gm_cuda_ctx_for); kept but unused in a build without CUDA. */
static int allow_tf32;
static int cudnn_allow_tf32 = 1;

/* The last failure recorded on this thread ("" if none since the last gm_cuda_clear_error()). */
static _Thread_local char gm_cuda_err[640];

const char *gm_cuda_last_error(void) { return gm_cuda_err; }
void gm_cuda_clear_error(void) { gm_cuda_err[0] = '\0'; }

/* Raise RuntimeError carrying the recorded failure (with `what` as context, may be NULL); returns -1. */
int gm_cuda_raise(const char *what) {
    const char *msg = gm_cuda_err[0] ? gm_cuda_err : "unknown CUDA error (no failure was recorded)";
    if (what)
        PyErr_Format(PyExc_RuntimeError, "%s: %s", what, msg);
    else
        PyErr_SetString(PyExc_RuntimeError, msg);
    return -1;
}

#ifdef GM_WITH_CUDA
static int gm_cuda_record(const char *name, const char *desc, long code, const char *call, const char *file,
                          int line) {
    /* Only the file's basename: the build's absolute path says nothing to a user. */
    const char *base = strrchr(file, '/');
    snprintf(gm_cuda_err, sizeof gm_cuda_err, "%s failed at %s:%d: %s (%s, code %ld)", call, base ? base + 1 : file,
             line, name, desc, code);
    return -1;
}

int gm_cuda_check_cudart(cudaError_t st, const char *call, const char *file, int line) {
    if (st == cudaSuccess) return 0;
    /* Clears the runtime's per-thread "last error" for the non-sticky errors, so a later unrelated check does
     * not report this one again; a sticky error (a crashed kernel) stays and every later call reports it. */
    (void)cudaGetLastError();
#ifndef GM_CUDA_EMU
    /* With no driver installed at all, the runtime answers cudaErrorInsufficientDriver, whose text ("CUDA driver
     * version is insufficient for CUDA runtime version") sends people to upgrade a driver they do not have. A
     * driver version of 0 says there is none. */
    int drv = 0;
    if (st == cudaErrorInsufficientDriver && cudaDriverGetVersion(&drv) == cudaSuccess && drv == 0)
        return gm_cuda_record(cudaGetErrorName(st), "no NVIDIA driver found: install the NVIDIA driver to use CUDA",
                              (long)st, call, file, line);
#endif
    return gm_cuda_record(cudaGetErrorName(st), cudaGetErrorString(st), (long)st, call, file, line);
}

#ifndef GM_CUDA_EMU
static const char *gm_cublas_status_name(cublasStatus_t st) {
    switch (st) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "CUBLAS_STATUS_UNKNOWN";
    }
}

int gm_cuda_check_cublas(cublasStatus_t st, const char *call, const char *file, int line) {
    if (st == CUBLAS_STATUS_SUCCESS) return 0;
    return gm_cuda_record(gm_cublas_status_name(st), "cuBLAS", (long)st, call, file, line);
}

int gm_cuda_check_cudnn(cudnnStatus_t st, const char *call, const char *file, int line) {
    if (st == CUDNN_STATUS_SUCCESS) return 0;
    char detail[256];
    /* cuDNN 9 keeps a more specific message for the last failure on this thread. */
    cudnnGetLastErrorString(detail, sizeof detail);
    return gm_cuda_record(cudnnGetErrorString(st), detail[0] ? detail : "cuDNN", (long)st, call, file, line);
}
#endif /* !GM_CUDA_EMU */

/* Number of usable devices; 0 when there is no driver or no GPU (the reason stays in gm_cuda_last_error()).
 * Asked once: the answer cannot change within a process (CUDA_VISIBLE_DEVICES is read at driver start). */
static int gm_cuda_count(void) {
    static int known = -1;
    if (known >= 0) return known;
    int n = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS /* the first call loads and initialises the driver: can take a while */
    rc = GM_CUDA_CHECK(cudaGetDeviceCount(&n));
    Py_END_ALLOW_THREADS
    known = rc ? 0 : (n > GM_MAX_CUDA_DEVICES ? GM_MAX_CUDA_DEVICES : n);
    return known;
}

int gm_cuda_device_count(void) { return gm_cuda_count(); }

/* Parse a device index argument and check it against the device count; -1 + IndexError/TypeError. */
static int gm_cuda_index_arg(PyObject *arg, const char *fn) {
    if (!PyLong_Check(arg) || PyBool_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "%s: device index must be an int, got %.100s", fn, Py_TYPE(arg)->tp_name);
        return -1;
    }
    long i = PyLong_AsLong(arg);
    if (i == -1 && PyErr_Occurred()) return -1;
    int n = gm_cuda_count();
    if (i < 0 || i >= n) {
        if (n == 0)
            PyErr_Format(PyExc_IndexError, "%s: CUDA device index %ld out of range: there are 0 CUDA devices (%s)",
                         fn, i, gm_cuda_err[0] ? gm_cuda_err : "none found");
        else
            PyErr_Format(PyExc_IndexError, "%s: CUDA device index %ld out of range: there are %d CUDA device%s "
                         "(valid indices 0..%d)", fn, i, n, n == 1 ? "" : "s", n - 1);
        return -1;
    }
    return (int)i;
}

/* ---- per-device contexts -------------------------------------------------------------------------------------
 * One stream per device (DESIGN.md): every kernel, library call and copy of that device is queued on it, in
 * program order, so the caching allocator may hand a freed block to the next op without waiting (the op that
 * freed it was queued earlier on the same stream). The stream is non-blocking so that the legacy default stream
 * never serialises against it. cuBLAS and cuDNN handles are bound to it. Each thread gets its own gm_cuda_ctx
 * (the error buffer is per thread); the stream and handles are shared. Created on first use, never destroyed
 * (the driver reclaims them at exit; destroying them from an atexit hook races the driver's own teardown).
 * Offload's copies may go on a second, copy stream instead (below: _copy_async), ordered by events. */
typedef struct {
    int ready;
    void *stream, *cublas, *cudnn;
    int sm_count;
    /* The copy stream (made on first use by _copy_async): copies there overlap the compute stream's kernels. It
     * starts each copy after the compute stream's work queued so far (order_event), and a block it used is
     * kept from reuse until it passed (gm_block_record_copy_stream). */
    void *copy_stream, *order_event;
} gm_cuda_device_state;

static gm_cuda_device_state dev_state[GM_MAX_CUDA_DEVICES];
static _Thread_local gm_cuda_ctx thread_ctx[GM_MAX_CUDA_DEVICES];

static int gm_cuda_device_init(int i) {
    gm_cuda_device_state *d = &dev_state[i];
    cudaStream_t stream;
    if (GM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking))) return -1;
    d->stream = stream;
    if (GM_CUDA_CHECK(cudaDeviceGetAttribute(&d->sm_count, cudaDevAttrMultiProcessorCount, i))) return -1;
#ifndef GM_CUDA_EMU
    cublasHandle_t blas;
    cudnnHandle_t dnn;
    if (GM_CUDA_CHECK(cublasCreate(&blas)) || GM_CUDA_CHECK(cublasSetStream(blas, stream))) return -1;
    d->cublas = blas;
    if (GM_CUDA_CHECK(cudnnCreate(&dnn)) || GM_CUDA_CHECK(cudnnSetStream(dnn, stream))) return -1;
    d->cudnn = dnn;
#endif
    d->ready = 1;
    return 0;
}

gm_cuda_ctx *gm_cuda_ctx_for(gm_device dev) {
    char name[16];
    if (dev.type != GM_DEV_CUDA || dev.index < 0 || dev.index >= GM_MAX_CUDA_DEVICES) {
        PyErr_Format(PyExc_RuntimeError, "internal: gm_cuda_ctx_for(%s)", gm_device_str(dev, name));
        return NULL;
    }
    int i = dev.index;
    gm_cuda_clear_error();
    if (GM_CUDA_CHECK(cudaSetDevice(i)) || (!dev_state[i].ready && gm_cuda_device_init(i) < 0)) {
        gm_cuda_raise(gm_device_str(dev, name));
        return NULL;
    }
    gm_cuda_ctx *c = &thread_ctx[i];
    c->device = i;
    c->stream = dev_state[i].stream;
    c->cublas = dev_state[i].cublas;
    c->cudnn = dev_state[i].cudnn;
    c->sm_count = dev_state[i].sm_count;
    c->allow_tf32 = allow_tf32;
    c->cudnn_allow_tf32 = cudnn_allow_tf32;
    c->err[0] = '\0';
    return c;
}

int gm_cuda_kernel_status(const char *op, int status, const gm_cuda_ctx *ctx) {
    if (status == GM_OK) return 0;
    if (status == GM_ERR_BACKEND)
        PyErr_Format(PyExc_RuntimeError, "%s: the CUDA kernel failed on cuda:%d: %s", op, ctx->device,
                     ctx->err[0] ? ctx->err : "(no message)");
    else
        PyErr_Format(PyExc_RuntimeError, "%s: the CUDA kernel refused its arguments (status %d: %s; an argument "
                     "the validation missed, please report)", op, status,
                     status == GM_ERR_UNSUPPORTED ? "unsupported" : "bad argument");
    return -1;
}

/* ---- device memory for the allocator (allocator.c) -------------------------------------------------------- */
/* cudaMalloc on device i; NULL when the device is out of memory (the allocator then frees its cache, retries,
 * and finally raises OutOfMemoryError). Any other failure is recorded for gm_cuda_last_error(). */
void *gm_cuda_segment_alloc(int i, size_t size, int *out_of_memory) {
    void *p = NULL;
    *out_of_memory = 0;
    if (GM_CUDA_CHECK(cudaSetDevice(i))) return NULL;
    cudaError_t st = cudaMalloc(&p, size);
    if (st == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError(); /* not sticky: clear it so that the next check does not report it again */
        *out_of_memory = 1;
        return NULL;
    }
    if (GM_CUDA_CHECK(st)) return NULL;
    return p;
}

/* cudaFree waits for the device to finish with the memory (it synchronises), so a segment can go back to the
 * driver while kernels that used it are still queued. */
void gm_cuda_segment_free(int i, void *p) {
    if (GM_CUDA_CHECK(cudaSetDevice(i))) return;
    (void)GM_CUDA_CHECK(cudaFree(p));
}

/* ---- pinned host memory for the allocator (allocator.c) ----------------------------------------------------
 * Portable: usable for copies with every device, not only the one current when it was allocated. */
void *gm_cuda_host_alloc(size_t size, int *out_of_memory) {
    void *p = NULL;
    *out_of_memory = 0;
    cudaError_t st = cudaHostAlloc(&p, size, cudaHostAllocPortable);
    if (st == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        *out_of_memory = 1;
        return NULL;
    }
    if (GM_CUDA_CHECK(st)) return NULL;
    return p;
}

void gm_cuda_host_free(void *p) { (void)GM_CUDA_CHECK(cudaFreeHost(p)); }

/* Pinned host memory mapped into every device's address space: the fallback of a full device (set_fallback). Its
 * device pointer must be its host pointer (unified addressing, every 64-bit GPU since Fermi), because one block
 * address serves kernels and host reads alike; a system without it is refused rather than handed a wrong pointer. */
void *gm_cuda_host_alloc_mapped(size_t size, int *out_of_memory) {
    void *p = NULL, *dp = NULL;
    *out_of_memory = 0;
    cudaError_t st = cudaHostAlloc(&p, size, cudaHostAllocPortable | cudaHostAllocMapped);
    if (st == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        *out_of_memory = 1;
        return NULL;
    }
    if (GM_CUDA_CHECK(st)) return NULL;
    if (GM_CUDA_CHECK(cudaHostGetDevicePointer(&dp, p, 0)) || dp != p) {
        if (dp != p && dp)
            snprintf(gm_cuda_err, sizeof gm_cuda_err, "mapped host memory has device address %p for host address %p: "
                     "the host fallback needs unified addressing", dp, p);
        (void)cudaFreeHost(p);
        return NULL;
    }
    return p;
}

/* A CUDA driver call's failure (CUresult `code`), recorded as GM_CUDA_CHECK records the runtime's: -1; 0 on success.
 * For cuda_vmm.c, which reaches the driver through the runtime's entry points. */
int gm_cuda_check_driver(int code, const char *call, const char *file, int line) {
    if (code == 0) return 0;
    return gm_cuda_record(code == 2 ? "CUDA_ERROR_OUT_OF_MEMORY" : "CUresult", "CUDA driver call failed", code, call,
                          file, line);
}

static int copy_stream_ready(int i);

/* Record *event (created on first use, without timing: cheaper) on device's stream after the work queued so far.
 * An event lives on one device: recorded before on another one, it is waited for and replaced. */
static int event_record(void **event, int *event_dev, int device, int on_copy) {
    gm_cuda_ctx *c = gm_cuda_ctx_for((gm_device){GM_DEV_CUDA, device});
    if (!c || (on_copy && copy_stream_ready(device) < 0)) {
        PyErr_Clear(); /* the caller reports gm_cuda_last_error() */
        return -1;
    }
    if (*event && *event_dev != device) {
        int prev = device;
        if (GM_CUDA_CHECK(cudaSetDevice(*event_dev)) || GM_CUDA_CHECK(cudaEventSynchronize((cudaEvent_t)*event)) ||
            GM_CUDA_CHECK(cudaEventDestroy((cudaEvent_t)*event)) || GM_CUDA_CHECK(cudaSetDevice(prev)))
            return -1;
        *event = NULL;
    }
    if (!*event) {
        cudaEvent_t ev;
        if (GM_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming))) return -1;
        *event = ev;
        *event_dev = device;
    }
    void *stream = on_copy ? dev_state[device].copy_stream : c->stream;
    return GM_CUDA_CHECK(cudaEventRecord((cudaEvent_t)*event, (cudaStream_t)stream));
}

int gm_cuda_event_record(void **event, int *event_dev, int device) { return event_record(event, event_dev, device, 0); }

/* The same on device's copy stream (whose every copy started after the compute stream's work before it, so its
 * event passing means that work has run too). */
int gm_cuda_event_record_copy(void **event, int *event_dev, int device) {
    return event_record(event, event_dev, device, 1);
}

/* 1 when the stream passed the event, 0 while it is pending. A failed query (a crashed context, whose queued copies
 * will never run) counts as passed: nothing can read the memory any more. */
int gm_cuda_event_done(void *event) { return cudaEventQuery((cudaEvent_t)event) != cudaErrorNotReady; }

void gm_cuda_event_destroy(void *event) { (void)cudaEventDestroy((cudaEvent_t)event); }

/* Total and free bytes of device i (cudaMemGetInfo); 0 on failure. */
int gm_cuda_mem_info(int i, size_t *free_bytes, size_t *total) {
    *free_bytes = *total = 0;
    if (GM_CUDA_CHECK(cudaSetDevice(i))) return -1;
    return GM_CUDA_CHECK(cudaMemGetInfo(free_bytes, total));
}

/* ---- copies (transfer.c) --------------------------------------------------------------------------------------
 * n bytes between host and device i or within device i, on the device's stream. Host-to-device from pageable
 * memory returns once the source was staged (the caller may free it); device-to-host waits for the data. */
enum { GM_COPY_H2D = 1, GM_COPY_D2H = 2, GM_COPY_D2D = 3 };

int gm_cuda_copy(int i, void *dst, const void *src, size_t n, int kind) {
    gm_cuda_ctx *c = gm_cuda_ctx_for((gm_device){GM_DEV_CUDA, i});
    if (!c) return -1;
    if (n == 0) return 0;
    cudaStream_t s = (cudaStream_t)c->stream;
    enum cudaMemcpyKind k = kind == GM_COPY_H2D   ? cudaMemcpyHostToDevice
                            : kind == GM_COPY_D2H ? cudaMemcpyDeviceToHost
                                                  : cudaMemcpyDeviceToDevice;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = GM_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, k, s)) ||
         (kind == GM_COPY_D2H && GM_CUDA_CHECK(cudaStreamSynchronize(s)));
    Py_END_ALLOW_THREADS
    return rc ? gm_cuda_raise("copy") : 0;
}

/* Copy between two devices: through the host (peer access is not set up; rare in this library's use). */
int gm_cuda_copy_peer(int dst_dev, void *dst, int src_dev, const void *src, size_t n) {
    void *host = PyMem_RawMalloc(n ? n : 1);
    if (!host) {
        PyErr_NoMemory();
        return -1;
    }
    int rc = gm_cuda_copy(src_dev, host, src, n, GM_COPY_D2H) || gm_cuda_copy(dst_dev, dst, host, n, GM_COPY_H2D);
    if (!rc) {
        gm_cuda_ctx *c = gm_cuda_ctx_for((gm_device){GM_DEV_CUDA, dst_dev});
        /* the host buffer is freed next: wait until the staged upload no longer needs it */
        if (!c || GM_CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)c->stream))) rc = c ? gm_cuda_raise("copy") : -1;
    }
    PyMem_RawFree(host);
    return rc ? -1 : 0;
}

/* Wait for device i's stream (host reads of device data after kernels that wrote it). */
int gm_cuda_stream_sync(int i) {
    gm_cuda_ctx *c = gm_cuda_ctx_for((gm_device){GM_DEV_CUDA, i});
    if (!c) return -1;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = GM_CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)c->stream));
    Py_END_ALLOW_THREADS
    return rc ? gm_cuda_raise("synchronize") : 0;
}

/* ---- the copy stream ------------------------------------------------------------------------------------------
 * Offload's copies (a gradient going down as backward produces it, a saved activation coming back before backward
 * needs it) run there, beside the compute stream's kernels. Device i is current (gm_cuda_ctx_for was called). */
static int copy_stream_ready(int i) {
    gm_cuda_device_state *d = &dev_state[i];
    if (d->copy_stream) return 0;
    cudaStream_t s;
    cudaEvent_t ev;
    if (GM_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking))) return -1;
    if (GM_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming))) {
        (void)cudaStreamDestroy(s);
        return -1;
    }
    d->order_event = ev;
    d->copy_stream = s;
    return 0;
}

/* n bytes between host and device i (kind GM_COPY_H2D or GM_COPY_D2H) on the copy stream, after the compute
 * stream's work queued so far (the op that produced a gradient). Returns at once; the caller records the copy on
 * the blocks it used (gm_block_record_copy_stream), and the host or the compute stream waits for that event
 * (gm_cuda_event_wait) before reading what came down or using what came up. */
int gm_cuda_copy_async(int i, void *dst, const void *src, size_t n, int kind) {
    gm_cuda_ctx *c = gm_cuda_ctx_for((gm_device){GM_DEV_CUDA, i});
    if (!c) return -1;
    if (n == 0) return 0;
    gm_cuda_device_state *d = &dev_state[i];
    int rc = copy_stream_ready(i) ||
             GM_CUDA_CHECK(cudaEventRecord((cudaEvent_t)d->order_event, (cudaStream_t)c->stream)) ||
             GM_CUDA_CHECK(cudaStreamWaitEvent((cudaStream_t)d->copy_stream, (cudaEvent_t)d->order_event, 0)) ||
             GM_CUDA_CHECK(cudaMemcpyAsync(dst, src, n,
                                           kind == GM_COPY_H2D ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost,
                                           (cudaStream_t)d->copy_stream));
    return rc ? gm_cuda_raise("_copy_async") : 0;
}

/* Wait for event (recorded on device i): the host (on_device 0) or device i's compute stream. */
int gm_cuda_event_wait(void *event, int i, int on_device) {
    gm_cuda_ctx *c = gm_cuda_ctx_for((gm_device){GM_DEV_CUDA, i});
    if (!c) return -1;
    int rc;
    if (on_device) {
        rc = GM_CUDA_CHECK(cudaStreamWaitEvent((cudaStream_t)c->stream, (cudaEvent_t)event, 0));
    } else {
        Py_BEGIN_ALLOW_THREADS
        rc = GM_CUDA_CHECK(cudaEventSynchronize((cudaEvent_t)event));
        Py_END_ALLOW_THREADS
    }
    return rc ? gm_cuda_raise("_copy_wait") : 0;
}
#endif /* GM_WITH_CUDA */

#ifndef GM_WITH_CUDA
gm_cuda_ctx *gm_cuda_ctx_for(gm_device dev) {
    char name[16];
    PyErr_Format(PyExc_RuntimeError, "tensor on %s, but this build of gpumemnet has no CUDA support",
                 gm_device_str(dev, name));
    return NULL;
}
int gm_cuda_kernel_status(const char *op, int status, const gm_cuda_ctx *ctx) {
    (void)ctx;
    return gm_kernel_status(op, status);
}
#endif

static PyObject *py_cuda_mem_get_info(PyObject *self, PyObject *arg) {
#ifdef GM_WITH_CUDA
    int i = gm_cuda_index_arg(arg, "mem_get_info");
    if (i < 0) return NULL;
    size_t free_bytes, total;
    if (gm_cuda_mem_info(i, &free_bytes, &total) < 0) return gm_cuda_raise("mem_get_info"), NULL;
    return Py_BuildValue("(KK)", (unsigned long long)free_bytes, (unsigned long long)total);
#else
    return PyErr_Format(PyExc_RuntimeError, "mem_get_info: no CUDA device %R (gpumemnet was built without CUDA)",
                        arg);
#endif
}

/* Set one of the switches above. */
static PyObject *set_switch(int *flag, PyObject *arg) {
    int v = PyObject_IsTrue(arg);
    if (v < 0) return NULL;
    *flag = v;
    Py_RETURN_NONE;
}

static PyObject *py_set_allow_tf32(PyObject *self, PyObject *arg) { return set_switch(&allow_tf32, arg); }

static PyObject *py_set_cudnn_allow_tf32(PyObject *self, PyObject *arg) { return set_switch(&cudnn_allow_tf32, arg); }

static PyObject *py_cuda_device_count(PyObject *self, PyObject *noargs) {
#ifdef GM_WITH_CUDA
    return PyLong_FromLong(gm_cuda_count());
#else
    return PyLong_FromLong(0);
#endif
}

static PyObject *py_cuda_get_device_properties(PyObject *self, PyObject *arg) {
#ifdef GM_WITH_CUDA
    int i = gm_cuda_index_arg(arg, "_cuda_get_device_properties");
    if (i < 0) return NULL;
    struct cudaDeviceProp p;
    if (GM_CUDA_CHECK(cudaGetDeviceProperties(&p, i))) {
        gm_cuda_raise("_cuda_get_device_properties");
        return NULL;
    }
    return Py_BuildValue("{s:s,s:K,s:i,s:i,s:i}", "name", p.name, "total_memory",
                         (unsigned long long)p.totalGlobalMem, "major", p.major, "minor", p.minor,
                         "multi_processor_count", p.multiProcessorCount);
#else
    if (!PyLong_Check(arg) || PyBool_Check(arg))
        return PyErr_Format(PyExc_TypeError, "_cuda_get_device_properties: device index must be an int, got %.100s",
                            Py_TYPE(arg)->tp_name);
    return PyErr_Format(PyExc_IndexError,
                        "_cuda_get_device_properties: CUDA device index %R out of range: there are 0 CUDA devices "
                        "(gpumemnet was built without CUDA)", arg);
#endif
}

/* Wait for all work on device i (every stream). Restores the thread's current device. */
static PyObject *py_cuda_synchronize(PyObject *self, PyObject *arg) {
#ifdef GM_WITH_CUDA
    int i = gm_cuda_index_arg(arg, "_cuda_synchronize");
    if (i < 0) return NULL;
    int prev = 0, rc;
    Py_BEGIN_ALLOW_THREADS
    rc = GM_CUDA_CHECK(cudaGetDevice(&prev)) || GM_CUDA_CHECK(cudaSetDevice(i)) ||
         GM_CUDA_CHECK(cudaDeviceSynchronize()) || GM_CUDA_CHECK(cudaSetDevice(prev));
    Py_END_ALLOW_THREADS
    if (rc) {
        gm_cuda_raise("synchronize");
        return NULL;
    }
    Py_RETURN_NONE;
#else
    return PyErr_Format(PyExc_RuntimeError, "synchronize: no CUDA device %R (gpumemnet was built without CUDA)",
                        arg);
#endif
}

/* _cuda_current_device() -> int / _cuda_set_current_device(i): the thread's current CUDA device (csrc/device.c);
 * gm.cuda.set_device checks i against the devices there are. */
static PyObject *py_cuda_current_device(PyObject *self, PyObject *noarg) {
    return PyLong_FromLong(gm_current_cuda_index());
}

static PyObject *py_cuda_set_current_device(PyObject *self, PyObject *arg) {
    long i = PyLong_AsLong(arg);
    if (i == -1 && PyErr_Occurred()) return NULL;
    if (i < 0 || i >= GM_MAX_CUDA_DEVICES)
        return PyErr_Format(PyExc_ValueError, "set_device: device index %ld out of range [0, %d)", i,
                            GM_MAX_CUDA_DEVICES);
    gm_set_current_cuda_index((int)i);
    Py_RETURN_NONE;
}

/* _emu_hold_streams(on): in the emulator build, events recorded while on stay pending (cudaEventQuery says not
 * ready) until a synchronize or until turned off: lets tests see work that a GPU would still have queued. */
static PyObject *py_emu_hold_streams(PyObject *self, PyObject *arg) {
    int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
#if defined(GM_WITH_CUDA) && defined(GM_CUDA_EMU)
    gm_emu_hold_streams(on);
    Py_RETURN_NONE;
#else
    return PyErr_Format(PyExc_RuntimeError, "_emu_hold_streams: only the emulator build (GPUMEMNET_CUDA=emu) has it");
#endif
}

/* _cuda_streams(i): (compute, copy) stream handles of device i as "%p" text (the emulator's log names them so). */
static PyObject *py_cuda_streams(PyObject *self, PyObject *arg) {
#ifdef GM_WITH_CUDA
    int i = gm_cuda_index_arg(arg, "_cuda_streams");
    if (i < 0) return NULL;
    gm_cuda_ctx *c = gm_cuda_ctx_for((gm_device){GM_DEV_CUDA, i});
    if (!c) return NULL;
    if (copy_stream_ready(i) < 0) return gm_cuda_raise("_cuda_streams"), NULL;
    char a[32], b[32];
    snprintf(a, sizeof a, "%p", c->stream);
    snprintf(b, sizeof b, "%p", dev_state[i].copy_stream);
    return Py_BuildValue("(ss)", a, b);
#else
    return PyErr_Format(PyExc_RuntimeError, "_cuda_streams: no CUDA device %R (gpumemnet was built without CUDA)", arg);
#endif
}

/* _emu_stream_log(on) -> str: in the emulator build, start (on) or stop logging which stream each kernel, copy,
 * event record and wait was issued on, and each point where the host would wait for the device ("sync ..."), one
 * line each; returns the lines logged since the last call. */
static PyObject *py_emu_stream_log(PyObject *self, PyObject *arg) {
    int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
#if defined(GM_WITH_CUDA) && defined(GM_CUDA_EMU)
    size_t n = gm_emu_stream_log(on, NULL, 0);
    char *buf = PyMem_RawMalloc(n + 1);
    if (!buf) return PyErr_NoMemory();
    n = gm_emu_stream_log(on, buf, n + 1);
    PyObject *r = PyUnicode_FromStringAndSize(buf, (Py_ssize_t)n);
    PyMem_RawFree(buf);
    return r;
#else
    return PyErr_Format(PyExc_RuntimeError, "_emu_stream_log: only the emulator build (GPUMEMNET_CUDA=emu) has it");
#endif
}

static PyObject *py_cuda_last_error(PyObject *self, PyObject *noargs) {
    if (!gm_cuda_err[0]) Py_RETURN_NONE;
    return PyUnicode_FromString(gm_cuda_err);
}

static int gm_dict_set(PyObject *d, const char *key, PyObject *value) {
    if (!value) return -1;
    int rc = PyDict_SetItemString(d, key, value);
    Py_DECREF(value);
    return rc;
}

static PyObject *gm_str_or_none(const char *s) {
    if (!s || !s[0]) Py_RETURN_NONE;
    return PyUnicode_FromString(s);
}

#ifdef GM_WITH_CUDA
static PyObject *gm_version_str(int major, int minor, int patch) {
    return PyUnicode_FromFormat("%d.%d.%d", major, minor, patch);
}
#endif

static PyObject *py_build_info(PyObject *self, PyObject *noargs) {
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    /* scipy_openblas_get_config() is e.g. "OpenBLAS 0.3.30 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64":
     * the library version and, with DYNAMIC_ARCH, the kernel set chosen for this CPU. */
    const char *cfg = scipy_openblas_get_config();
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    if (gm_dict_set(d, "version", PyUnicode_FromString(GM_VERSION)) ||
        gm_dict_set(d, "blas", gm_str_or_none(cfg)) ||
        gm_dict_set(d, "blas_core", gm_str_or_none(scipy_openblas_get_corename())) ||
        gm_dict_set(d, "blas_threads", PyLong_FromLong(scipy_openblas_get_num_threads())) ||
        gm_dict_set(d, "blas_package", PyUnicode_FromString(GM_BLAS_PACKAGE)) ||
        gm_dict_set(d, "openmp_threads", PyLong_FromLong(threads)))
        goto fail;
#if defined(GM_WITH_CUDA) && defined(GM_CUDA_EMU)
    if (gm_dict_set(d, "cuda", PyUnicode_FromString("emulator")) ||
        gm_dict_set(d, "cuda_runtime", PyUnicode_FromString("emulator")) ||
        gm_dict_set(d, "cuda_driver", PyUnicode_FromString("emulator")) ||
        gm_dict_set(d, "cuda_archs", PyUnicode_FromString("emulator")) || gm_dict_set(d, "cudnn", gm_str_or_none(NULL)) ||
        gm_dict_set(d, "cudnn_compiled", gm_str_or_none(NULL)) || gm_dict_set(d, "cublas", gm_str_or_none(NULL)))
        goto fail;
#elif defined(GM_WITH_CUDA)
    {
        /* These need no GPU and no driver: the runtime is in _C, cuBLAS and cuDNN answer from their library. */
        int drv = 0, rt = 0, maj = 0, min = 0, pat = 0;
        size_t cudnn = cudnnGetVersion(); /* 9.19.0 -> 91900 since cuDNN 9 */
        PyObject *cublas;
        if (!GM_CUDA_CHECK(cublasGetProperty(MAJOR_VERSION, &maj)) &&
            !GM_CUDA_CHECK(cublasGetProperty(MINOR_VERSION, &min)) &&
            !GM_CUDA_CHECK(cublasGetProperty(PATCH_LEVEL, &pat)))
            cublas = gm_version_str(maj, min, pat);
        else
            cublas = gm_str_or_none(GM_CUBLAS_VERSION);
        /* cudaDriverGetVersion answers 0 when no driver is installed. */
        if (GM_CUDA_CHECK(cudaDriverGetVersion(&drv))) drv = 0;
        if (GM_CUDA_CHECK(cudaRuntimeGetVersion(&rt))) rt = 0;
        if (gm_dict_set(d, "cuda", PyUnicode_FromString(GM_CUDA_VERSION)) ||
            gm_dict_set(d, "cuda_runtime", rt ? PyUnicode_FromFormat("%d.%d", rt / 1000, rt % 1000 / 10)
                                              : gm_str_or_none(NULL)) ||
            gm_dict_set(d, "cuda_driver", drv ? PyUnicode_FromFormat("%d.%d", drv / 1000, drv % 1000 / 10)
                                              : gm_str_or_none(NULL)) ||
            gm_dict_set(d, "cuda_archs", PyUnicode_FromString(GM_CUDA_ARCHS)) ||
            gm_dict_set(d, "cudnn", gm_version_str((int)(cudnn / 10000), (int)(cudnn % 10000 / 100),
                                                   (int)(cudnn % 100))) ||
            gm_dict_set(d, "cudnn_compiled", PyUnicode_FromString(GM_CUDNN_VERSION)) ||
            gm_dict_set(d, "cublas", cublas))
            goto fail;
    }
#else
    if (gm_dict_set(d, "cuda", gm_str_or_none(NULL)) || gm_dict_set(d, "cuda_runtime", gm_str_or_none(NULL)) ||
        gm_dict_set(d, "cuda_driver", gm_str_or_none(NULL)) || gm_dict_set(d, "cuda_archs", gm_str_or_none(NULL)) ||
        gm_dict_set(d, "cudnn", gm_str_or_none(NULL)) || gm_dict_set(d, "cudnn_compiled", gm_str_or_none(NULL)) ||
        gm_dict_set(d, "cublas", gm_str_or_none(NULL)))
        goto fail;
#endif
    return d;
fail:
    Py_DECREF(d);
    return NULL;
}

PyMethodDef gm_cuda_methods[] = {
    {"_cuda_device_count", py_cuda_device_count, METH_NOARGS,
     "Number of CUDA devices; 0 when built without CUDA or when there is no driver or GPU."},
    {"_cuda_get_device_properties", py_cuda_get_device_properties, METH_O,
     "dict(name, total_memory, major, minor, multi_processor_count) of CUDA device i."},
    {"_cuda_synchronize", py_cuda_synchronize, METH_O, "Wait for all work queued on CUDA device i."},
    {"_cuda_current_device", py_cuda_current_device, METH_NOARGS, "The thread's current CUDA device index."},
    {"_cuda_set_current_device", py_cuda_set_current_device, METH_O,
     "Make CUDA device i the thread's current one (what a bare 'cuda' names)."},
    {"_emu_hold_streams", py_emu_hold_streams, METH_O,
     "Emulator build only: keep events recorded from now on pending until a synchronize or _emu_hold_streams(False)."},
    {"_cuda_streams", py_cuda_streams, METH_O, "(compute, copy) stream handles of CUDA device i, as text."},
    {"_emu_stream_log", py_emu_stream_log, METH_O,
     "Emulator build only: log (on) the stream of each kernel, copy, event record and wait; returns the lines so far."},
    {"_cuda_last_error", py_cuda_last_error, METH_NOARGS,
     "The last failed CUDA/cuBLAS/cuDNN call on this thread (text, file:line, error), or None."},
    {"_cuda_mem_get_info", py_cuda_mem_get_info, METH_O, "(free, total) bytes of CUDA device i (cudaMemGetInfo)."},
    {"_set_allow_tf32", py_set_allow_tf32, METH_O,
     "Whether CUDA matrix products may use TF32 tensor cores (gm.backends.cuda.matmul.allow_tf32)."},
    {"_set_cudnn_allow_tf32", py_set_cudnn_allow_tf32, METH_O,
     "Whether cuDNN convolutions may use TF32 tensor cores (gm.backends.cudnn.allow_tf32)."},
    {"_build_info", py_build_info, METH_NOARGS,
     "dict: version, blas (OpenBLAS config), blas_core, cuda, cudnn, cublas (None when not built), threads."},
    {NULL, NULL, 0, NULL},
};
