/* csrc/ops_conv.c — conv2d, conv_transpose2d and linear, forward and backward, and the bound on the
 * convolution workspace. Each op validates its arguments and infers shapes once for every device, allocates
 * its outputs (current category) and its scratch (category workspace, freed before it returns), and runs the
 * CPU kernel (kernels/cpu/conv.c) — on meta everything but the kernel, so the estimate sees every byte.
 *
 * conv_transpose2d has no kernel of its own: its forward is conv2d's input-gradient, its input-gradient is
 * conv2d's forward, its weight-gradient is conv2d's weight-gradient with the roles of the two activations
 * swapped. One conv_geom (the geometry of the underlying conv2d) drives all of them.
 *
 * Operands are copied only where a kernel needs them contiguous (weights, bias, gradients fed to gemm, the
 * transposed conv's input); the conv2d input is read through its strides. Such copies are workspace and
 * count against the limit, so the im2col columns get what is left of it.
 *
 * On CUDA the same validation, outputs and contiguous copies, then cuDNN (kernels/cuda/conv.h) with its own
 * workspace in place of the im2col columns: the algorithm is chosen among cuDNN's candidates by what the
 * allocator can give (cuda_conv_pick below), so only the workspace differs from the CPU's allocations. The
 * linear layer runs on cuBLAS (kernels/cuda/linear.h) with exactly the CPU's allocations.
 *
 * On meta the allocations are the CPU's (im2col columns), or, when meta stands for CUDA (csrc/meta_target.h),
 * CUDA's with no workspace at all: there is no cuDNN to ask on meta, so cuDNN's workspace is the one thing an
 * estimate for CUDA leaves out (it is taken only when the allocator can still give it; the emulator's stand-in
 * takes none, so there the estimate is exact). */
#include "gm.h"
#include "cpu/conv.h"
#include "cpu/matmul.h"
#include "meta_target.h"
#ifdef GM_WITH_CUDA
#include "cuda/conv.h"
#include "cuda/linear.h"
#endif

/* 64 MiB of columns is a 3x3 conv over 64 channels at 120x120 per tile: big enough that gemm runs near its
 * peak, small next to the activations of any network that needs it. */
#define CONV_DEFAULT_WORKSPACE_LIMIT ((size_t)64 << 20)
static size_t conv_workspace_limit = CONV_DEFAULT_WORKSPACE_LIMIT;

/* ---- argument parsing ------------------------------------------------------------------------------------ */
static int parse_int(PyObject *o, const char *op, const char *name, int64_t *out) {
    if (!PyLong_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s: %s must be an int or a pair of ints, got %.100s", op, name,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    long long v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred()) return -1;
    *out = v;
    return 0;
}

/* An int (used for both dims) or a sequence of two ints; NULL (not passed) gives `def` for both. */
static int parse_pair(PyObject *o, const char *op, const char *name, int64_t def, int64_t out[2]) {
    if (!o) {
        out[0] = out[1] = def;
        return 0;
    }
    if (PyLong_Check(o)) {
        if (parse_int(o, op, name, &out[0]) < 0) return -1;
        out[1] = out[0];
        return 0;
    }
    if (!PyTuple_Check(o) && !PyList_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s: %s must be an int or a pair of ints, got %.100s", op, name,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    Py_ssize_t n = PySequence_Size(o);
    if (n != 1 && n != 2) { /* one value stands for both dims, as in PyTorch */
        PyErr_Format(PyExc_ValueError, "%s: %s must be an int or a pair of ints (height, width), got %R", op, name,
                     o);
        return -1;
    }
    for (Py_ssize_t i = 0; i < 2; i++) {
        PyObject *item = PySequence_GetItem(o, n == 1 ? 0 : i);
        if (!item) return -1;
        int rc = parse_int(item, op, name, &out[i]);
        Py_DECREF(item);
        if (rc < 0) return -1;
    }
    return 0;
}

static int check_positive(const char *op, const char *name, const int64_t v[2]) {
    if (v[0] > 0 && v[1] > 0) return 0;
    PyErr_Format(PyExc_ValueError, "%s: %s must be positive, got (%lld, %lld)", op, name, (long long)v[0],
                 (long long)v[1]);
    return -1;
}

/* padding: an int, a pair, or (conv2d only) "valid" / "same". pads = (top, bottom, left, right). "same" pads
 * dilation*(kernel-1) in total per dim, the odd one at the bottom/right, as PyTorch does. */
static int parse_padding(PyObject *o, const char *op, int allow_str, const int64_t stride[2],
                         const int64_t dil[2], int64_t R, int64_t S, int64_t pads[4]) {
    if (o && PyUnicode_Check(o)) {
        if (!allow_str) {
            PyErr_Format(PyExc_TypeError, "%s: padding must be an int or a pair of ints, got the string %R", op, o);
            return -1;
        }
        if (PyUnicode_CompareWithASCIIString(o, "valid") == 0) {
            pads[0] = pads[1] = pads[2] = pads[3] = 0;
            return 0;
        }
        if (PyUnicode_CompareWithASCIIString(o, "same") == 0) {
            if (stride[0] != 1 || stride[1] != 1) {
                PyErr_Format(PyExc_ValueError, "%s: padding='same' is not supported for strided convolutions "
                             "(stride=(%lld, %lld)); pad explicitly", op, (long long)stride[0],
                             (long long)stride[1]);
                return -1;
            }
            int64_t th = dil[0] * (R - 1), tw = dil[1] * (S - 1);
            pads[0] = th / 2;
            pads[1] = th - th / 2;
            pads[2] = tw / 2;
            pads[3] = tw - tw / 2;
            return 0;
        }
        PyErr_Format(PyExc_ValueError, "%s: invalid padding string %R; expected 'same' or 'valid'", op, o);
        return -1;
    }
    int64_t p[2];
    if (parse_pair(o, op, "padding", 0, p) < 0) return -1;
    if (p[0] < 0 || p[1] < 0) {
        PyErr_Format(PyExc_ValueError, "%s: padding must be non-negative, got (%lld, %lld)", op, (long long)p[0],
                     (long long)p[1]);
        return -1;
    }
    pads[0] = pads[1] = p[0];
    pads[2] = pads[3] = p[1];
    return 0;
}

static GMTensor *as_tensor(PyObject *o, const char *op, const char *name, int allow_none) {
    if (allow_none && o == Py_None) return NULL;
    if (!gm_is_tensor(o)) {
        PyErr_Format(PyExc_TypeError, "%s: %s must be a Tensor%s, got %.100s", op, name, allow_none ? " or None" : "",
                     Py_TYPE(o)->tp_name);
        return NULL;
    }
    return (GMTensor *)o;
}

/* A shape either from the tensor or, when it was not saved for backward, from the tuple passed beside it. */
static int shape_of(GMTensor *t, PyObject *shape, const char *op, const char *name, int *nd, int64_t *out) {
    if (t) {
        *nd = t->ndim;
        memcpy(out, t->shape, sizeof(int64_t) * t->ndim);
        return 0;
    }
    if (!shape || shape == Py_None) {
        PyErr_Format(PyExc_ValueError, "%s: pass either %s or %s_shape", op, name, name);
        return -1;
    }
    return gm_parse_shape(shape, nd, out, name);
}

/* Every tensor argument: same dtype as the first, floating point, same device. NULL entries are skipped.
 * cpu_half: the CPU kernels read float16/bfloat16 themselves (the callers reject depthwise: cpu_depthwise_half). */
static int check_operands_ex(const char *op, GMTensor **ts, const char **names, int n, int cpu_half) {
    GMTensor *ref = NULL;
    const char *ref_name = NULL;
    for (int i = 0; i < n; i++) {
        GMTensor *t = ts[i];
        if (!t) continue;
        if (!ref) {
            ref = t;
            ref_name = names[i];
            if (!gm_dtype_is_float(t->dtype)) {
                PyErr_Format(PyExc_TypeError, "%s: %s must be floating point, got %s", op, names[i],
                             gm_dtype_name(t->dtype));
                return -1;
            }
            continue;
        }
        if (t->dtype != ref->dtype) {
            PyErr_Format(PyExc_TypeError, "%s: %s has dtype %s but %s has dtype %s; cast one of them", op, ref_name,
                         gm_dtype_name(ref->dtype), names[i], gm_dtype_name(t->dtype));
            return -1;
        }
        if (gm_check_same_device(op, ref, t) < 0) return -1;
    }
    if (!ref) return 0;
    /* CUDA runs every pass in all four float dtypes (cuDNN / cuBLAS). meta stands in for a GPU, which has
     * half-precision convolutions. On the CPU the im2col passes read float16/bfloat16 themselves (widening tiles
     * of columns as they gather them, summing in float32 and rounding once); their callers reject depthwise
     * (cpu_depthwise_half), whose half operands the Python layer widens (python/gpumemnet/nn/_functional_conv.py). */
    int half = ref->dtype == GM_F16 || ref->dtype == GM_BF16;
    if (ref->device.type == GM_DEV_CPU && ref->dtype != GM_F32 && ref->dtype != GM_F64 && !(cpu_half && half)) {
        PyErr_Format(PyExc_TypeError, "%s: %s is not supported on the CPU; use float32 or float64 (e.g. "
                     ".float() on the input and the parameters)", op, gm_dtype_name(ref->dtype));
        return -1;
    }
    return 0;
}

static int check_operands(const char *op, GMTensor **ts, const char **names, int n) {
    return check_operands_ex(op, ts, names, n, 0);
}

/* -1 with a TypeError for a half-precision depthwise convolution on the CPU (no half kernel for it). */
static int cpu_depthwise_half(const char *op, const conv_geom *g, gm_dtype dt, gm_device dev) {
    if (dev.type != GM_DEV_CPU || (dt != GM_F16 && dt != GM_BF16) || conv2d_algo(g, CONV_FORWARD) != CONV_ALGO_DEPTHWISE)
        return 0;
    PyErr_Format(PyExc_TypeError, "%s: %s depthwise convolutions (groups=%lld == channels) are not supported on the "
                 "CPU; use float32 or float64", op, gm_dtype_name(dt), (long long)g->G);
    return -1;
}

static int check_bias(const char *op, GMTensor *b, int64_t n, const char *what) {
    if (!b || (b->ndim == 1 && b->shape[0] == n)) return 0;
    char sb[GM_SHAPE_BUF];
    PyErr_Format(PyExc_ValueError, "%s: bias must be 1-D with %s=%lld elements, got shape %s", op, what,
                 (long long)n, gm_shape_str(b->ndim, b->shape, sb));
    return -1;
}

/* ---- shapes ------------------------------------------------------------------------------------------------ */
static int check_4d(const char *op, const char *name, const char *layout, int nd, const int64_t *shape) {
    if (nd == 4) return 0;
    char s[GM_SHAPE_BUF];
    PyErr_Format(PyExc_ValueError, "%s: expected a 4-D %s %s, got shape %s", op, name, layout,
                 gm_shape_str(nd, shape, s));
    return -1;
}

static int check_kernel(const char *op, const int64_t *wshape) {
    if (wshape[2] >= 1 && wshape[3] >= 1) return 0;
    char s[GM_SHAPE_BUF];
    PyErr_Format(PyExc_ValueError, "%s: the kernel must be at least 1x1, got weight of shape %s", op,
                 gm_shape_str(4, wshape, s));
    return -1;
}

/* Output rows of a conv over `in` rows padded by pad_sum, or -1 with ValueError when the dilated kernel does
 * not fit in the padded input. */
static int64_t conv_out_size(const char *op, const int64_t *xshape, const int64_t *wshape, const int64_t dil[2],
                             const int64_t pads[4], const int64_t stride[2], int64_t out[2]) {
    for (int d = 0; d < 2; d++) {
        int64_t padded = xshape[2 + d] + pads[2 * d] + pads[2 * d + 1];
        int64_t span = dil[d] * (wshape[2 + d] - 1) + 1;
        if (padded < span) {
            char sx[GM_SHAPE_BUF], sw[GM_SHAPE_BUF];
            PyErr_Format(PyExc_ValueError, "%s: the kernel %lldx%lld (dilation %lldx%lld) spans %lldx%lld, larger "
                         "than the padded input %lldx%lld (input %s, weight %s, padding (%lld, %lld, %lld, %lld) "
                         "top, bottom, left, right)", op, (long long)wshape[2], (long long)wshape[3],
                         (long long)dil[0], (long long)dil[1], (long long)(dil[0] * (wshape[2] - 1) + 1),
                         (long long)(dil[1] * (wshape[3] - 1) + 1), (long long)(xshape[2] + pads[0] + pads[1]),
                         (long long)(xshape[3] + pads[2] + pads[3]), gm_shape_str(4, xshape, sx),
                         gm_shape_str(4, wshape, sw), (long long)pads[0], (long long)pads[1], (long long)pads[2],
                         (long long)pads[3]);
            return -1;
        }
        out[d] = (padded - span) / stride[d] + 1;
    }
    return 0;
}

/* conv2d: input (N, C, H, W), weight (K, C/G, R, S) -> geometry and output shape (N, K, P, Q). */
static int plan_conv2d(const char *op, const int64_t *xs, const int64_t *ws, PyObject *stride_o, PyObject *pad_o,
                       PyObject *dil_o, int64_t groups, conv_geom *g, int64_t out[4]) {
    char sx[GM_SHAPE_BUF], sw[GM_SHAPE_BUF];
    int64_t stride[2], dil[2], pads[4], pq[2];
    if (parse_pair(stride_o, op, "stride", 1, stride) < 0 || check_positive(op, "stride", stride) < 0) return -1;
    if (parse_pair(dil_o, op, "dilation", 1, dil) < 0 || check_positive(op, "dilation", dil) < 0) return -1;
    if (groups < 1) {
        PyErr_Format(PyExc_ValueError, "%s: groups must be positive, got %lld", op, (long long)groups);
        return -1;
    }
    if (xs[1] % groups) {
        PyErr_Format(PyExc_ValueError, "%s: input channels %lld (input %s) are not divisible by groups=%lld", op,
                     (long long)xs[1], gm_shape_str(4, xs, sx), (long long)groups);
        return -1;
    }
    if (ws[0] % groups) {
        PyErr_Format(PyExc_ValueError, "%s: out_channels %lld (weight %s) are not divisible by groups=%lld", op,
                     (long long)ws[0], gm_shape_str(4, ws, sw), (long long)groups);
        return -1;
    }
    if (ws[1] * groups != xs[1]) {
        PyErr_Format(PyExc_ValueError, "%s: weight %s with groups=%lld expects input with %lld channels, but got "
                     "input %s with %lld channels", op, gm_shape_str(4, ws, sw), (long long)groups,
                     (long long)(ws[1] * groups), gm_shape_str(4, xs, sx), (long long)xs[1]);
        return -1;
    }
    if (check_kernel(op, ws) < 0) return -1;
    if (parse_padding(pad_o, op, 1, stride, dil, ws[2], ws[3], pads) < 0) return -1;
    if (conv_out_size(op, xs, ws, dil, pads, stride, pq) < 0) return -1;
    *g = (conv_geom){.N = xs[0], .C = xs[1], .H = xs[2], .W = xs[3], .K = ws[0], .R = ws[2], .S = ws[3],
                     .P = pq[0], .Q = pq[1], .sh = stride[0], .sw = stride[1], .ph = pads[0], .pw = pads[2],
                     .dh = dil[0], .dw = dil[1], .G = groups};
    out[0] = xs[0];
    out[1] = ws[0];
    out[2] = pq[0];
    out[3] = pq[1];
    return 0;
}

/* conv_transpose2d: input (N, Cin, H, W), weight (Cin, Cout/G, R, S) -> output (N, Cout, Ho, Wo) and the
 * geometry of the conv2d whose input-gradient it is: that conv's input is (N, Cout, Ho, Wo), its output
 * (N, Cin, H, W). */
static int plan_conv_transpose2d(const char *op, const int64_t *xs, const int64_t *ws, PyObject *stride_o,
                                 PyObject *pad_o, PyObject *opad_o, int64_t groups, PyObject *dil_o, conv_geom *g,
                                 int64_t out[4]) {
    char sx[GM_SHAPE_BUF], sw[GM_SHAPE_BUF];
    int64_t stride[2], dil[2], pads[4], opad[2];
    if (parse_pair(stride_o, op, "stride", 1, stride) < 0 || check_positive(op, "stride", stride) < 0) return -1;
    if (parse_pair(dil_o, op, "dilation", 1, dil) < 0 || check_positive(op, "dilation", dil) < 0) return -1;
    if (parse_pair(opad_o, op, "output_padding", 0, opad) < 0) return -1;
    if (groups < 1) {
        PyErr_Format(PyExc_ValueError, "%s: groups must be positive, got %lld", op, (long long)groups);
        return -1;
    }
    if (ws[0] != xs[1]) {
        PyErr_Format(PyExc_ValueError, "%s: weight %s (in_channels, out_channels/groups, kH, kW) expects input "
                     "with %lld channels, but got input %s with %lld channels", op, gm_shape_str(4, ws, sw),
                     (long long)ws[0], gm_shape_str(4, xs, sx), (long long)xs[1]);
        return -1;
    }
    if (xs[1] % groups) {
        PyErr_Format(PyExc_ValueError, "%s: input channels %lld (input %s) are not divisible by groups=%lld", op,
                     (long long)xs[1], gm_shape_str(4, xs, sx), (long long)groups);
        return -1;
    }
    if (check_kernel(op, ws) < 0) return -1;
    if (parse_padding(pad_o, op, 0, stride, dil, ws[2], ws[3], pads) < 0) return -1;
    for (int d = 0; d < 2; d++) {
        if (opad[d] < 0 || (opad[d] >= stride[d] && opad[d] >= dil[d])) {
            PyErr_Format(PyExc_ValueError, "%s: output_padding must be non-negative and smaller than either "
                         "stride or dilation, got output_padding=(%lld, %lld), stride=(%lld, %lld), "
                         "dilation=(%lld, %lld)", op, (long long)opad[0], (long long)opad[1], (long long)stride[0],
                         (long long)stride[1], (long long)dil[0], (long long)dil[1]);
            return -1;
        }
    }
    int64_t o[2];
    for (int d = 0; d < 2; d++) o[d] = (xs[2 + d] - 1) * stride[d] - 2 * pads[2 * d] + dil[d] * (ws[2 + d] - 1) +
                                       opad[d] + 1;
    if (o[0] < 1 || o[1] < 1 || xs[2] < 1 || xs[3] < 1) {
        PyErr_Format(PyExc_ValueError, "%s: input %s with weight %s, stride (%lld, %lld), padding (%lld, %lld) "
                     "gives an empty output %lldx%lld", op, gm_shape_str(4, xs, sx), gm_shape_str(4, ws, sw),
                     (long long)stride[0], (long long)stride[1], (long long)pads[0], (long long)pads[2],
                     (long long)o[0], (long long)o[1]);
        return -1;
    }
    *g = (conv_geom){.N = xs[0], .C = ws[1] * groups, .H = o[0], .W = o[1], .K = xs[1], .R = ws[2], .S = ws[3],
                     .P = xs[2], .Q = xs[3], .sh = stride[0], .sw = stride[1], .ph = pads[0], .pw = pads[2],
                     .dh = dil[0], .dw = dil[1], .G = groups};
    out[0] = xs[0];
    out[1] = ws[1] * groups;
    out[2] = o[0];
    out[3] = o[1];
    return 0;
}

/* ---- scratch --------------------------------------------------------------------------------------------- */

static size_t tensor_nbytes(GMTensor *t) { return t ? (size_t)gm_numel(t) * gm_dtype_size(t->dtype) : 0; }

/* A contiguous workspace copy of t, or a new reference to t when it already is contiguous (or NULL). */
static int contiguous(GMTensor *t, GMTensor **out, size_t *used) {
    *out = t;
    if (!t || gm_is_contiguous(t)) {
        Py_XINCREF(t);
        return 0;
    }
    GMTensor *c = gm_empty_workspace(t->ndim, t->shape, t->dtype, t->device);
    if (!c) return -1;
    if (t->device.type != GM_DEV_META && gm_copy_into(c, t) < 0) {
        Py_DECREF(c);
        return -1;
    }
    *out = c;
    *used += tensor_nbytes(c);
    return 0;
}

/* One im2col workspace for the given passes (they share it, one after another): what is left of the limit
 * after `used` bytes of copies, at least one column. *ws stays NULL when no pass needs any; -1 with an exception
 * when one column exceeds the limit. The CPU kernels keep a column buffer per thread, so the size depends on
 * nthreads; meta plans exactly as the CPU does, so that a meta run reports the CPU's bytes (unless meta stands for
 * CUDA: then there are no columns, see the top of this file). */
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

static int kernel_status(const char *op, int st) {
    if (st == GM_OK) return 0;
    PyErr_Format(PyExc_RuntimeError, "%s: the CPU kernel failed with status %d%s", op, st,
                 st == GM_ERR_UNSUPPORTED ? " (a size exceeds BLAS's 32-bit integers, or the dtype is unsupported)"
                                          : " (an argument the validation missed; please report)");
    return -1;
}

static void *data_or_null(GMTensor *t) { return t ? gm_tensor_data(t) : NULL; }

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
 * The choice is cached. Cache key: the device index, the pass, the dtype, allow_tf32 and the whole conv_geom
 * (sizes, stride, padding, dilation, groups and the input's element strides, which cuDNN sees in its
 * descriptor); value: the candidate. A cached choice whose workspace no longer fits (a lower limit, a fuller
 * device) is dropped and the candidates are asked again. The table is small and replaced round-robin: a network
 * has a few dozen distinct convolutions. The GIL serialises access (the pick runs with it held).
 *
 * For tests (_C._conv_algo_fake): a list of fake workspace sizes replaces the candidates; the pass then runs
 * the direct kernels (valid with any workspace), so the selection logic is testable in the emulator and on a
 * GPU alike. _C._conv_algo_last() tells what the last pick chose. */
#ifdef GM_WITH_CUDA
typedef struct {
    int device, pass, dtype, tf32, fake;
    conv_geom g;
} conv_algo_key;

#define CONV_ALGO_CACHE 256
static struct {
    int used;
    conv_algo_key key;
    cuda_conv_algo algo;
} conv_algo_cache[CONV_ALGO_CACHE];
static int conv_algo_next;

static size_t conv_fake_ws[CUDA_CONV_MAX_ALGOS];
static int conv_fake_n = -1; /* -1: no fake list */

/* What the last pick chose: the pass, the candidate's index in the list (-1: from the cache), the candidate. */
static struct {
    int pass, index, cached;
    cuda_conv_algo algo;
} conv_algo_last = {-1, -1, 0, {0, 0, 0}};

static conv_algo_key algo_key(gm_device dev, const conv_geom *g, gm_dtype dt, conv_pass pass, int tf32) {
    conv_algo_key k;
    memset(&k, 0, sizeof k); /* padding bytes too: keys are compared with memcmp */
    k.device = dev.index, k.pass = (int)pass, k.dtype = (int)dt, k.tf32 = tf32, k.fake = conv_fake_n >= 0;
    k.g = *g;
    return k;
}

/* The workspace of a candidate algorithm into *ws (NULL for none): 0; 1 when it does not fit and `fallback`
 * (another candidate follows: gm_try_alloc, so no OutOfMemoryError is built nor an OOM counted); -1 with an
 * exception (OutOfMemoryError when the last candidate does not fit). */
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

/* The candidate to run `pass` with, its workspace allocated into *ws (NULL when it needs none). 0, or -1 with
 * an exception (OutOfMemoryError when no candidate's workspace fits). */
static int cuda_conv_pick(const char *op, const conv_geom *g, gm_dtype dt, conv_pass pass, gm_device dev,
                          gm_cuda_ctx *ctx, cuda_conv_algo *algo, GMTensor **ws) {
    const conv_algo_key key = algo_key(dev, g, dt, pass, ctx->allow_tf32);
    int slot = -1;
    for (int i = 0; i < CONV_ALGO_CACHE; i++)
        if (conv_algo_cache[i].used && !memcmp(&conv_algo_cache[i].key, &key, sizeof key)) {
            slot = i;
            break;
        }
    if (slot >= 0) {
        int r = cuda_ws(conv_algo_cache[slot].algo.ws, dev, ws, 1);
        if (r == 0) {
            *algo = conv_algo_cache[slot].algo;
            conv_algo_last.pass = pass, conv_algo_last.index = -1, conv_algo_last.cached = 1;
            conv_algo_last.algo = *algo;
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
            slot = conv_algo_next;
            conv_algo_next = (conv_algo_next + 1) % CONV_ALGO_CACHE;
        }
        conv_algo_cache[slot].used = 1;
        conv_algo_cache[slot].key = key;
        conv_algo_cache[slot].algo = *algo;
        conv_algo_last.pass = pass, conv_algo_last.index = i, conv_algo_last.cached = 0;
        conv_algo_last.algo = *algo;
        return 0;
    }
    PyErr_Format(PyExc_RuntimeError, "%s: no convolution algorithm for this geometry", op);
    return -1;
}

static void conv_algo_cache_clear(void) {
    memset(conv_algo_cache, 0, sizeof conv_algo_cache);
    conv_algo_next = 0;
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
    if (cuda_conv_pick(op, g, dt, pass, dev, ctx, &algo, &ws) < 0) return -1;
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

static PyObject *py_conv_algo_fake(PyObject *self, PyObject *arg) {
#ifdef GM_WITH_CUDA
    if (arg == Py_None) {
        conv_fake_n = -1;
        conv_algo_cache_clear();
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
    conv_algo_cache_clear();
    Py_RETURN_NONE;
#else
    (void)arg;
    return PyErr_Format(PyExc_RuntimeError, "_conv_algo_fake: this build has no CUDA");
#endif
}

static PyObject *py_conv_algo_last(PyObject *self, PyObject *unused) {
#ifdef GM_WITH_CUDA
    if (conv_algo_last.pass < 0) Py_RETURN_NONE;
    static const char *const names[] = {"forward", "backward_data", "backward_weight"};
    return Py_BuildValue("{s:s,s:i,s:O,s:i,s:i,s:n}", "pass", names[conv_algo_last.pass], "index",
                         conv_algo_last.index, "cached", conv_algo_last.cached ? Py_True : Py_False, "algo",
                         conv_algo_last.algo.algo, "math", conv_algo_last.algo.math, "workspace",
                         (Py_ssize_t)conv_algo_last.algo.ws);
#else
    Py_RETURN_NONE;
#endif
}

static PyObject *py_conv_algo_cache_clear(PyObject *self, PyObject *unused) {
#ifdef GM_WITH_CUDA
    conv_algo_cache_clear();
#endif
    Py_RETURN_NONE;
}

static void set_input_strides(conv_geom *g, GMTensor *t) {
    for (int i = 0; i < 4; i++) g->xs[i] = t ? t->strides[i] : 0;
}

/* (n, k, l) element strides of a 4-D tensor whose (H, W) dims collapse into one; 0 if they do not. */
static int collapse_hw(GMTensor *t, int64_t ts[3]) {
    ts[0] = t->strides[0];
    ts[1] = t->strides[1];
    if (t->shape[2] == 1) ts[2] = t->strides[3];
    else if (t->shape[3] == 1) ts[2] = t->strides[2];
    else if (t->strides[2] == t->strides[3] * t->shape[3]) ts[2] = t->strides[3];
    else return 0;
    return 1;
}

static int bias_backward(const char *op, GMTensor *t, GMTensor *db) {
    int64_t ts[3];
    GMTensor *tc = NULL;
    size_t unused = 0;
    if (!collapse_hw(t, ts)) {
        if (contiguous(t, &tc, &unused) < 0) return -1;
        collapse_hw(tc, ts);
    }
    GMTensor *src = tc ? tc : t;
    int st;
    if (src->device.type == GM_DEV_META) { /* meta allocates the copy as the CPU does, and runs nothing */
        Py_XDECREF(tc);
        return 0;
    }
    if (src->device.type == GM_DEV_CUDA) {
#ifdef GM_WITH_CUDA
        gm_cuda_ctx *ctx = gm_cuda_ctx_for(src->device);
        st = ctx ? cuda_conv_bias_backward(gm_tensor_data(db), gm_tensor_data(src), src->shape[0], src->shape[1],
                                           src->shape[2] * src->shape[3], ts, src->dtype, ctx)
                 : GM_OK;
        Py_XDECREF(tc);
        return ctx ? gm_cuda_kernel_status(op, st, ctx) : -1;
#endif
    }
    Py_BEGIN_ALLOW_THREADS
    st = conv_bias_backward(gm_tensor_data(db), gm_tensor_data(src), src->shape[0], src->shape[1],
                            src->shape[2] * src->shape[3], ts, src->dtype, gm_num_threads);
    Py_END_ALLOW_THREADS
    Py_XDECREF(tc);
    return kernel_status(op, st);
}

static int parse_mask(PyObject *o, int mask[3]) {
    if (PyTuple_Check(o) && PyArg_ParseTuple(o, "ppp", &mask[0], &mask[1], &mask[2])) return 0;
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "output_mask must be a tuple of 3 bools (input, weight, bias), got %R", o);
    return -1;
}

/* ---- conv2d ---------------------------------------------------------------------------------------------- */
/* A pass that writes a new output from one operand (and the weight, bias): conv2d's forward (CONV_FORWARD), and
 * conv_transpose2d's forward, which is the input-gradient pass (CONV_BACKWARD_DATA) of the conv whose input is
 * its output. cuDNN on CUDA (meta standing for CUDA takes no workspace); on the CPU, and on meta planning it, an
 * im2col workspace within what `used` bytes of operand copies left of the limit, then the kernel. 0 or -1. */
static int run_out_pass(const char *op, const conv_geom *g, conv_pass pass, GMTensor *out, GMTensor *in,
                        GMTensor *wc, GMTensor *bc, size_t used) {
    const gm_device dev = out->device;
    if (dev.type == GM_DEV_CUDA || gm_meta_as_cuda(dev)) {
#ifdef GM_WITH_CUDA
        if (dev.type == GM_DEV_CUDA &&
            cuda_conv_pass(op, g, out->dtype, pass, dev, gm_tensor_data(out), gm_tensor_data(in),
                           gm_tensor_data(wc), data_or_null(bc)) < 0)
            return -1;
#endif
        return 0;
    }
    const int nt = plan_threads(dev);
    GMTensor *ws = NULL;
    if (conv_workspace(op, g, out->dtype, &pass, 1, used, dev, nt, &ws) < 0) return -1;
    int st = GM_OK;
    if (dev.type == GM_DEV_CPU) {
        size_t wsb = tensor_nbytes(ws);
        void *po = gm_tensor_data(out), *pi = gm_tensor_data(in), *pw = gm_tensor_data(wc), *pb = data_or_null(bc),
             *pws = data_or_null(ws);
        gm_dtype dt = out->dtype;
        Py_BEGIN_ALLOW_THREADS
        st = pass == CONV_FORWARD ? conv2d_forward(po, pi, pw, pb, g, dt, pws, wsb, nt)
                                  : conv2d_backward_data(po, pi, pw, pb, g, dt, pws, wsb, nt);
        Py_END_ALLOW_THREADS
    }
    Py_XDECREF(ws);
    return kernel_status(op, st);
}

static PyObject *py_conv2d(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"input", "weight", "bias", "stride", "padding", "dilation", "groups", NULL};
    const char *op = "conv2d";
    PyObject *xo, *wo, *bo = Py_None, *stride = NULL, *padding = NULL, *dilation = NULL;
    long long groups = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|OOOOL:conv2d", kwlist, &xo, &wo, &bo, &stride, &padding,
                                     &dilation, &groups))
        return NULL;
    GMTensor *x = as_tensor(xo, op, "input", 0), *w = x ? as_tensor(wo, op, "weight", 0) : NULL;
    GMTensor *b = w ? as_tensor(bo, op, "bias", 1) : NULL;
    if (!w || (bo != Py_None && !b)) return NULL;
    GMTensor *ops[] = {x, w, b};
    const char *names[] = {"input", "weight", "bias"};
    conv_geom g;
    int64_t oshape[4];
    if (check_4d(op, "input", "(N, C, H, W)", x->ndim, x->shape) < 0 ||
        check_4d(op, "weight", "(out_channels, in_channels/groups, kH, kW)", w->ndim, w->shape) < 0 ||
        check_operands_ex(op, ops, names, 3, 1) < 0 ||
        plan_conv2d(op, x->shape, w->shape, stride, padding, dilation, groups, &g, oshape) < 0 ||
        check_bias(op, b, w->shape[0], "out_channels") < 0)
        return NULL;
    set_input_strides(&g, x);
    if (cpu_depthwise_half(op, &g, x->dtype, x->device) < 0) return NULL;

    GMTensor *wc = NULL, *bc = NULL, *out = NULL;
    size_t used = 0;
    if (contiguous(w, &wc, &used) < 0 || contiguous(b, &bc, &used) < 0) goto fail;
    if (!(out = gm_empty(4, oshape, x->dtype, x->device))) goto fail;
    if (run_out_pass(op, &g, CONV_FORWARD, out, x, wc, bc, used) < 0) goto fail;
    Py_XDECREF(wc);
    Py_XDECREF(bc);
    return (PyObject *)out;
fail:
    Py_XDECREF(wc);
    Py_XDECREF(bc);
    Py_XDECREF(out);
    return NULL;
}

/* Checks grad_output against the forward's output shape. */
static int check_grad_output(const char *op, GMTensor *go, const int64_t *oshape) {
    if (go->ndim == 4 && !memcmp(go->shape, oshape, 4 * sizeof(int64_t))) return 0;
    char sg[GM_SHAPE_BUF], so[GM_SHAPE_BUF];
    PyErr_Format(PyExc_ValueError, "%s: grad_output has shape %s, expected the output's shape %s", op,
                 gm_shape_str(go->ndim, go->shape, sg), gm_shape_str(4, oshape, so));
    return -1;
}

static int check_needed(const char *op, GMTensor *t, const char *name, const char *grad) {
    if (t) return 0;
    PyErr_Format(PyExc_ValueError, "%s: %s is needed to compute the %s gradient", op, name, grad);
    return -1;
}

static PyObject *grads_tuple(GMTensor *a, GMTensor *b, GMTensor *c) {
    PyObject *r = PyTuple_Pack(3, a ? (PyObject *)a : Py_None, b ? (PyObject *)b : Py_None,
                               c ? (PyObject *)c : Py_None);
    Py_XDECREF(a);
    Py_XDECREF(b);
    Py_XDECREF(c);
    return r;
}

/* Backward of conv2d and conv_transpose2d: they differ in the plan and in which conv pass gives which
 * gradient. For conv2d the geometry's input is `input`; for conv_transpose2d it is grad_output. */
typedef struct {
    const char *op;
    int transposed;
    GMTensor *go, *x, *w;
    int64_t xshape[GM_MAX_DIMS], wshape[GM_MAX_DIMS];
    conv_geom g;
    int mask[3];
} conv_bwd;

static PyObject *conv_backward(conv_bwd *a) {
    const char *op = a->op;
    GMTensor *go = a->go, *x = a->x, *w = a->w;
    gm_dtype dt = go->dtype;
    gm_device dev = go->device;
    GMTensor *dx = NULL, *dw = NULL, *db = NULL, *gc = NULL, *wc = NULL, *xc = NULL, *ws = NULL;
    size_t used = 0;
    conv_geom *g = &a->g;
    int cpu = dev.type == GM_DEV_CPU, nt = plan_threads(dev);
    if (a->mask[0] && (!(dx = gm_empty(4, a->xshape, dt, dev)))) goto fail;
    if (a->mask[1] && (!(dw = gm_empty(4, a->wshape, dt, dev)))) goto fail;
    if (a->mask[2]) {
        int64_t nb = a->transposed ? a->wshape[1] * g->G : a->wshape[0];
        if (!(db = gm_empty(1, &nb, dt, dev))) goto fail;
    }
    if (!a->transposed) {
        /* dx = conv2d input-gradient of go (contiguous) with w; dw = weight-gradient of go (contiguous), x. */
        set_input_strides(g, x);
        conv_pass passes[2];
        int np = 0;
        if (dx) passes[np++] = CONV_BACKWARD_DATA;
        if (dw) passes[np++] = CONV_BACKWARD_WEIGHT;
        if ((dx || dw) && contiguous(go, &gc, &used) < 0) goto fail;
        if (dx && contiguous(w, &wc, &used) < 0) goto fail;
        /* each pass with its own cuDNN workspace, one after the other (meta for CUDA: none) */
        if (dev.type == GM_DEV_CUDA || gm_meta_as_cuda(dev)) {
#ifdef GM_WITH_CUDA
            if (dev.type == GM_DEV_CUDA &&
                ((dx && cuda_conv_pass(op, g, dt, CONV_BACKWARD_DATA, dev, gm_tensor_data(dx), gm_tensor_data(gc),
                                       gm_tensor_data(wc), NULL) < 0) ||
                 (dw && cuda_conv_pass(op, g, dt, CONV_BACKWARD_WEIGHT, dev, gm_tensor_data(dw), gm_tensor_data(gc),
                                       gm_tensor_data(x), NULL) < 0)))
                goto fail;
#endif
        } else if (conv_workspace(op, g, dt, passes, np, used, dev, nt, &ws) < 0) { /* im2col columns */
            goto fail;
        }
        if (cpu) {
            int st = GM_OK;
            size_t wsb = tensor_nbytes(ws);
            void *pws = data_or_null(ws);
            Py_BEGIN_ALLOW_THREADS
            if (dx) st = conv2d_backward_data(gm_tensor_data(dx), gm_tensor_data(gc), gm_tensor_data(wc), NULL, g, dt,
                                              pws, wsb, nt);
            if (st == GM_OK && dw)
                st = conv2d_backward_weight(gm_tensor_data(dw), gm_tensor_data(gc), gm_tensor_data(x), g, dt, pws, wsb,
                                            nt);
            Py_END_ALLOW_THREADS
            if (kernel_status(op, st) < 0) goto fail;
        }
    } else {
        /* dx = conv2d forward of go with w; dw = conv2d weight-gradient with dout = x (contiguous), input = go. */
        set_input_strides(g, go);
        conv_pass passes[2];
        int np = 0;
        if (dx) passes[np++] = CONV_FORWARD;
        if (dw) passes[np++] = CONV_BACKWARD_WEIGHT;
        if (dx && contiguous(w, &wc, &used) < 0) goto fail;
        if (dw && contiguous(x, &xc, &used) < 0) goto fail;
        if (dev.type == GM_DEV_CUDA || gm_meta_as_cuda(dev)) { /* meta for CUDA: no workspace */
#ifdef GM_WITH_CUDA
            if (dev.type == GM_DEV_CUDA &&
                ((dx && cuda_conv_pass(op, g, dt, CONV_FORWARD, dev, gm_tensor_data(dx), gm_tensor_data(go),
                                       gm_tensor_data(wc), NULL) < 0) ||
                 (dw && cuda_conv_pass(op, g, dt, CONV_BACKWARD_WEIGHT, dev, gm_tensor_data(dw), gm_tensor_data(xc),
                                       gm_tensor_data(go), NULL) < 0)))
                goto fail;
#endif
        } else if (conv_workspace(op, g, dt, passes, np, used, dev, nt, &ws) < 0) { /* im2col columns */
            goto fail;
        }
        if (cpu) {
            int st = GM_OK;
            size_t wsb = tensor_nbytes(ws);
            void *pws = data_or_null(ws);
            Py_BEGIN_ALLOW_THREADS
            if (dx) st = conv2d_forward(gm_tensor_data(dx), gm_tensor_data(go), gm_tensor_data(wc), NULL, g, dt, pws,
                                        wsb, nt);
            if (st == GM_OK && dw)
                st = conv2d_backward_weight(gm_tensor_data(dw), gm_tensor_data(xc), gm_tensor_data(go), g, dt, pws,
                                            wsb, nt);
            Py_END_ALLOW_THREADS
            if (kernel_status(op, st) < 0) goto fail;
        }
    }
    Py_CLEAR(ws);
    Py_CLEAR(gc);
    Py_CLEAR(wc);
    Py_CLEAR(xc);
    if (db && bias_backward(op, go, db) < 0) goto fail;
    return grads_tuple(dx, dw, db);
fail:
    Py_XDECREF(ws);
    Py_XDECREF(gc);
    Py_XDECREF(wc);
    Py_XDECREF(xc);
    Py_XDECREF(dx);
    Py_XDECREF(dw);
    Py_XDECREF(db);
    return NULL;
}

/* Parses (grad_output, input, weight) + shapes and runs the common checks of both backward ops. */
static int parse_backward(conv_bwd *a, PyObject *goo, PyObject *xo, PyObject *wo, PyObject *xshape,
                          PyObject *wshape, PyObject *masko) {
    const char *op = a->op;
    int nd;
    a->go = as_tensor(goo, op, "grad_output", 0);
    if (!a->go) return -1;
    a->x = as_tensor(xo, op, "input", 1);
    if (xo != Py_None && !a->x) return -1;
    a->w = as_tensor(wo, op, "weight", 1);
    if (wo != Py_None && !a->w) return -1;
    if (parse_mask(masko, a->mask) < 0) return -1;
    if (shape_of(a->x, xshape, op, "input", &nd, a->xshape) < 0 || check_4d(op, "input", "(N, C, H, W)", nd, a->xshape) < 0)
        return -1;
    if (shape_of(a->w, wshape, op, "weight", &nd, a->wshape) < 0 || check_4d(op, "weight", "(K, C/groups, kH, kW)", nd, a->wshape) < 0)
        return -1;
    GMTensor *ops[] = {a->go, a->x, a->w};
    const char *names[] = {"grad_output", "input", "weight"};
    if (check_operands_ex(op, ops, names, 3, 1) < 0) return -1;
    /* conv2d: dx needs w, dw needs x; conv_transpose2d: the same (the roles in the kernels differ). */
    if (a->mask[0] && check_needed(op, a->w, "weight", "input") < 0) return -1;
    if (a->mask[1] && check_needed(op, a->x, "input", "weight") < 0) return -1;
    return 0;
}

static PyObject *py_conv2d_backward(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"grad_output", "input", "weight", "stride", "padding", "dilation", "groups",
                             "output_mask", "input_shape", "weight_shape", NULL};
    PyObject *goo, *xo, *wo, *stride, *padding, *dilation, *masko, *xshape = Py_None, *wshape = Py_None;
    long long groups;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOOLO|OO:conv2d_backward", kwlist, &goo, &xo, &wo, &stride,
                                     &padding, &dilation, &groups, &masko, &xshape, &wshape))
        return NULL;
    conv_bwd a = {.op = "conv2d_backward", .transposed = 0};
    int64_t oshape[4];
    if (parse_backward(&a, goo, xo, wo, xshape, wshape, masko) < 0) return NULL;
    if (plan_conv2d(a.op, a.xshape, a.wshape, stride, padding, dilation, groups, &a.g, oshape) < 0) return NULL;
    if (check_grad_output(a.op, a.go, oshape) < 0) return NULL;
    if (cpu_depthwise_half(a.op, &a.g, a.go->dtype, a.go->device) < 0) return NULL;
    return conv_backward(&a);
}

/* ---- conv_transpose2d ----------------------------------------------------------------------------------- */
static PyObject *py_conv_transpose2d(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"input", "weight", "bias", "stride", "padding", "output_padding", "groups",
                             "dilation", NULL};
    const char *op = "conv_transpose2d";
    PyObject *xo, *wo, *bo = Py_None, *stride = NULL, *dilation = NULL, *padding = NULL, *opad = NULL;
    long long groups = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|OOOOLO:conv_transpose2d", kwlist, &xo, &wo, &bo, &stride,
                                     &padding, &opad, &groups, &dilation))
        return NULL;
    GMTensor *x = as_tensor(xo, op, "input", 0), *w = x ? as_tensor(wo, op, "weight", 0) : NULL;
    GMTensor *b = w ? as_tensor(bo, op, "bias", 1) : NULL;
    if (!w || (bo != Py_None && !b)) return NULL;
    GMTensor *ops[] = {x, w, b};
    const char *names[] = {"input", "weight", "bias"};
    conv_geom g;
    int64_t oshape[4];
    if (check_4d(op, "input", "(N, C, H, W)", x->ndim, x->shape) < 0 ||
        check_4d(op, "weight", "(in_channels, out_channels/groups, kH, kW)", w->ndim, w->shape) < 0 ||
        check_operands_ex(op, ops, names, 3, 1) < 0 ||
        plan_conv_transpose2d(op, x->shape, w->shape, stride, padding, opad, groups, dilation, &g, oshape) < 0 ||
        check_bias(op, b, oshape[1], "out_channels") < 0 || cpu_depthwise_half(op, &g, x->dtype, x->device) < 0)
        return NULL;
    set_input_strides(&g, NULL); /* the underlying conv's input is our output: contiguous, never read */
    GMTensor *xc = NULL, *wc = NULL, *bc = NULL, *out = NULL;
    size_t used = 0;
    if (contiguous(x, &xc, &used) < 0 || contiguous(w, &wc, &used) < 0 || contiguous(b, &bc, &used) < 0) goto fail;
    if (!(out = gm_empty(4, oshape, x->dtype, x->device))) goto fail;
    if (run_out_pass(op, &g, CONV_BACKWARD_DATA, out, xc, wc, bc, used) < 0) goto fail;
    Py_XDECREF(xc);
    Py_XDECREF(wc);
    Py_XDECREF(bc);
    return (PyObject *)out;
fail:
    Py_XDECREF(xc);
    Py_XDECREF(wc);
    Py_XDECREF(bc);
    Py_XDECREF(out);
    return NULL;
}

static PyObject *py_conv_transpose2d_backward(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"grad_output", "input", "weight", "stride", "padding", "output_padding", "groups",
                             "dilation", "output_mask", "input_shape", "weight_shape", NULL};
    PyObject *goo, *xo, *wo, *stride, *padding, *opad, *dilation, *masko, *xshape = Py_None, *wshape = Py_None;
    long long groups;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOOLOO|OO:conv_transpose2d_backward", kwlist, &goo, &xo, &wo,
                                     &stride, &padding, &opad, &groups, &dilation, &masko, &xshape, &wshape))
        return NULL;
    conv_bwd a = {.op = "conv_transpose2d_backward", .transposed = 1};
    int64_t oshape[4];
    if (parse_backward(&a, goo, xo, wo, xshape, wshape, masko) < 0) return NULL;
    if (plan_conv_transpose2d(a.op, a.xshape, a.wshape, stride, padding, opad, groups, dilation, &a.g, oshape) < 0)
        return NULL;
    if (check_grad_output(a.op, a.go, oshape) < 0) return NULL;
    if (cpu_depthwise_half(a.op, &a.g, a.go->dtype, a.go->device) < 0) return NULL;
    return conv_backward(&a);
}

/* ---- linear ---------------------------------------------------------------------------------------------- */
/* t (..., cols) as a BLAS matrix (rows, cols): the leading dims must collapse into one row stride. 0 when t
 * needs a contiguous copy first. */
static int as_matrix(GMTensor *t, int64_t rows, int64_t cols, conv_mat *m) {
    int nd = t->ndim;
    int64_t es = (int64_t)gm_dtype_size(t->dtype), n = 1, rs = cols, expect = 0;
    for (int i = nd - 2; i >= 0; i--) {
        int64_t s = t->shape[i];
        if (s == 1) continue;
        if (s == 0) break; /* nothing is read */
        if (n == 1) rs = t->strides[i];
        else if (t->strides[i] != expect) return 0;
        n *= s;
        expect = rs * n;
    }
    int64_t cs = nd >= 1 ? t->strides[nd - 1] : 1;
    int64_t ld;
    if (!cpu_matmul_blas_layout(rows, cols, rs * es, cs * es, (size_t)es, &m->trans, &ld)) return 0;
    m->p = gm_tensor_data(t);
    m->ld = ld;
    return 1;
}

/* m describes t, or a contiguous workspace copy of it made into *copy (on meta the copy is only allocated). */
static int matrix_operand(GMTensor *t, int64_t rows, int64_t cols, conv_mat *m, GMTensor **copy) {
    *copy = NULL;
    if (as_matrix(t, rows, cols, m)) return 0;
    size_t unused = 0;
    if (contiguous(t, copy, &unused) < 0) return -1;
    as_matrix(*copy, rows, cols, m);
    return 0;
}

static int plan_linear(const char *op, int xnd, const int64_t *xs, int wnd, const int64_t *ws, int64_t *M,
                       int64_t *I, int64_t *O) {
    char sx[GM_SHAPE_BUF], sw[GM_SHAPE_BUF];
    if (wnd != 2) {
        PyErr_Format(PyExc_ValueError, "%s: expected a 2-D weight (out_features, in_features), got shape %s", op,
                     gm_shape_str(wnd, ws, sw));
        return -1;
    }
    if (xnd < 1) {
        PyErr_Format(PyExc_ValueError, "%s: expected an input with at least 1 dimension (..., in_features), got a "
                     "0-d tensor", op);
        return -1;
    }
    if (xs[xnd - 1] != ws[1]) {
        PyErr_Format(PyExc_ValueError, "%s: input %s has %lld features in its last dimension, but weight %s "
                     "(out_features, in_features) expects %lld", op, gm_shape_str(xnd, xs, sx),
                     (long long)xs[xnd - 1], gm_shape_str(2, ws, sw), (long long)ws[1]);
        return -1;
    }
    *M = 1;
    for (int i = 0; i < xnd - 1; i++) *M *= xs[i];
    *I = ws[1];
    *O = ws[0];
    return 0;
}

static PyObject *py_linear(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"input", "weight", "bias", NULL};
    const char *op = "linear";
    PyObject *xo, *wo, *bo = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|O:linear", kwlist, &xo, &wo, &bo)) return NULL;
    GMTensor *x = as_tensor(xo, op, "input", 0), *w = x ? as_tensor(wo, op, "weight", 0) : NULL;
    GMTensor *b = w ? as_tensor(bo, op, "bias", 1) : NULL;
    if (!w || (bo != Py_None && !b)) return NULL;
    GMTensor *ops[] = {x, w, b};
    const char *names[] = {"input", "weight", "bias"};
    int64_t M, I, O;
    if (check_operands(op, ops, names, 3) < 0 ||
        plan_linear(op, x->ndim, x->shape, w->ndim, w->shape, &M, &I, &O) < 0 ||
        check_bias(op, b, w->shape[0], "out_features") < 0)
        return NULL;
    int64_t oshape[GM_MAX_DIMS];
    memcpy(oshape, x->shape, sizeof(int64_t) * x->ndim);
    oshape[x->ndim - 1] = O;
    GMTensor *xc = NULL, *wc = NULL, *bc = NULL, *out = NULL;
    conv_mat mx = {0}, mw = {0};
    size_t used = 0;
    if (matrix_operand(x, M, I, &mx, &xc) < 0 || matrix_operand(w, O, I, &mw, &wc) < 0 ||
        contiguous(b, &bc, &used) < 0)
        goto fail;
    if (!(out = gm_empty(x->ndim, oshape, x->dtype, x->device))) goto fail;
    void *po = gm_tensor_data(out), *pb = data_or_null(bc);
    if (GM_KERNEL(op, x->device, linear_forward(po, mx, mw, pb, M, I, O, x->dtype, gm_num_threads),
                  cuda_linear_forward(po, mx, mw, pb, M, I, O, x->dtype, ctx)) < 0)
        goto fail;
    Py_XDECREF(xc);
    Py_XDECREF(wc);
    Py_XDECREF(bc);
    return (PyObject *)out;
fail:
    Py_XDECREF(xc);
    Py_XDECREF(wc);
    Py_XDECREF(bc);
    Py_XDECREF(out);
    return NULL;
}

static PyObject *py_linear_backward(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"grad_output", "input", "weight", "output_mask", "input_shape", "weight_shape", NULL};
    const char *op = "linear_backward";
    PyObject *goo, *xo, *wo, *masko, *xshape_o = Py_None, *wshape_o = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOO|OO:linear_backward", kwlist, &goo, &xo, &wo, &masko,
                                     &xshape_o, &wshape_o))
        return NULL;
    int mask[3], xnd, wnd;
    int64_t xshape[GM_MAX_DIMS], wshape[GM_MAX_DIMS], M, I, O;
    GMTensor *go = as_tensor(goo, op, "grad_output", 0);
    if (!go) return NULL;
    GMTensor *x = as_tensor(xo, op, "input", 1);
    if (xo != Py_None && !x) return NULL;
    GMTensor *w = as_tensor(wo, op, "weight", 1);
    if (wo != Py_None && !w) return NULL;
    GMTensor *ops[] = {go, x, w};
    const char *names[] = {"grad_output", "input", "weight"};
    if (parse_mask(masko, mask) < 0 || shape_of(x, xshape_o, op, "input", &xnd, xshape) < 0 ||
        shape_of(w, wshape_o, op, "weight", &wnd, wshape) < 0 || check_operands(op, ops, names, 3) < 0 ||
        plan_linear(op, xnd, xshape, wnd, wshape, &M, &I, &O) < 0)
        return NULL;
    if ((mask[0] && check_needed(op, w, "weight", "input") < 0) ||
        (mask[1] && check_needed(op, x, "input", "weight") < 0))
        return NULL;
    int64_t oshape[GM_MAX_DIMS];
    memcpy(oshape, xshape, sizeof(int64_t) * xnd);
    oshape[xnd - 1] = O;
    if (go->ndim != xnd || memcmp(go->shape, oshape, sizeof(int64_t) * xnd)) {
        char sg[GM_SHAPE_BUF], so[GM_SHAPE_BUF];
        PyErr_Format(PyExc_ValueError, "%s: grad_output has shape %s, expected the output's shape %s", op,
                     gm_shape_str(go->ndim, go->shape, sg), gm_shape_str(xnd, oshape, so));
        return NULL;
    }
    GMTensor *gc = NULL, *xc = NULL, *wc = NULL, *dx = NULL, *dw = NULL, *db = NULL;
    conv_mat mg = {0}, mx = {0}, mw = {0};
    gm_device dev = go->device;
    if (matrix_operand(go, M, O, &mg, &gc) < 0) goto fail;
    if (mask[0] && matrix_operand(w, O, I, &mw, &wc) < 0) goto fail;
    if (mask[1] && matrix_operand(x, M, I, &mx, &xc) < 0) goto fail;
    if (mask[0] && !(dx = gm_empty(xnd, xshape, go->dtype, dev))) goto fail;
    if (mask[1] && !(dw = gm_empty(2, wshape, go->dtype, dev))) goto fail;
    if (mask[2] && !(db = gm_empty(1, &O, go->dtype, dev))) goto fail;
    void *pdx = data_or_null(dx), *pdw = data_or_null(dw), *pdb = data_or_null(db);
    if (GM_KERNEL(op, dev, linear_backward(pdx, pdw, pdb, mg, mx, mw, M, I, O, go->dtype, gm_num_threads),
                  cuda_linear_backward(pdx, pdw, pdb, mg, mx, mw, M, I, O, go->dtype, ctx)) < 0)
        goto fail;
    Py_XDECREF(gc);
    Py_XDECREF(xc);
    Py_XDECREF(wc);
    return grads_tuple(dx, dw, db);
fail:
    Py_XDECREF(gc);
    Py_XDECREF(xc);
    Py_XDECREF(wc);
    Py_XDECREF(dx);
    Py_XDECREF(dw);
    Py_XDECREF(db);
    return NULL;
}

/* ---- the workspace bound ---------------------------------------------------------------------------------- */
static PyObject *py_set_conv_workspace_limit(PyObject *self, PyObject *arg) {
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

static PyObject *py_get_conv_workspace_limit(PyObject *self, PyObject *unused) {
    return PyLong_FromSize_t(conv_workspace_limit);
}

#define KW(f) (PyCFunction)(void (*)(void))(f), METH_VARARGS | METH_KEYWORDS
PyMethodDef gm_conv_methods[] = {
    {"conv2d", KW(py_conv2d),
     "conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1): NCHW; padding an int, a "
     "pair, 'same' or 'valid'."},
    {"conv2d_backward", KW(py_conv2d_backward),
     "conv2d_backward(grad_output, input, weight, stride, padding, dilation, groups, output_mask, input_shape=None,"
     " weight_shape=None) -> (grad_input, grad_weight, grad_bias), None where output_mask is False. input may be "
     "None unless grad_weight is wanted, weight None unless grad_input is (then pass their shapes)."},
    {"conv_transpose2d", KW(py_conv_transpose2d),
     "conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1)."},
    {"conv_transpose2d_backward", KW(py_conv_transpose2d_backward),
     "conv_transpose2d_backward(grad_output, input, weight, stride, padding, output_padding, groups, dilation, "
     "output_mask, input_shape=None, weight_shape=None) -> (grad_input, grad_weight, grad_bias)."},
    {"linear", KW(py_linear), "linear(input, weight, bias=None): input (..., in) @ weight (out, in)^T + bias."},
    {"linear_backward", KW(py_linear_backward),
     "linear_backward(grad_output, input, weight, output_mask, input_shape=None, weight_shape=None) -> "
     "(grad_input, grad_weight, grad_bias)."},
    {"set_conv_workspace_limit", py_set_conv_workspace_limit, METH_O,
     "set_conv_workspace_limit(nbytes): the most scratch one convolution may hold (default 64 MiB)."},
    {"get_conv_workspace_limit", py_get_conv_workspace_limit, METH_NOARGS,
     "get_conv_workspace_limit() -> bytes."},
    {"_conv_algo_fake", py_conv_algo_fake, METH_O,
     "_conv_algo_fake(sizes or None): for tests, CUDA convolutions choose among candidates with these workspace "
     "sizes (best first; they run the direct kernels); None restores cuDNN's. Clears the algorithm cache."},
    {"_conv_algo_last", py_conv_algo_last, METH_NOARGS,
     "_conv_algo_last() -> dict(pass, index, cached, algo, math, workspace) of the last CUDA algorithm pick, or "
     "None."},
    {"_conv_algo_cache_clear", py_conv_algo_cache_clear, METH_NOARGS,
     "_conv_algo_cache_clear(): forget the cached CUDA convolution algorithm choices."},
    {NULL, NULL, 0, NULL},
};
