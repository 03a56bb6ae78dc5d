/* csrc/ops_pad.c — F.pad: pad(input, pad, mode, value) and pad_backward(grad, pad, mode, input_shape), for the
 * last 1, 2 or 3 dims in modes constant (any dtype, any sign of pad: negative pads crop), reflect, replicate and
 * circular (float dtypes). Validation and shapes follow PyTorch's rules and messages (RuntimeError for bad sizes,
 * NotImplementedError for the unsupported combinations of mode and dims), once for every device; then the output
 * is allocated (gm_empty) and kernels/cpu/pad.c or kernels/cuda/pad.cu runs; meta stops before the kernel. A
 * non-contiguous input is first copied (a workspace tensor, freed before return: the kernels read
 * (planes, D, H, W) contiguous). Circular padding with negative pads (crop first, then wrap) is composed in
 * python/gpumemnet/nn/_functional_layers.py from a slice and a non-negative pad, as PyTorch does. */
#include "gm.h"
#include <math.h>

#include "cpu/pad.h"
#include "ops_nn_internal.h"
#ifdef GM_WITH_CUDA
#include "cuda/pad.h"
#endif

static const char *const mode_names[4] = {"constant", "reflect", "replicate", "circular"};

/* The geometry of padding `shape` by pads (PyTorch's order: last dim first, (before, after) pairs). Fills g and
 * the output shape. 0, or -1 + exception. */
static int pad_plan(int ndim, const int64_t *shape, int npad, const int64_t *pads, int mode, pad_geom *g,
                    int64_t *oshape) {
    char b[GM_SHAPE_BUF];
    if (mode < PAD_CONSTANT || mode > PAD_CIRCULAR) {
        PyErr_Format(PyExc_NotImplementedError, "pad: unrecognised padding mode code %d", mode);
        return -1;
    }
    if (npad % 2) {
        PyErr_SetString(PyExc_RuntimeError, "Padding length must be divisible by 2");
        return -1;
    }
    const int k = npad / 2;
    if (k > ndim) {
        PyErr_Format(PyExc_RuntimeError, "Padding length should be less than or equal to two times the input "
                     "dimension but got padding length %d and input of dimension %d", npad, ndim);
        return -1;
    }
    if (mode != PAD_CONSTANT && (k < 1 || k > 3 || (ndim != k + 1 && ndim != k + 2))) {
        PyErr_Format(PyExc_NotImplementedError, "Padding size %d is not supported for %dD input tensor.\nSupported "
                     "combinations for non-constant padding:\n  - 2D or 3D input: padding size = 2 (pads last "
                     "dimension)\n  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n  - 4D or 5D input: "
                     "padding size = 6 (pads last 3 dimensions)", npad, ndim);
        return -1;
    }
    if (k > 3) {
        PyErr_Format(PyExc_NotImplementedError, "pad: constant padding of more than the last 3 dims is not "
                     "supported (padding length %d); pad in two steps", npad);
        return -1;
    }
    memset(g, 0, sizeof *g);
    g->mode = mode;
    g->planes = 1;
    for (int d = 0; d < ndim - k; d++) g->planes *= shape[d];
    for (int j = 0; j < 3; j++) g->in[j] = g->out[j] = 1;
    memcpy(oshape, shape, sizeof(int64_t) * ndim);
    for (int j = 0; j < k; j++) { /* pads[2j], pads[2j+1] pad dim ndim-1-j, geometry slot 2-j */
        const int d = ndim - 1 - j, s = 2 - j;
        const int64_t n = shape[d], lo = pads[2 * j], hi = pads[2 * j + 1], out = n + lo + hi;
        if (mode == PAD_REFLECT && (lo >= n || hi >= n)) {
            PyErr_Format(PyExc_RuntimeError, "pad: Padding size should be less than the corresponding input "
                         "dimension, but got: padding (%lld, %lld) at dimension %d of input %s", (long long)lo,
                         (long long)hi, d, gm_shape_str(ndim, shape, b));
            return -1;
        }
        if (mode == PAD_CIRCULAR && (lo > n || hi > n || lo < 0 || hi < 0)) {
            PyErr_Format(PyExc_RuntimeError, lo < 0 || hi < 0 ? "pad: circular padding takes non-negative pads "
                         "here (F.pad crops first), got (%lld, %lld) at dimension %d of input %s"
                         : "Padding value causes wrapping around more than once: padding (%lld, %lld) at dimension "
                         "%d of input %s", (long long)lo, (long long)hi, d, gm_shape_str(ndim, shape, b));
            return -1;
        }
        if (mode != PAD_CONSTANT && n < 1) {
            PyErr_Format(PyExc_RuntimeError, "pad: %s padding needs a non-empty dimension %d, got input %s",
                         mode_names[mode], d, gm_shape_str(ndim, shape, b));
            return -1;
        }
        if (out < 0) {
            PyErr_Format(PyExc_RuntimeError, "pad: the input size %lld, plus negative padding %lld and %lld resulted "
                         "in a negative output size, which is invalid. Check dimension %d of your input.",
                         (long long)n, (long long)lo, (long long)hi, d);
            return -1;
        }
        g->in[s] = n, g->out[s] = out, g->before[s] = lo;
        oshape[d] = out;
    }
    return 0;
}

/* value as one element of dtype dt (PyTorch's fill: a float converted, integers truncated toward zero, bool
 * value != 0). The narrow integers refuse a value out of their range with PyTorch's error (a uint8 mask padded
 * with -1); 0, or -1 + RuntimeError. */
static int fill_bytes(double value, gm_dtype dt, uint64_t *bits) {
    static const struct {
        double lo, hi;
        int size;
        const char *name;
    } narrow[] = {[GM_U8 - GM_U8] = {0, 255, 1, "uint8_t"},
                  [GM_I8 - GM_U8] = {-128, 127, 1, "int8_t"},
                  [GM_I16 - GM_U8] = {-32768, 32767, 2, "int16_t"},
                  [GM_I32 - GM_U8] = {-2147483648.0, 2147483647.0, 4, "int32_t"}};
    *bits = 0;
    switch (dt) {
    case GM_F32: { float f = (float)value; memcpy(bits, &f, 4); break; }
    case GM_F64: memcpy(bits, &value, 8); break;
    case GM_F16: { uint16_t h = gm_float_to_half((float)value); memcpy(bits, &h, 2); break; }
    case GM_BF16: { uint16_t h = gm_float_to_bf16((float)value); memcpy(bits, &h, 2); break; }
    case GM_I64: { int64_t v = (int64_t)value; memcpy(bits, &v, 8); break; }
    case GM_U8: case GM_I8: case GM_I16: case GM_I32: {
        const double v = trunc(value);
        if (!(v >= narrow[dt - GM_U8].lo && v <= narrow[dt - GM_U8].hi)) {
            PyErr_Format(PyExc_RuntimeError, "value cannot be converted to type %s without overflow",
                         narrow[dt - GM_U8].name);
            return -1;
        }
        /* the value's low bytes: two's complement, little-endian like every target the build supports */
        const int64_t i = (int64_t)v;
        memcpy(bits, &i, (size_t)narrow[dt - GM_U8].size);
        break;
    }
    default: { uint8_t v = value != 0.0; memcpy(bits, &v, 1); break; }
    }
    return 0;
}

static int pads_arg(PyObject *o, int *npad, int64_t *pads) {
    return gm_parse_shape_any(o, npad, pads, "pad: pad");
}

static PyObject *py_pad(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"input", "pad", "mode", "value", NULL};
    PyObject *xo, *po;
    int mode = PAD_CONSTANT, npad;
    double value = 0.0;
    int64_t pads[GM_MAX_DIMS], oshape[GM_MAX_DIMS];
    pad_geom g;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|id:pad", kwlist, &xo, &po, &mode, &value)) return NULL;
    GMTensor *x = gm_tensor_arg(xo, "pad", "input");
    if (!x || pads_arg(po, &npad, pads) < 0 || pad_plan(x->ndim, x->shape, npad, pads, mode, &g, oshape) < 0)
        return NULL;
    if (mode != PAD_CONSTANT && !gm_dtype_is_float(x->dtype)) {
        PyErr_Format(PyExc_TypeError, "pad: %s padding takes a floating-point input, got %s", mode_names[mode],
                     gm_dtype_name(x->dtype));
        return NULL;
    }
    uint64_t fill;
    if (fill_bytes(value, x->dtype, &fill) < 0) return NULL;
    GMTensor *xc = contig(x), *out = xc ? gm_empty(x->ndim, oshape, x->dtype, x->device) : NULL;
    if (out && GM_KERNEL("pad", x->device, pad_forward(data(out), data(xc), &fill, &g, x->dtype,
                                                       gm_num_threads),
                         cuda_pad_forward(data(out), data(xc), &fill, &g, x->dtype, ctx)) < 0)
        Py_CLEAR(out);
    Py_XDECREF(xc);
    return (PyObject *)out;
}

static PyObject *py_pad_backward(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"grad", "pad", "mode", "input_shape", NULL};
    PyObject *go, *po, *so;
    int mode, npad, ndim;
    int64_t pads[GM_MAX_DIMS], shape[GM_MAX_DIMS], oshape[GM_MAX_DIMS];
    pad_geom g;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOiO:pad_backward", kwlist, &go, &po, &mode, &so)) return NULL;
    GMTensor *gr = gm_tensor_arg(go, "pad_backward", "grad");
    if (!gr || pads_arg(po, &npad, pads) < 0 || gm_parse_shape_any(so, &ndim, shape, "pad_backward: input_shape") < 0 ||
        pad_plan(ndim, shape, npad, pads, mode, &g, oshape) < 0)
        return NULL;
    char a[GM_SHAPE_BUF], b[GM_SHAPE_BUF];
    if (gr->ndim != ndim || memcmp(gr->shape, oshape, sizeof(int64_t) * ndim)) {
        PyErr_Format(PyExc_ValueError, "pad_backward: grad shape %s does not match the padded output shape %s",
                     gm_shape_str(gr->ndim, gr->shape, a), gm_shape_str(ndim, oshape, b));
        return NULL;
    }
    if (!gm_dtype_is_float(gr->dtype)) {
        PyErr_Format(PyExc_TypeError, "pad_backward: expected a floating-point grad, got %s", gm_dtype_name(gr->dtype));
        return NULL;
    }
    GMTensor *gc = contig(gr), *dx = gc ? gm_empty(ndim, shape, gr->dtype, gr->device) : NULL;
    if (dx && GM_KERNEL("pad_backward", gr->device,
                        pad_backward(data(dx), data(gc), &g, gr->dtype, gm_num_threads),
                        cuda_pad_backward(data(dx), data(gc), &g, gr->dtype, ctx)) < 0)
        Py_CLEAR(dx);
    Py_XDECREF(gc);
    return (PyObject *)dx;
}

#define KW(f) (PyCFunction)(void (*)(void))(f), METH_VARARGS | METH_KEYWORDS

PyMethodDef gm_pad_methods[] = {
    {"pad", KW(py_pad), "pad(input, pad, mode=0, value=0.0): modes CONSTANT=0 REFLECT=1 REPLICATE=2 CIRCULAR=3."},
    {"pad_backward", KW(py_pad_backward), "pad_backward(grad, pad, mode, input_shape) -> dinput."},
    {NULL, NULL, 0, NULL},
};
