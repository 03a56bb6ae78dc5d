/* csrc/ops_roi.c — torchvision's roi_align (python/gpumemnet/compat/torchvision_ops.py calls it for
 * torch.ops.torchvision.roi_align and its backward): argument checks, outputs, and the kernels of
 * kernels/cpu/roi_align.c and kernels/cuda/roi_align.cu. On meta the same outputs are allocated.
 *
 *   roi_align(input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned) -> (K, C, PH, PW)
 *   roi_align_backward(grad, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned,
 *                      input_shape) -> grad_input (N, C, H, W)
 * input (N, C, H, W) and rois (K, 5) of one float dtype, float32 or float64 (torchvision's autocast runs the op in
 * float32), on one device. */
#include "gm.h"

#include "cpu/roi_align.h"
#include "ops_nn_internal.h" /* contig, data: the nn family's helpers, as ops_pad.c uses them */
#ifdef GM_WITH_CUDA
#include "cuda/roi_align.h"
#endif

static int roi_dtype(const char *op, const char *name, GMTensor *t) {
    if (t->dtype == GM_F32 || t->dtype == GM_F64) return 0;
    PyErr_Format(PyExc_TypeError, "%s: %s must be float32 or float64 (autocast runs the op in float32), got %s", op,
                 name, gm_dtype_name(t->dtype));
    return -1;
}

/* The boxes (K, 5) beside `like` (its dtype and device), and the bins: fills g's K, PH, PW and the options. */
static int roi_common(const char *op, GMTensor *rois, GMTensor *like, double scale, long long ph, long long pw,
                      long long sampling_ratio, int aligned, roi_align_geom *g) {
    char b[GM_SHAPE_BUF];
    if (roi_dtype(op, "rois", rois) < 0 || gm_check_same_device(op, like, rois) < 0) return -1;
    if (rois->dtype != like->dtype) {
        PyErr_Format(PyExc_RuntimeError, "%s: Expected tensor for input to have the same type as tensor for rois; "
                     "but type %s does not equal %s", op, gm_dtype_name(like->dtype), gm_dtype_name(rois->dtype));
        return -1;
    }
    if (rois->ndim != 2 || rois->shape[1] != 5) {
        PyErr_Format(PyExc_RuntimeError, "%s: rois must have shape (K, 5), got %s", op,
                     gm_shape_str(rois->ndim, rois->shape, b));
        return -1;
    }
    if (ph < 1 || pw < 1) {
        PyErr_Format(PyExc_ValueError, "%s: the output size must be positive, got (%lld, %lld)", op, ph, pw);
        return -1;
    }
    g->K = rois->shape[0], g->PH = ph, g->PW = pw;
    g->scale = scale, g->sampling_ratio = sampling_ratio, g->aligned = aligned;
    return 0;
}

/* The feature map's (N, C, H, W) into g. */
static int roi_input_shape(const char *op, int ndim, const int64_t *shape, roi_align_geom *g) {
    char b[GM_SHAPE_BUF];
    if (ndim != 4 || shape[2] < 1 || shape[3] < 1) {
        PyErr_Format(PyExc_RuntimeError, "%s: input must be (N, C, H, W) with H, W >= 1, got %s", op,
                     gm_shape_str(ndim, shape, b));
        return -1;
    }
    g->N = shape[0], g->C = shape[1], g->H = shape[2], g->W = shape[3];
    return 0;
}

static PyObject *py_roi_align(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"input", "rois", "spatial_scale", "pooled_height", "pooled_width", "sampling_ratio",
                             "aligned", NULL};
    const char *op = "roi_align";
    PyObject *xo, *ro;
    double scale;
    long long ph, pw, sr;
    int aligned;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOdLLLp:roi_align", kwlist, &xo, &ro, &scale, &ph, &pw, &sr,
                                     &aligned))
        return NULL;
    GMTensor *x = gm_tensor_arg(xo, op, "input"), *rois = x ? gm_tensor_arg(ro, op, "rois") : NULL;
    roi_align_geom g;
    if (!rois || roi_dtype(op, "input", x) < 0 || roi_input_shape(op, x->ndim, x->shape, &g) < 0 ||
        roi_common(op, rois, x, scale, ph, pw, sr, aligned, &g) < 0)
        return NULL;
    const int64_t shape[4] = {g.K, g.C, g.PH, g.PW};
    GMTensor *xc = contig(x), *rc = xc ? contig(rois) : NULL;
    GMTensor *out = rc ? gm_empty(4, shape, x->dtype, x->device) : NULL;
    gm_note_work(g.K * g.C * g.PH * g.PW * 4);
    if (out && GM_KERNEL(op, x->device, roi_align_forward(data(out), data(xc), data(rc), &g, x->dtype,
                                                          gm_num_threads),
                         cuda_roi_align_forward(data(out), data(xc), data(rc), &g, x->dtype, ctx)) < 0)
        Py_CLEAR(out);
    Py_XDECREF(xc);
    Py_XDECREF(rc);
    return (PyObject *)out;
}

static PyObject *py_roi_align_backward(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"grad", "rois", "spatial_scale", "pooled_height", "pooled_width", "sampling_ratio",
                             "aligned", "input_shape", NULL};
    const char *op = "roi_align_backward";
    PyObject *go, *ro, *so;
    double scale;
    long long ph, pw, sr;
    int aligned, ndim;
    int64_t in_shape[GM_MAX_DIMS];
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOdLLLpO:roi_align_backward", kwlist, &go, &ro, &scale, &ph, &pw,
                                     &sr, &aligned, &so))
        return NULL;
    GMTensor *gr = gm_tensor_arg(go, op, "grad"), *rois = gr ? gm_tensor_arg(ro, op, "rois") : NULL;
    roi_align_geom g;
    if (!rois || gm_parse_shape_any(so, &ndim, in_shape, "roi_align_backward: input_shape") < 0 ||
        roi_dtype(op, "grad", gr) < 0 || roi_input_shape(op, ndim, in_shape, &g) < 0 ||
        roi_common(op, rois, gr, scale, ph, pw, sr, aligned, &g) < 0)
        return NULL;
    const int64_t gshape[4] = {g.K, g.C, g.PH, g.PW};
    char b[GM_SHAPE_BUF], e[GM_SHAPE_BUF];
    if (gr->ndim != 4 || memcmp(gr->shape, gshape, sizeof gshape)) {
        PyErr_Format(PyExc_RuntimeError, "%s: grad must have shape %s (K, C, PH, PW), got %s", op,
                     gm_shape_str(4, gshape, e), gm_shape_str(gr->ndim, gr->shape, b));
        return NULL;
    }
    GMTensor *gc = contig(gr), *rc = gc ? contig(rois) : NULL;
    GMTensor *out = rc ? gm_empty(4, in_shape, gr->dtype, gr->device) : NULL;
    gm_note_work(g.N * g.C * g.H * g.W + g.K * g.C * g.PH * g.PW * 4);
    if (out && GM_KERNEL(op, gr->device, roi_align_backward(data(out), data(gc), data(rc), &g, gr->dtype,
                                                            gm_num_threads),
                         cuda_roi_align_backward(data(out), data(gc), data(rc), &g, gr->dtype, ctx)) < 0)
        Py_CLEAR(out);
    Py_XDECREF(gc);
    Py_XDECREF(rc);
    return (PyObject *)out;
}

#define KW METH_VARARGS | METH_KEYWORDS
PyMethodDef gm_roi_methods[] = {
    {"roi_align", (PyCFunction)(void (*)(void))py_roi_align, KW,
     "roi_align(input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned): torchvision's."},
    {"roi_align_backward", (PyCFunction)(void (*)(void))py_roi_align_backward, KW,
     "roi_align_backward(grad, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned, "
     "input_shape) -> grad_input."},
    {NULL, NULL, 0, NULL},
};
