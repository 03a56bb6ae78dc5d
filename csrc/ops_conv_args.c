/* csrc/ops_conv_args.c — the convolution family's argument parsing and shape planning: stride, padding ('same',
 * 'valid'), dilation and output_padding as an int or a pair; the operands' dtypes and devices; and the
 * conv_geom and output shape of conv2d and conv_transpose2d, with every ValueError a bad combination of them
 * raises. Shared by the forward (ops_conv.c) and backward (ops_conv_backward.c) ops and linear (ops_linear.c). */
#include "ops_conv_internal.h"
#include "meta_target.h"

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

int conv_check_operands(const char *op, GMTensor **ts, const char **names, int n, int cpu_half) {
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
     * of columns as they gather them, summing in float32 and rounding once), the depthwise passes a plane at a
     * time (kernels/cpu/conv_depthwise.c). */
    int half = ref->dtype == GM_F16 || ref->dtype == GM_BF16;
    if (ref->device.type == GM_DEV_CPU && ref->dtype != GM_F32 && ref->dtype != GM_F64 && !(cpu_half && half)) {
        PyErr_Format(PyExc_TypeError, "%s: %s is not supported on the CPU; use float32 or float64 (e.g. "
                     ".float() on the input and the parameters)", op, gm_dtype_name(ref->dtype));
        return -1;
    }
    return 0;
}

int conv_f32_weight(GMTensor *x, GMTensor *w, GMTensor *b, int64_t groups) {
    if (!x || !w || x->dtype != GM_BF16 || w->dtype != GM_F32 || (b && b->dtype != GM_F32) || groups != 1) return 0;
    const int cpu = x->device.type == GM_DEV_CPU || (x->device.type == GM_DEV_META && !gm_meta_as_cuda(x->device));
    return cpu && conv_half_reads_f32_weight();
}

int conv_check_mixed(const char *op, GMTensor **ts, const char **names, int n, int nact, int mixed) {
    if (!mixed) return conv_check_operands(op, ts, names, n, 1);
    if (conv_check_operands(op, ts, names, nact, 1) < 0 ||
        conv_check_operands(op, ts + nact, names + nact, n - nact, 1) < 0)
        return -1;
    for (int i = nact; i < n; i++)
        if (ts[i] && gm_check_same_device(op, ts[0], ts[i]) < 0) return -1;
    return 0;
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
        /* Checked: huge padding or dilation would overflow int64 (undefined behaviour without -fwrapv). */
        int64_t padded, span;
        if (__builtin_add_overflow(xshape[2 + d], pads[2 * d], &padded) ||
            __builtin_add_overflow(padded, pads[2 * d + 1], &padded) ||
            __builtin_mul_overflow(dil[d], wshape[2 + d] - 1, &span) || __builtin_add_overflow(span, 1, &span)) {
            char sx[GM_SHAPE_BUF], sw[GM_SHAPE_BUF];
            PyErr_Format(PyExc_ValueError, "%s: padding (%lld, %lld, %lld, %lld) or dilation (%lld, %lld) is too "
                         "large: the padded input or the dilated kernel would not fit in 64 bits (input %s, "
                         "weight %s)", op, (long long)pads[0], (long long)pads[1], (long long)pads[2],
                         (long long)pads[3], (long long)dil[0], (long long)dil[1], gm_shape_str(4, xshape, sx),
                         gm_shape_str(4, wshape, sw));
            return -1;
        }
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

int plan_conv2d(const char *op, const int64_t *xs, const int64_t *ws, PyObject *stride_o, PyObject *pad_o,
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
    if (ws[0] < 1) {
        PyErr_Format(PyExc_ValueError, "%s: the weight must have at least 1 output channel, got weight of shape %s",
                     op, gm_shape_str(4, ws, sw));
        return -1;
    }
    if (xs[2] < 1 || xs[3] < 1) {  /* PyTorch too: only the batch (or channels) may be empty */
        PyErr_Format(PyExc_ValueError, "%s: the input's height and width must be at least 1, got input of shape %s",
                     op, gm_shape_str(4, xs, sx));
        return -1;
    }
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

int plan_conv_transpose2d(const char *op, const int64_t *xs, const int64_t *ws, PyObject *stride_o, PyObject *pad_o,
                          PyObject *opad_o, int64_t groups, PyObject *dil_o, conv_geom *g, int64_t out[4]) {
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
    int64_t o[2], ws1_groups;
    for (int d = 0; d < 2; d++) {
        /* (in - 1) * stride - 2 * pad + dil * (k - 1) + output_padding + 1, checked: huge stride, padding or
         * dilation would overflow int64 (undefined behaviour without -fwrapv) */
        int64_t a, b, c;
        if (__builtin_mul_overflow(xs[2 + d] - 1, stride[d], &a) || __builtin_mul_overflow(pads[2 * d], 2, &b) ||
            __builtin_sub_overflow(a, b, &a) || __builtin_mul_overflow(dil[d], ws[2 + d] - 1, &c) ||
            __builtin_add_overflow(a, c, &a) || __builtin_add_overflow(a, opad[d] + 1, &o[d])) {
            PyErr_Format(PyExc_ValueError, "%s: stride (%lld, %lld), padding (%lld, %lld) or dilation (%lld, %lld) "
                         "is too large: the output size would not fit in 64 bits (input %s, weight %s)", op,
                         (long long)stride[0], (long long)stride[1], (long long)pads[0], (long long)pads[2],
                         (long long)dil[0], (long long)dil[1], gm_shape_str(4, xs, sx), gm_shape_str(4, ws, sw));
            return -1;
        }
    }
    if (__builtin_mul_overflow(ws[1], groups, &ws1_groups)) {
        PyErr_Format(PyExc_ValueError, "%s: groups=%lld times the weight's %lld output channels per group does not "
                     "fit in 64 bits (weight %s)", op, (long long)groups, (long long)ws[1], gm_shape_str(4, ws, sw));
        return -1;
    }
    if (o[0] < 1 || o[1] < 1 || xs[2] < 1 || xs[3] < 1) {
        PyErr_Format(PyExc_ValueError, "%s: input %s with weight %s, stride (%lld, %lld), padding (%lld, %lld) "
                     "gives an empty output %lldx%lld", op, gm_shape_str(4, xs, sx), gm_shape_str(4, ws, sw),
                     (long long)stride[0], (long long)stride[1], (long long)pads[0], (long long)pads[2],
                     (long long)o[0], (long long)o[1]);
        return -1;
    }
    *g = (conv_geom){.N = xs[0], .C = ws1_groups, .H = o[0], .W = o[1], .K = xs[1], .R = ws[2], .S = ws[3],
                     .P = xs[2], .Q = xs[3], .sh = stride[0], .sw = stride[1], .ph = pads[0], .pw = pads[2],
                     .dh = dil[0], .dw = dil[1], .G = groups};
    out[0] = xs[0];
    out[1] = ws1_groups;
    out[2] = o[0];
    out[3] = o[1];
    return 0;
}
