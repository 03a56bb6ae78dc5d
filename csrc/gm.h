/* csrc/gm.h — the C core's shared declarations: devices, storage, the Tensor object, the allocator's
 * interface, and the helpers every op file uses (argument parsing, errors, output allocation).
 * Each op family lives in its own csrc/ops_*.c and exports a PyMethodDef table that module.c gathers.
 *
 * The files call one way (tools/c_layers.py draws the graph; tests/test_layers_c.py keeps it acyclic), bottom up:
 *   device.c errors.c category.c threads.c meta_target.c   names, exceptions, per-thread state (use nothing here)
 *   args.c cuda.c                                          argument helpers; CUDA contexts, copies, segments
 *   alloc_report.c, allocator.c, alloc_stats.c             the caching allocator (allocator.h)
 *   tensor.c, ophelpers.c, transfer.c                      the Tensor object, op helpers, copies across devices
 *   ops_*.c random.c numpy.c tensor_views.c tensor_type.c  the ops and the Python face of Tensor
 *   dist_mpi_lib.c, dist_mpi.c, dist_nccl.c                MPI and NCCL, dlopen'ed at run time (dist_mpi.h)
 *   module.c                                               gathers the method tables */
#ifndef GM_H
#define GM_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "../kernels/common.h"

/* Every ValueError and TypeError that csrc raises is gm.ArgumentError (ValueError + RuntimeError) or
 * gm.ArgumentTypeError (TypeError + RuntimeError), made by errors.c at import, so that both Python's and PyTorch's
 * `except` catch it (docs/C_API.md, "Errors"). Redirecting the two names here covers every raise site at once;
 * csrc never tests an exception against them (PyErr_ExceptionMatches), where a subclass would change meaning. */
extern PyObject *GM_ArgumentError, *GM_ArgumentTypeError;
#define PyExc_ValueError GM_ArgumentError
#define PyExc_TypeError GM_ArgumentTypeError

/* ---- devices ---------------------------------------------------------------------------------- */
typedef enum { GM_DEV_CPU = 0, GM_DEV_CUDA = 1, GM_DEV_META = 2 } gm_devtype;
#define GM_MAX_CUDA_DEVICES 16
typedef struct {
    int type;  /* gm_devtype */
    int index; /* 0 for cpu and meta */
} gm_device;

static inline int gm_device_eq(gm_device a, gm_device b) { return a.type == b.type && a.index == b.index; }
/* ---- device.c ---- Parse "cpu", "meta", "cuda", "cuda:N" (str) into *dev. 0, or -1 with ValueError naming
 * `argname`. */
int gm_parse_device(PyObject *obj, gm_device *dev, const char *argname);
/* Writes "cpu" / "meta" / "cuda:N" into buf (>= 16 bytes). */
const char *gm_device_str(gm_device dev, char *buf);
/* The thread's current CUDA device index (0 until set): what a bare "cuda" names. */
int gm_current_cuda_index(void);
void gm_set_current_cuda_index(int i);

/* ---- categories and scope (category.c) -------------------------------------------------------- */
/* What a block holds; the one definition of each (the Python side, gm.memory.CATEGORY_DOCS, says the same):
 *   parameter        weights and buffers of a model (nn.Parameter, register_buffer)
 *   gradient         the .grad of leaves (parameters), accumulated in backward
 *   optimizer        optimizer state (momentum, Adam's moments)
 *   activation       tensors kept by the forward for backward (saved tensors), until backward has used them
 *   activation_grad  gradients of activations flowing through backward, and the temporaries that make them
 *   workspace        kernel scratch (im2col columns, cuDNN workspace, reduction partials), freed at once
 *   input            the data given to a model (gm.memory.estimate's batch and target)
 *   communication    buffers of gpumemnet.distributed's collectives: host staging of CUDA tensors, gathered and
 *                    scattered scratch, pickled objects
 *   other            everything else: tensors made outside a model and not saved for backward */
typedef enum {
    GM_CAT_PARAMETER = 0, GM_CAT_GRADIENT, GM_CAT_OPTIMIZER, GM_CAT_ACTIVATION, GM_CAT_ACTIVATION_GRAD,
    GM_CAT_WORKSPACE, GM_CAT_INPUT, GM_CAT_COMMUNICATION, GM_CAT_OTHER, GM_NCAT
} gm_category;
extern const char *const gm_category_names[GM_NCAT];
int gm_current_category(void);
/* Set this thread's category, returning the previous one: wrap a kernel's scratch allocation as
 *   int prev = gm_swap_category(GM_CAT_WORKSPACE); ws = gm_empty(...); gm_swap_category(prev); */
int gm_swap_category(int category);
/* This thread's scope ("features.3 forward"; interned: lives as long as the process). */
const char *gm_current_scope(void);
/* Set this thread's scope to an interned string (gm_intern, or one gm_current_scope returned); returns the
 * previous (autograd's backward walk names each node's allocations "<its forward scope> backward"). */
const char *gm_set_scope(const char *interned_scope);
/* A UTF-8 copy of a str that lives as long as the process (NULL + exception on failure). */
const char *gm_intern(PyObject *str);

/* ---- allocator (allocator.c; thread-safe: a lock per device, see allocator.h) -------------------- */
typedef struct gm_block gm_block;
/* Allocate nbytes on dev, tagged with the current thread's category and scope. Returns NULL with a Python
 * exception set (OutOfMemoryError, or RuntimeError for an unusable device / overflowing size). A zero-byte
 * request returns a valid block of the minimum size. */
gm_block *gm_alloc(gm_device dev, size_t nbytes);
/* gm_alloc for callers with a fallback: running out of memory (after releasing the cache and retrying) returns
 * NULL with no exception set and is not counted as an OOM; other failures (unusable device) raise as gm_alloc. */
gm_block *gm_try_alloc(gm_device dev, size_t nbytes);
/* For code running without the GIL (cpu and meta only): the policy of gm_try_alloc, NULL on any failure with no
 * exception set and nothing counted; the caller reports the failure once it holds the GIL again. */
gm_block *gm_alloc_nogil(gm_device dev, size_t nbytes);
/* Page-locked host memory (cudaHostAlloc) from the pinned allocator ("cpu-pinned" in the memory statistics).
 * NULL + RuntimeError without CUDA in the build or without a device, OutOfMemoryError as gm_alloc. */
gm_block *gm_alloc_pinned(size_t nbytes);
/* Host memory of a run on meta ("meta-host" in the statistics): fake addresses, counted apart from meta's. */
gm_block *gm_alloc_meta_host(size_t nbytes);
int gm_block_is_pinned(const gm_block *b);
/* After queueing a copy that reads pinned block b on device's stream: b is not reused before that copy ran
 * (freeing it earlier parks it until the stream passes). 0, or -1 with the failure in gm_cuda_last_error(). */
int gm_block_record_stream(gm_block *b, int device);
/* The same after a copy queued on device's copy stream (cuda.c _copy_async), which may read or write b: b is not
 * reused, even by the compute stream, before that copy ran (PyTorch's record_stream). */
int gm_block_record_copy_stream(gm_block *b, int device);
/* The event of b's last recorded copy (NULL if none) and, in *device, the device it was recorded on. */
void *gm_block_copy_event(gm_block *b, int *device);
void gm_free(gm_block *b);
char *gm_block_data(const gm_block *b);
void gm_block_set_category(gm_block *b, int category);
/* Name a block for OOM reports (the label must outlive it: pass gm_intern's result); _unnamed keeps a name. */
void gm_block_set_label(gm_block *b, const char *label);
void gm_block_label_unnamed(gm_block *b, const char *label);
int gm_block_category(const gm_block *b);
/* The order blocks were allocated in, per allocator (1, 2, ...): estimates lay out a model's meta copy in it. */
int64_t gm_block_serial(const gm_block *b);

/* ---- storage: a refcounted byte range owned by one allocator block ------------------------------- */
/* What the host saw of an int64 tensor's values as it went up to a device whole (gm_copy_across): the class losses
 * check their targets and count them from it instead of reading the device back (a wait per call). Valid while the
 * storage's version is `version`; "kept" leaves out PyTorch's default ignore_index (-100). */
typedef struct {
    int known;
    int64_t version, n, lo, hi, lo_kept, hi_kept, n_ignored;
} gm_index_summary;

#define GM_DEFAULT_IGNORE_INDEX (-100)

typedef struct {
    Py_ssize_t refcount;
    gm_block *block;  /* NULL for memory borrowed from a NumPy array (torch.from_numpy): `borrowed` owns it */
    PyObject *borrowed;
    char *data;       /* fake (never dereferenced) on meta */
    size_t nbytes;
    gm_device device;
    int64_t version;  /* bumped by every in-place write; autograd checks it */
    gm_index_summary idx;
    int inference;    /* made under inference_mode(): its tensors are PyTorch's inference tensors */
    Py_ssize_t saved; /* of refcount, the aliases autograd keeps for a backward (no pack hook): not views a
                       * user holds (copy_ of a value requiring grad may write here, as PyTorch's may) */
    /* Weak references to the views on this storage that a write may have to re-derive, or NULL: the recorded
     * views of a non-leaf root (Tensor._graph_view; an in-place write that gives the root a new node re-derives
     * them: indexing.rebase_views) and the views of a root that requires no grad (a value that requires grad
     * written into one gives them all the graph: indexing.write_plain_shared); tensor_views.c.
     * views_live: how many were alive at the last sweep of the dead ones. */
    PyObject *views;
    Py_ssize_t views_live;
} gm_storage;

gm_storage *gm_storage_new(gm_device dev, size_t nbytes); /* NULL + exception */
/* A storage owning block b (allocated for dev); NULL + exception (b is then freed). */
gm_storage *gm_storage_wrap(gm_block *b, gm_device dev, size_t nbytes);
void gm_storage_decref(gm_storage *s);
/* A storage over nbytes at data, which `owner` (a NumPy array, referenced until the storage goes) keeps alive: no
 * allocator block, so the allocator neither counts nor frees it. NULL + exception. */
gm_storage *gm_storage_borrow(char *data, size_t nbytes, PyObject *owner);
/* inference_mode's ContextVar (_core/state.py), registered by _C._set_inference_var; NULL before. */
extern PyObject *gm_inference_var;

/* ---- the Tensor object ----------------------------------------------------------------------------- */
typedef struct {
    PyObject_HEAD
    gm_storage *storage;
    int ndim;
    gm_dtype dtype;
    gm_device device;
    int64_t offset; /* in elements */
    int64_t shape[GM_MAX_DIMS];
    int64_t strides[GM_MAX_DIMS]; /* in elements */
    /* autograd metadata: owned and interpreted by python/gpumemnet/autograd.py */
    PyObject *grad;
    PyObject *grad_fn;
    PyObject *hooks;          /* a leaf's gradient hooks, run before accumulation (Tensor.register_hook) */
    PyObject *post_acc_hooks; /* a leaf's hooks run after .grad was written (register_post_accumulate_grad_hook) */
    PyObject *name;
    PyObject *grad_acc; /* a leaf's AccumulateGrad node, made once so its hooks see the summed gradient */
    PyObject *weakreflist;
    int requires_grad;
    int retains_grad;
    int is_view; /* made by a recorded view op: in-place writes would bypass its base's graph */
    /* A weak reference to the tensor this one is a view of (the root of a chain of views), or NULL: Tensor._base.
     * Weak: a node saving such a view would otherwise keep its base, and through grad_fn the graph, alive. */
    PyObject *base_ref;
    /* Writes through this tensor leave the storage's version alone: `t.data` (PyTorch gives .data a version counter
     * of its own; torchdiffeq writes `scratch.data[i] = v` "to sneak past the version checker"). Views inherit it. */
    char unversioned;
    int is_param; /* a gpumemnet.nn.Parameter (isinstance checks read this flag) */
    int output_nr;
} GMTensor;

extern PyTypeObject *GMTensor_Base;   /* _C.TensorBase (tensor.c; made by tensor_type.c) */
extern PyTypeObject *GMTensor_Class;  /* the class C creates: gpumemnet.Tensor once registered */
extern PyObject *GM_OutOfMemoryError; /* errors.c */

static inline int gm_is_tensor(PyObject *o) { return PyObject_TypeCheck(o, GMTensor_Base); }
int64_t gm_numel(const GMTensor *t);
int gm_is_contiguous(const GMTensor *t);
static inline char *gm_tensor_data(const GMTensor *t) {
    return t->storage->data + t->offset * (int64_t)gm_dtype_size(t->dtype);
}
/* Byte strides of t, for kernels (which take strides in bytes). */
void gm_byte_strides(const GMTensor *t, int64_t *out);

/* New contiguous tensor with fresh storage (allocated with the current category). NULL + exception. */
GMTensor *gm_empty(int ndim, const int64_t *shape, gm_dtype dt, gm_device dev);
/* gm_empty through gm_try_alloc: NULL with no exception when the memory is not there (see gm_try_alloc). */
GMTensor *gm_try_empty(int ndim, const int64_t *shape, gm_dtype dt, gm_device dev);
/* A new contiguous CPU tensor in pinned host memory. NULL + exception. */
GMTensor *gm_empty_pinned(int ndim, const int64_t *shape, gm_dtype dt);
/* A new meta tensor whose bytes count as the meta run's host memory ("meta-host"). NULL + exception. */
GMTensor *gm_empty_meta_host(int ndim, const int64_t *shape, gm_dtype dt);
/* Tensor._graph_view, _graph_views and _root_has_views (tensor_views.c): the views listed on a storage, which a
 * write into their memory must re-derive, as PyTorch regenerates a view's grad_fn after its base changed. */
PyObject *gm_get_graph_view(GMTensor *self, void *c);
int gm_set_graph_view(GMTensor *self, PyObject *v, void *c);
PyObject *gm_get_graph_views(GMTensor *self, void *c);
PyObject *gm_get_root_has_views(GMTensor *self, void *c);
/* New tensor sharing base's storage with the given geometry (no checks: callers validate). */
GMTensor *gm_view(GMTensor *base, int ndim, const int64_t *shape, const int64_t *strides, int64_t offset);
/* A tensor of dtype dt over storage s (which it takes a reference to) at offset 0 with the given geometry. */
GMTensor *gm_view_of_storage(gm_storage *s, int ndim, const int64_t *shape, const int64_t *strides, gm_dtype dt);
/* Contiguous row-major strides for shape. */
void gm_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides);
/* Product of shape with overflow and negativity checks; -1 + ValueError naming argname on failure. */
int64_t gm_checked_numel(int ndim, const int64_t *shape, const char *argname);
/* Copy src into dst elementwise (broadcasting src to dst's shape, casting dtypes). 0, or -1 + exception. */
int gm_copy_into(GMTensor *dst, GMTensor *src);
/* Mark an in-place write (version bump). */
static inline void gm_bump_version(GMTensor *t) {
    if (!t->unversioned) t->storage->version++;
}

/* ---- argument helpers (args.c) ------------------------------------------------------------------------ */
/* Parse a shape from an int or a sequence of ints; 0 or -1 + exception naming argname. */
int gm_parse_shape(PyObject *obj, int *ndim, int64_t *shape, const char *argname);
/* Like gm_parse_shape but entries may be negative (-1 to infer, negative dims): callers check. */
int gm_parse_shape_any(PyObject *obj, int *ndim, int64_t *shape, const char *argname);
/* Parse a dtype given as its name ("float32", ...) or its integer code. */
int gm_parse_dtype(PyObject *obj, gm_dtype *dt, const char *argname);
const char *gm_dtype_name(gm_dtype dt);
/* TypeError naming op, argname and dt when dt is a storage-only integer dtype (kernels/common.h); 0 otherwise. */
int gm_check_compute_dtype(const char *op, const char *argname, gm_dtype dt);
/* "(2, 3, 4)" into buf (>= 16*22 bytes). */
const char *gm_shape_str(int ndim, const int64_t *shape, char *buf);
#define GM_SHAPE_BUF 400
/* Normalise a possibly negative dim against ndim; -1 + IndexError naming argname. */
int gm_wrap_dim(int64_t dim, int ndim, const char *argname);
/* Check that every tensor is on `dev`; -1 + RuntimeError naming the op otherwise. */
int gm_check_same_device(const char *op, GMTensor *a, GMTensor *b);

/* ---- shared by the op families (ophelpers.c, errors.c) ------------------------------------------------ */
/* o as a Tensor, or NULL + TypeError "op: argname must be a Tensor, got ...". */
GMTensor *gm_tensor_arg(PyObject *o, const char *op, const char *argname);
/* errors.c: raise `type` with a printf-formatted message (%g allowed, unlike PyErr_Format); returns -1. */
int gm_errorf(PyObject *type, const char *fmt, ...);
/* errors.c: 0 for GM_OK; otherwise -1 + RuntimeError naming op and the status. */
int gm_kernel_status(const char *op, int status);
/* gm_empty tagged `workspace` (scratch an op frees before it returns). */
GMTensor *gm_empty_workspace(int ndim, const int64_t *shape, gm_dtype dt, gm_device dev);

/* ---- CUDA (csrc/cuda.c, csrc/transfer.c) -------------------------------------------------------------------
 * Ops dispatch on the device: CPU kernels for cpu, nothing for meta, and for cuda the `cuda_*` entry points of
 * kernels/cuda/ (kernels/cuda/README.md) with a context from gm_cuda_ctx_for. */
#include "../kernels/cuda/cuda_ctx.h"
/* The context of CUDA device dev for the calling thread: makes dev current and creates its stream and handles
 * on first use. NULL + RuntimeError when this build has no CUDA or the device cannot be used. */
gm_cuda_ctx *gm_cuda_ctx_for(gm_device dev);
/* 0 for GM_OK; otherwise -1 + RuntimeError "op: the CUDA kernel failed: <ctx->err>" (or the status). */
int gm_cuda_kernel_status(const char *op, int status, const gm_cuda_ctx *ctx);
/* ---- the GIL policy of CPU kernels (threads.c) --------------------------------------------------------------------
 * A CPU kernel runs without the GIL when its op is large: the largest tensor the op made (gm_empty) or took
 * (gm_tensor_arg) since the last dispatch on this thread has at least GM_NOGIL_MIN_WORK elements. 32768 elements
 * take some 10-50 µs in the simplest kernels: from there, giving the GIL away costs well under the work, while a
 * small op keeps it and its ~1 µs overhead (threads.c says why releasing it is not free). */
#define GM_NOGIL_MIN_WORK 32768
extern _Thread_local int64_t gm_op_work;
/* How many CPU kernels this thread ran without the GIL through GM_KERNEL: what the policy's tests read
 * (_C._gil_released_kernels). */
extern _Thread_local int64_t gm_gil_released_kernels;
static inline void gm_note_work(int64_t n) {
    if (n > gm_op_work) gm_op_work = n;
}
/* The op's size noted so far, forgotten for the next op. */
static inline int64_t gm_take_work(void) {
    int64_t n = gm_op_work;
    gm_op_work = 0;
    return n;
}

/* ---- dispatch: one kernel call on a tensor's device -------------------------------------------------------------
 * GM_KERNEL(op, dev, CPU_CALL, CUDA_CALL) runs CPU_CALL (a kernels/cpu call ending in gm_num_threads) on cpu and
 * CUDA_CALL (its kernels/cuda twin ending in `ctx`, the device's context that the macro declares) on cuda:N, and
 * nothing on meta. The GIL is released around a large CPU kernel (it computes and touches no Python object; the
 * status becomes an exception after the GIL is back) and kept for a CUDA one (it only queues work on the device's
 * stream). It evaluates to 0, or to -1 with an exception naming
 * op (gm_kernel_status, gm_cuda_kernel_status):
 *     if (GM_KERNEL(op, x->device, relu_forward(out, in, n, gm_num_threads), cuda_relu_forward(out, in, n, ctx)) < 0)
 *         goto fail;
 * Without CUDA in the build CUDA_CALL is not compiled (its kernels are not declared) and a CUDA device is refused
 * with gm_cuda_ctx_for's error (unreachable: that build's allocator makes no CUDA tensor). A GNU C statement
 * expression, as the build requires GCC or Clang anyway (nvcc's host compiler, _Generic, __builtin overflow). */
#define GM_KERNEL(op, dev, CPU_CALL, CUDA_CALL)                                                                 \
    ((dev).type == GM_DEV_CPU    ? GM_KERNEL_CPU_(op, CPU_CALL)                                                 \
     : (gm_op_work = 0, (dev).type == GM_DEV_CUDA) ? GM_KERNEL_CUDA_(op, dev, CUDA_CALL)                        \
                                                   : 0)
#define GM_KERNEL_CPU_(op, CPU_CALL)                                                                            \
    ({                                                                                                          \
        int gm_st_;                                                                                             \
        if (gm_take_work() >= GM_NOGIL_MIN_WORK) {                                                              \
            gm_gil_released_kernels++;                                                                          \
            Py_BEGIN_ALLOW_THREADS                                                                              \
            gm_st_ = (CPU_CALL);                                                                                \
            Py_END_ALLOW_THREADS                                                                                \
        } else {                                                                                                \
            gm_st_ = (CPU_CALL);                                                                                \
        }                                                                                                       \
        gm_kernel_status(op, gm_st_);                                                                           \
    })
#ifdef GM_WITH_CUDA
#define GM_KERNEL_CUDA_(op, dev, CUDA_CALL)                                                                     \
    ({                                                                                                          \
        gm_cuda_ctx *ctx = gm_cuda_ctx_for(dev);                                                                \
        ctx ? gm_cuda_kernel_status(op, (CUDA_CALL), ctx) : -1;                                                 \
    })
#else
#define GM_KERNEL_CUDA_(op, dev, CUDA_CALL) (gm_cuda_ctx_for(dev) ? 0 : -1)
#endif

/* ---- transfer.c ----
 * Copy src into dst when they live on different devices (cpu <-> cuda:N, cuda:N <-> cuda:M): shapes equal,
 * any dtypes (cast) and strides. 0, or -1 + exception. gm_copy_into calls it for cross-device pairs. */
int gm_copy_across(GMTensor *dst, GMTensor *src);
/* gm_copy_across; with non_blocking, a host-to-device copy from pinned memory returns before it ran (the source
 * block is kept from reuse until it has: gm_block_record_stream). Other copies are as gm_copy_across. */
int gm_copy_across_async(GMTensor *dst, GMTensor *src, int non_blocking);
/* A new contiguous tensor on dev holding t's values (same shape and dtype). NULL + exception. */
GMTensor *gm_to_device(GMTensor *t, gm_device dev);
/* transfer.c packs and casts on one device with the same-device copy of ops_elementwise.c (gm_copy_into), which
 * sits above it (copy_ across devices calls gm_copy_across): module.c registers it here at import, so that the
 * files call one way (DESIGN.md: the higher layer registers a hook into the lower one). */
void gm_transfer_init(int (*same_device_copy)(GMTensor *dst, GMTensor *src));

/* threads.c: thread count for OpenMP loops in csrc (kernels read it through their own argument). */
extern int gm_num_threads;
void gm_threads_init(void);

/* ---- per-family method tables (each ops_*.c defines one, module.c gathers them) ----------------------- */
extern PyMethodDef gm_tensor_module_methods[];     /* tensor_type.c: creation, numpy, autograd helpers */
extern PyMethodDef gm_tensor_view_methods[];       /* tensor_views.c: TensorBase's view methods */
extern PyMethodDef gm_allocator_methods[];         /* alloc_stats.c: stats, limit, cache, history */
extern PyMethodDef gm_alloc_policy_methods[];      /* alloc_policy.c: set_fallback, set_allocator */
extern PyMethodDef gm_category_methods[];          /* category.c: category, scope */
extern PyMethodDef gm_threads_methods[];           /* threads.c: set/get_num_threads */
extern PyMethodDef gm_elementwise_methods[];       /* ops_elementwise.c */
extern PyMethodDef gm_reduce_methods[];            /* ops_reduce.c */
extern PyMethodDef gm_matmul_methods[];            /* ops_matmul.c */
extern PyMethodDef gm_index_methods[];             /* ops_index.c */
extern PyMethodDef gm_random_methods[];            /* random.c */
extern PyMethodDef gm_cuda_methods[];              /* cuda.c: device queries, build info */
extern PyMethodDef gm_cuda_event_methods[];        /* cuda_event.c: CUDA events for gm.cuda.Event */
extern PyMethodDef gm_conv_methods[];              /* ops_conv.c: conv2d, conv_transpose2d, linear */
extern PyMethodDef gm_pool_methods[];              /* ops_pool.c: pooling, interpolate */
extern PyMethodDef gm_nnops_methods[];             /* ops_nnops.c: activations, dropout, norm, softmax, losses */
extern PyMethodDef gm_pad_methods[];               /* ops_pad.c: F.pad */
extern PyMethodDef gm_roi_methods[];               /* ops_roi.c: torchvision's roi_align */
extern PyMethodDef gm_optim_methods[];             /* ops_optim.c: fused optimizer steps */
extern PyMethodDef gm_amp_methods[];               /* ops_amp.c: GradScaler's fused unscale */
extern PyMethodDef gm_transfer_methods[];          /* transfer.c: copies between devices */
extern PyMethodDef gm_dist_mpi_methods[];          /* dist_mpi.c: gpumemnet.distributed's MPI backend */
extern PyMethodDef gm_dist_nccl_methods[];         /* dist_nccl.c: its NCCL backend (CUDA builds) */

int gm_tensor_type_init(PyObject *module);
/* tensor_type.c: TensorBase's number slots, filled by autograd_node.c (the operators record their autograd node
 * in C) before gm_tensor_type_init makes the type ready. */
extern PyNumberMethods gm_tensor_number_methods;
/* ops_elementwise.c: a op b for op a GM_EW_* code (tensors or numbers), as _C.binary without out=. */
PyObject *gm_binary(int op, PyObject *a, PyObject *b);
/* ... written into out (a tensor of the result's shape), as _C.binary(op, a, b, out). */
PyObject *gm_binary_out(int op, PyObject *a, PyObject *b, PyObject *out);
extern PyMethodDef gm_autograd_node_methods[]; /* autograd_node.c: _autograd_setup */
extern PyMethodDef gm_autograd_engine_methods[]; /* autograd_engine.c: _run_backward */
/* tensor_type.c: _C._grads_free(list): a tuple of whether each gradient may be overwritten by its consumer. */
PyObject *gm_grads_free(PyObject *list);
int gm_autograd_node_init(PyObject *module);    /* autograd_node.c: _C.Node and the operator slots */
int gm_allocator_init(void);
int gm_errors_init(PyObject *module); /* errors.c: makes gm.OutOfMemoryError */

#endif
