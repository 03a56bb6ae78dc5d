/* csrc/ops_conv_workspace.c — where a convolution pass gets its scratch and runs: the bound on the im2col
 * workspace (set_conv_workspace_limit) and its planning on the CPU and meta; on CUDA the choice of the cuDNN
 * algorithm by the workspace the allocator can give, with its cache and test hooks (_conv_algo_*), and the same
 * choice on meta standing for CUDA; and conv_run_passes, which the forward and backward ops (ops_conv.c,
 * ops_conv_backward.c) hand their passes to.
 * See ops_conv.c's header for what each device allocates. */
#include "ops_conv_internal.h"
#include "meta_target.h"
#ifdef GM_WITH_CUDA
#include "cuda/conv.h"
#endif

/* 64 MiB of columns is a 3x3 conv over 64 channels at 120x120 per tile: big enough that gemm runs near its
 * peak, small next to the activations of any network that needs it. */
#define CONV_DEFAULT_WORKSPACE_LIMIT ((size_t)64 << 20)
static size_t conv_workspace_limit = CONV_DEFAULT_WORKSPACE_LIMIT;

/* One im2col workspace for the given passes (they share it, one after another): what is left of the limit
 * after `used` bytes of copies, at least one column. *ws stays NULL when no pass needs any; -1 with an exception
 * when one column exceeds the limit. The CPU kernels keep a column buffer per thread, so the size depends on
 * nthreads; meta plans exactly as the CPU does, so that a meta run reports the CPU's bytes (unless meta stands for
 * CUDA: then there are no columns, see the top of ops_conv.c). */
static int conv_workspace(const char *op, const conv_geom *g, gm_dtype dt, const conv_pass *passes, int npass,
                          size_t used, gm_device dev, int nthreads, GMTensor **ws) {
    *ws = NULL;
    size_t avail = conv_workspace_limit > used ? conv_workspace_limit - used : 0, n = 0;
    for (int i = 0; i < npass; i++) {
        size_t k = conv2d_workspace_nbytes(g, dt, passes[i], avail, nthreads);
        if (k > n) n = k;
    }
    if (n == 0) return 0;
    if (n > avail) {
        PyErr_Format(PyExc_RuntimeError, "%s: the convolution workspace limit (%zu bytes, %zu left after "
                     "contiguous copies of operands) cannot hold one im2col column of %zu bytes (in_channels/groups"
                     " * kH * kW = %lld elements of %s); raise it with set_conv_workspace_limit", op,
                     conv_workspace_limit, avail, n, (long long)(g->C / g->G * g->R * g->S), gm_dtype_name(dt));
        return -1;
    }
    int64_t len = (int64_t)n;
    *ws = gm_empty_workspace(1, &len, GM_BOOL, dev);
    return *ws ? 0 : -1;
}

/* The thread count an op plans and runs with (read once: the kernel must see what the workspace was sized for).
 * meta plans like the CPU (a meta run that stands for CUDA takes no columns at all). */
static int plan_threads(gm_device dev) {
    (void)dev;
    return gm_num_threads;
}

/* ---- CUDA: choosing the cuDNN algorithm of a pass --------------------------------------------------------
 * cuda_conv2d_algos lists the candidates best first (cuDNN's heuristics) with their workspace bytes; the first
 * whose workspace the allocator can give (tagged workspace, under the device's limit) is used: an
 * OutOfMemoryError from a larger one is cleared and the next is tried; when none fits, the last error stands.
 * The choice is cached. Cache key: the device index, the pass, the dtype, cuDNN's allow_tf32 and the whole
 * conv_geom (sizes, stride, padding, dilation, groups and the input's element strides, which cuDNN sees in its
 * descriptor); value: the candidate. A cached choice whose workspace no longer fits (a lower limit, a fuller
 * device) is dropped and the candidates are asked again. The table is small and replaced round-robin: a network
 * has a few dozen distinct convolutions. The GIL serialises access (the pick runs with it held).
 *
 * Meta standing for CUDA device N (meta_target.h, target "cuda:N") picks with the same function: the same
 * candidates from device N's cuDNN (the key is the same: device N's index, cuDNN's allow_tf32, the geometry meta's
 * tensors have, which are the real ones'), the same rule applied to meta's allocator (its limit is the one the
 * estimate runs with), and a meta workspace tensor taken and freed as the real one is. Only the table differs:
 * meta has its own, which estimate() empties before each run (_conv_algo_cache_clear("meta")), as the real table
 * is empty in a fresh process. A shared table would make the two differ: a choice the real run made under
 * another limit (or an estimate's under its own) is kept while its workspace fits, even where a better candidate
 * would fit now, so each side's history would steer the other's choices. With its own table, an estimate decides
 * exactly as a fresh process does, step after step (the second step finds the first step's choices in the table,
 * on meta as on the device).
 *
 * For tests (_C._conv_algo_fake): a list of fake workspace sizes replaces the candidates, on the device and on
 * meta alike; the pass then runs the direct kernels (valid with any workspace), so the selection logic is
 * testable in the emulator and on a GPU alike. _C._conv_algo_last() tells what the last pick chose. */
#ifdef GM_WITH_CUDA
typedef struct {
    int device, pass, dtype, tf32, fake;
    conv_geom g;
} conv_algo_key;

#define CONV_ALGO_CACHE 256
typedef struct {
    struct {
        int used;
        conv_algo_key key;
        cuda_conv_algo algo;
    } cache[CONV_ALGO_CACHE];
    int next;
    /* What the last pick chose: the pass, the candidate's index in the list (-1: from the cache), the candidate. */
    struct {
        int pass, index, cached;
        cuda_conv_algo algo;
    } last;
} conv_algo_table;

/* The CUDA devices' choices, and meta's (see above). */
static conv_algo_table cuda_algos = {.last = {-1, -1, 0, {0, 0, 0}}}, meta_algos = {.last = {-1, -1, 0, {0, 0, 0}}};

static size_t conv_fake_ws[CUDA_CONV_MAX_ALGOS];
static int conv_fake_n = -1; /* -1: no fake list */

static conv_algo_key algo_key(const gm_cuda_ctx *ctx, const conv_geom *g, gm_dtype dt, conv_pass pass) {
    conv_algo_key k;
    memset(&k, 0, sizeof k); /* padding bytes too: keys are compared with memcmp */
    k.device = ctx->device, k.pass = (int)pass, k.dtype = (int)dt, k.tf32 = ctx->cudnn_allow_tf32;
    k.fake = conv_fake_n >= 0;
    k.g = *g;
    return k;
}

/* The workspace of a candidate algorithm into *ws (NULL for none), on dev (cuda:N, or meta standing for it): 0;
 * 1 when it does not fit and `fallback` (another candidate follows: gm_try_alloc, so no OutOfMemoryError is built
 * nor an OOM counted); -1 with an exception (OutOfMemoryError when the last candidate does not fit). */
static int cuda_ws(size_t n, gm_device dev, GMTensor **ws, int fallback) {
    *ws = NULL;
    if (n == 0) return 0;
    int64_t len = (int64_t)n;
    int prev = gm_swap_category(GM_CAT_WORKSPACE);
    *ws = fallback ? gm_try_empty(1, &len, GM_BOOL, dev) : gm_empty(1, &len, GM_BOOL, dev);
    gm_swap_category(prev);
    if (*ws) return 0;
    return PyErr_Occurred() ? -1 : 1;
}

static void note_pick(conv_algo_table *t, conv_pass pass, int index, const cuda_conv_algo *algo) {
    t->last.pass = pass, t->last.index = index, t->last.cached = index < 0;
    t->last.algo = *algo;
}

/* The candidate to run `pass` with on ctx's device, its workspace allocated on dev into *ws (NULL when it needs
 * none): dev is ctx's device, or meta standing for it (t: the table of dev's kind). 0, or -1 with an exception
 * (OutOfMemoryError when no candidate's workspace fits). */
static int cuda_conv_pick(const char *op, const conv_geom *g, gm_dtype dt, conv_pass pass, gm_device dev,
                          gm_cuda_ctx *ctx, conv_algo_table *t, cuda_conv_algo *algo, GMTensor **ws) {
    const conv_algo_key key = algo_key(ctx, g, dt, pass);
    int slot = -1;
    for (int i = 0; i < CONV_ALGO_CACHE; i++)
        if (t->cache[i].used && !memcmp(&t->cache[i].key, &key, sizeof key)) {
            slot = i;
            break;
        }
    if (slot >= 0) {
        int r = cuda_ws(t->cache[slot].algo.ws, dev, ws, 1);
        if (r == 0) {
            *algo = t->cache[slot].algo;
            note_pick(t, pass, -1, algo);
            return 0;
        }
        if (r < 0) return -1; /* r == 1: it no longer fits, choose again */
    }
    cuda_conv_algo cand[CUDA_CONV_MAX_ALGOS];
    int n = 0, fake = conv_fake_n >= 0;
    if (fake) {
        for (n = 0; n < conv_fake_n; n++) cand[n] = (cuda_conv_algo){CUDA_CONV_DIRECT, 0, conv_fake_ws[n]};
    } else {
        int st;
        Py_BEGIN_ALLOW_THREADS
        st = cuda_conv2d_algos(g, dt, pass, cand, CUDA_CONV_MAX_ALGOS, &n, ctx);
        Py_END_ALLOW_THREADS
        if (gm_cuda_kernel_status(op, st, ctx) < 0) return -1;
    }
    for (int i = 0; i < n; i++) {
        int r = cuda_ws(cand[i].ws, dev, ws, i < n - 1);
        if (r < 0) return -1;
        if (r > 0) continue;
        *algo = cand[i];
        if (slot < 0) {
            slot = t->next;
            t->next = (t->next + 1) % CONV_ALGO_CACHE;
        }
        t->cache[slot].used = 1;
        t->cache[slot].key = key;
        t->cache[slot].algo = *algo;
        note_pick(t, pass, i, algo);
        return 0;
    }
    PyErr_Format(PyExc_RuntimeError, "%s: no convolution algorithm for this geometry", op);
    return -1;
}

static void conv_algo_cache_clear(conv_algo_table *t) {
    memset(t->cache, 0, sizeof t->cache);
    t->next = 0;
}

/* Run one pass on CUDA: pick (and allocate the workspace), run, free the workspace (stream-ordered: safe right
 * after the launch). which: CONV_FORWARD (a = out, b = inp, c = weight, bias), CONV_BACKWARD_DATA (a = dinp,
 * b = dout, c = weight, bias), CONV_BACKWARD_WEIGHT (a = dweight, b = dout, c = inp). */
static int cuda_conv_pass(const char *op, const conv_geom *g, gm_dtype dt, conv_pass pass, gm_device dev, void *a,
                          const void *b, const void *c, const void *bias) {
    gm_cuda_ctx *ctx = gm_cuda_ctx_for(dev);
    if (!ctx) return -1;
    cuda_conv_algo algo;
    GMTensor *ws = NULL;
    if (cuda_conv_pick(op, g, dt, pass, dev, ctx, &cuda_algos, &algo, &ws) < 0) return -1;
    void *pws = ws ? gm_tensor_data(ws) : NULL;
    size_t nws = tensor_nbytes(ws);
    int st;
    Py_BEGIN_ALLOW_THREADS
    if (pass == CONV_FORWARD) st = cuda_conv2d_forward(a, b, c, bias, g, dt, &algo, pws, nws, ctx);
    else if (pass == CONV_BACKWARD_DATA) st = cuda_conv2d_backward_data(a, b, c, bias, g, dt, &algo, pws, nws, ctx);
    else st = cuda_conv2d_backward_weight(a, b, c, g, dt, &algo, pws, nws, ctx);
    Py_END_ALLOW_THREADS
    Py_XDECREF(ws);
    return gm_cuda_kernel_status(op, st, ctx);
}
#endif

/* Convolution passes run on meta standing for CUDA with no cuDNN to ask (target "cuda"), whose workspace was
 * therefore not counted: per thread, as the target is; estimate() reads it (_conv_workspace_uncounted). */
static _Thread_local long long conv_ws_uncounted;

/* The passes of a convolution on meta standing for CUDA: each takes and frees the workspace of the candidate the
 * device would pick (cuda_conv_pick on meta's table), or none when there is no cuDNN to ask. */
static int meta_cuda_passes(const char *op, const conv_geom *g, gm_dtype dt, gm_device dev, const conv_job *jobs,
                            int n) {
    const int cu = gm_meta_cudnn_device();
    if (cu < 0) {
        conv_ws_uncounted += n;
        return 0;
    }
#ifdef GM_WITH_CUDA
    gm_cuda_ctx *ctx = gm_cuda_ctx_for((gm_device){GM_DEV_CUDA, cu});
    if (!ctx) return -1;
    for (int i = 0; i < n; i++) {
        cuda_conv_algo algo;
        GMTensor *ws = NULL;
        if (cuda_conv_pick(op, g, dt, jobs[i].pass, dev, ctx, &meta_algos, &algo, &ws) < 0) return -1;
        Py_XDECREF(ws);
    }
    return 0;
#else
    (void)op, (void)g, (void)dt, (void)dev, (void)jobs; /* unreachable: meta_target.c accepts no "cuda:N" */
    return 0;
#endif
}

/* "cuda" (the default) or "meta": the algorithm table an entry point below is about (NULL + ValueError). */
#ifdef GM_WITH_CUDA
static conv_algo_table *table_arg(PyObject *args, const char *fn) {
    const char *which = "cuda";
    if (!PyArg_ParseTuple(args, "|s", &which)) return NULL;
    if (!strcmp(which, "cuda")) return &cuda_algos;
    if (!strcmp(which, "meta")) return &meta_algos;
    PyErr_Format(PyExc_ValueError, "%s: expected 'cuda' (the devices' choices) or 'meta' (an estimate's), got '%s'",
                 fn, which);
    return NULL;
}
#endif

PyObject *gm_py_conv_algo_fake(PyObject *self, PyObject *arg) {
#ifdef GM_WITH_CUDA
    if (arg == Py_None) {
        conv_fake_n = -1;
        conv_algo_cache_clear(&cuda_algos);
        conv_algo_cache_clear(&meta_algos);
        Py_RETURN_NONE;
    }
    PyObject *seq = PySequence_Fast(arg, "_conv_algo_fake: expected None or a sequence of workspace sizes");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n < 1 || n > CUDA_CONV_MAX_ALGOS) {
        Py_DECREF(seq);
        return PyErr_Format(PyExc_ValueError, "_conv_algo_fake: expected 1 to %d sizes", CUDA_CONV_MAX_ALGOS);
    }
    size_t v[CUDA_CONV_MAX_ALGOS];
    for (Py_ssize_t i = 0; i < n; i++) {
        v[i] = PyLong_AsSize_t(PySequence_Fast_GET_ITEM(seq, i));
        if (v[i] == (size_t)-1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return NULL;
        }
    }
    Py_DECREF(seq);
    memcpy(conv_fake_ws, v, sizeof v);
    conv_fake_n = (int)n;
    conv_algo_cache_clear(&cuda_algos);
    conv_algo_cache_clear(&meta_algos);
    Py_RETURN_NONE;
#else
    (void)arg;
    return PyErr_Format(PyExc_RuntimeError, "_conv_algo_fake: this build has no CUDA");
#endif
}

PyObject *gm_py_conv_algo_last(PyObject *self, PyObject *args) {
#ifdef GM_WITH_CUDA
    conv_algo_table *t = table_arg(args, "_conv_algo_last");
    if (!t) return NULL;
    if (t->last.pass < 0) Py_RETURN_NONE;
    static const char *const names[] = {"forward", "backward_data", "backward_weight"};
    return Py_BuildValue("{s:s,s:i,s:O,s:i,s:i,s:n}", "pass", names[t->last.pass], "index", t->last.index, "cached",
                         t->last.cached ? Py_True : Py_False, "algo", t->last.algo.algo, "math", t->last.algo.math,
                         "workspace", (Py_ssize_t)t->last.algo.ws);
#else
    (void)args;
    Py_RETURN_NONE;
#endif
}

PyObject *gm_py_conv_algo_cache_clear(PyObject *self, PyObject *args) {
#ifdef GM_WITH_CUDA
    conv_algo_table *t = table_arg(args, "_conv_algo_cache_clear");
    if (!t) return NULL;
    conv_algo_cache_clear(t);
#else
    (void)args;
#endif
    Py_RETURN_NONE;
}

PyObject *gm_py_conv_workspace_uncounted(PyObject *self, PyObject *unused) {
    return PyLong_FromLongLong(conv_ws_uncounted);
}

/* ---- running passes ------------------------------------------------------------------------------------------ */

/* One CPU pass (the GIL released by the caller). */
static int cpu_conv_pass(const conv_geom *g, gm_dtype dt, const conv_job *j, void *ws, size_t wsb, int nt) {
    void *out = gm_tensor_data(j->out), *a = gm_tensor_data(j->a), *b = gm_tensor_data(j->b);
    void *bias = data_or_null(j->bias);
    if (j->pass == CONV_FORWARD) return conv2d_forward(out, a, b, bias, g, dt, ws, wsb, nt);
    if (j->pass == CONV_BACKWARD_DATA) return conv2d_backward_data(out, a, b, bias, g, dt, ws, wsb, nt);
    return conv2d_backward_weight(out, a, b, g, dt, ws, wsb, nt);
}

int conv_run_passes(const char *op, const conv_geom *g, gm_dtype dt, gm_device dev, const conv_job *jobs, int n,
                    size_t used) {
    if (gm_meta_as_cuda(dev)) return meta_cuda_passes(op, g, dt, dev, jobs, n); /* cuDNN's workspace, no kernel */
    if (dev.type == GM_DEV_CUDA) {
#ifdef GM_WITH_CUDA
        for (int i = 0; i < n; i++)
            if (cuda_conv_pass(op, g, dt, jobs[i].pass, dev, gm_tensor_data(jobs[i].out), gm_tensor_data(jobs[i].a),
                               gm_tensor_data(jobs[i].b), data_or_null(jobs[i].bias)) < 0)
                return -1;
#endif
        return 0;
    }
    const int nt = plan_threads(dev);
    conv_pass passes[3];
    for (int i = 0; i < n; i++) passes[i] = jobs[i].pass;
    GMTensor *ws = NULL;
    if (conv_workspace(op, g, dt, passes, n, used, dev, nt, &ws) < 0) return -1; /* im2col columns */
    int st = GM_OK;
    if (dev.type == GM_DEV_CPU) {
        void *pws = data_or_null(ws);
        size_t wsb = tensor_nbytes(ws);
        Py_BEGIN_ALLOW_THREADS
        for (int i = 0; i < n && st == GM_OK; i++) st = cpu_conv_pass(g, dt, &jobs[i], pws, wsb, nt);
        Py_END_ALLOW_THREADS
    }
    Py_XDECREF(ws);
    return gm_kernel_status(op, st);
}

/* ---- the workspace bound ---------------------------------------------------------------------------------- */
PyObject *gm_py_set_conv_workspace_limit(PyObject *self, PyObject *arg) {
    long long n = PyLong_Check(arg) ? PyLong_AsLongLong(arg) : -1;
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (!PyLong_Check(arg) || n < 0) {
        PyErr_Format(PyExc_ValueError, "set_conv_workspace_limit: expected a non-negative number of bytes, got %R",
                     arg);
        return NULL;
    }
    conv_workspace_limit = (size_t)n;
    Py_RETURN_NONE;
}

PyObject *gm_py_get_conv_workspace_limit(PyObject *self, PyObject *unused) {
    return PyLong_FromSize_t(conv_workspace_limit);
}
