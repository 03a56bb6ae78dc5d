/* csrc/ops_elementwise_args.h — the operands of ops_elementwise.c's ops and their result dtype: a tensor or a
 * Python number each (ew_arg), and PyTorch's type promotion over them. Included by ops_elementwise.c alone (its
 * helpers are static there); a header of its own so that each file stays readable in one sitting. */
#ifndef GM_OPS_ELEMENTWISE_ARGS_H
#define GM_OPS_ELEMENTWISE_ARGS_H

#include "gm.h"

/* ---- operands: a tensor or a Python number ------------------------------------------------------------------ */
enum { EW_NUM_BOOL = 0, EW_NUM_INT = 1, EW_NUM_FLOAT = 2 };

typedef struct {
    GMTensor *t;     /* borrowed; NULL for a number (or an absent optional operand) */
    GMTensor *tmp;   /* owned: t cast to the compute dtype, or copied away from the output's memory */
    int present;     /* 0: an optional operand that was None */
    int kind;        /* numbers: EW_NUM_* */
    int big;         /* an int beyond int64: usable only by float compute */
    int host_dtype;  /* a CPU 0-d tensor read as a number (ew_host_number): its dtype + 1, else 0 */
    gm_scalar s;
    int64_t bst[GM_MAX_DIMS]; /* byte strides of the data the kernel reads, broadcast to the output shape */
} ew_arg;

static int ew_parse_arg(PyObject *o, ew_arg *x, const char *op, const char *argname) {
    memset(x, 0, sizeof *x);
    x->present = 1;
    if (gm_is_tensor(o)) {
        x->t = (GMTensor *)o;
        return 0;
    }
    if (PyBool_Check(o)) {
        x->kind = EW_NUM_BOOL;
        x->s.i = o == Py_True;
        x->s.f = (double)x->s.i;
        return 0;
    }
    if (PyLong_Check(o) || (!PyFloat_Check(o) && PyIndex_Check(o))) { /* PyIndex: numpy integer scalars */
        PyObject *v = PyNumber_Index(o);
        if (!v) return -1;
        int overflow = 0;
        long long i = PyLong_AsLongLongAndOverflow(v, &overflow);
        x->kind = EW_NUM_INT;
        if (overflow) { /* fine for float compute, refused for integer compute (ew_check_scalars) */
            x->big = 1;
            x->s.i = overflow > 0 ? INT64_MAX : INT64_MIN;
            x->s.f = PyLong_AsDouble(v);
        } else {
            x->s.i = i;
            x->s.f = (double)i;
        }
        Py_DECREF(v);
        if (PyErr_Occurred()) return -1; /* PyLong_AsDouble beyond the double range */
        return 0;
    }
    if (PyFloat_Check(o) || (!PyComplex_Check(o) && Py_TYPE(o)->tp_as_number && Py_TYPE(o)->tp_as_number->nb_float)) {
        double f = PyFloat_AsDouble(o); /* also numpy.float32 / float16 scalars */
        if (f == -1.0 && PyErr_Occurred()) return -1;
        x->kind = EW_NUM_FLOAT;
        x->s.f = f;
        x->s.i = gm_f64_to_i64_sat(f);
        return 0;
    }
    PyErr_Format(PyExc_TypeError, "%s: %s must be a Tensor or a Python number (bool, int, float), got %.100s", op,
                 argname, Py_TYPE(o)->tp_name);
    return -1;
}

/* A 0-d CPU tensor among tensors of another device takes part as a number, as in PyTorch (`x_cuda * torch.tensor(2.)`,
 * a learning rate or a loss weight kept on the CPU): its value is read here, the kernel gets it as a scalar, and
 * type promotion still counts it as a 0-d tensor of its dtype (host_dtype). */
static int ew_is_host_0d(const GMTensor *t) { return t->ndim == 0 && t->device.type == GM_DEV_CPU; }

static void ew_host_number(ew_arg *x) {
    const GMTensor *t = x->t;
    const char *p = gm_tensor_data(t);
    x->host_dtype = (int)t->dtype + 1;
    if (t->dtype == GM_I64) {
        memcpy(&x->s.i, p, sizeof x->s.i);
        x->s.f = (double)x->s.i;
    } else {
        x->s.f = gm_load_f64(p, t->dtype);
        x->s.i = gm_f64_to_i64_sat(x->s.f);
    }
    x->kind = t->dtype == GM_BOOL ? EW_NUM_BOOL : gm_dtype_is_float(t->dtype) ? EW_NUM_FLOAT : EW_NUM_INT;
    x->t = NULL;
}

/* Optional operand: None -> absent. */
static int ew_parse_opt(PyObject *o, ew_arg *x, const char *op, const char *argname) {
    if (!o || o == Py_None) {
        memset(x, 0, sizeof *x);
        return 0;
    }
    return ew_parse_arg(o, x, op, argname);
}

static int ew_parse_out(PyObject *o, GMTensor **out, const char *op) {
    *out = NULL;
    if (!o || o == Py_None) return 0;
    if (!gm_is_tensor(o)) {
        PyErr_Format(PyExc_TypeError, "%s: out must be a Tensor or None, got %.100s", op, Py_TYPE(o)->tp_name);
        return -1;
    }
    *out = (GMTensor *)o;
    return 0;
}

static void ew_release(ew_arg *args, int n) {
    for (int i = 0; i < n; i++) Py_CLEAR(args[i].tmp);
}

/* ---- type promotion (PyTorch's c10::promoteTypes and at::native::result_type) ------------------------------- */
#define EW_UNDEF (-1)

/* torch.get_default_dtype(): what a Python float and an integer tensor's true division or float function give
 * (float32 unless set_default_dtype changed it; ops_elementwise.c keeps it). */
extern gm_dtype gm_default_float;

static int ew_int_bits(int dt) {
    switch (dt) {
    case GM_I8: return 8;
    case GM_I16: return 16;
    case GM_I32: return 32;
    default: return 64;
    }
}

static int ew_rank(int dt) {
    switch (dt) {
    case GM_BOOL: return 0;
    case GM_I64: case GM_U8: case GM_I8: case GM_I16: case GM_I32: return 1;
    case GM_F16: case GM_BF16: return 2;
    case GM_F32: return 3;
    default: return 4; /* GM_F64 */
    }
}

static int ew_promote(int a, int b) {
    if (a == EW_UNDEF) return b;
    if (b == EW_UNDEF || a == b) return a;
    if ((a == GM_F16 && b == GM_BF16) || (a == GM_BF16 && b == GM_F16)) return GM_F32; /* neither holds the other */
    /* integers of two widths give the wider (int64 included); uint8 with int8 gives int16, with a wider signed
     * one that one (PyTorch's promoteTypes) */
    if (ew_rank(a) == 1 && ew_rank(b) == 1) {
        if (a == GM_U8 || b == GM_U8) {
            int other = a == GM_U8 ? b : a;
            return other == GM_I8 ? GM_I16 : other;
        }
        return ew_int_bits(a) >= ew_int_bits(b) ? a : b;
    }
    return ew_rank(a) >= ew_rank(b) ? a : b;
}

static int ew_is_float(int dt) { return dt != EW_UNDEF && gm_dtype_is_float((gm_dtype)dt); }

/* A lower-priority group (0-d tensors, then Python numbers) only changes the result when it is of a higher kind
 * (bool < integer < float): float32 tensor + 2.5 stays float32, int64 tensor + 2.5 becomes float32. */
static int ew_combine(int higher, int lower) {
    if (ew_is_float(higher)) return higher;
    if (higher == GM_BOOL || ew_is_float(lower)) return ew_promote(higher, lower);
    return higher != EW_UNDEF ? higher : lower;
}

static gm_dtype ew_result_type(const ew_arg *args, int n) {
    int dim = EW_UNDEF, zero = EW_UNDEF, wrapped = EW_UNDEF;
    for (int i = 0; i < n; i++) {
        const ew_arg *x = &args[i];
        if (!x->present) continue;
        if (x->t && x->t->ndim > 0) dim = ew_promote(dim, x->t->dtype);
        else if (x->t) zero = ew_promote(zero, x->t->dtype);
        else if (x->host_dtype) zero = ew_promote(zero, x->host_dtype - 1);
        else /* a Python number counts as the default dtype of its kind */
            wrapped = ew_promote(wrapped, x->kind == EW_NUM_FLOAT ? gm_default_float
                                          : x->kind == EW_NUM_INT ? GM_I64 : GM_BOOL);
    }
    int r = ew_combine(dim, ew_combine(zero, wrapped));
    return r == EW_UNDEF ? gm_default_float : (gm_dtype)r;
}

/* PyTorch's canCast: no float into integer/bool, no integer into bool. */
static int ew_can_cast(gm_dtype from, gm_dtype to) {
    if (gm_dtype_is_float(from) && !gm_dtype_is_float(to)) return 0;
    if (from != GM_BOOL && to == GM_BOOL) return 0;
    return 1;
}

static int ew_check_out_dtype(const char *op, gm_dtype result, GMTensor *out) {
    if (ew_can_cast(result, out->dtype)) return 0;
    PyErr_Format(PyExc_TypeError, "%s: result type %s can't be cast to the desired output type %s", op,
                 gm_dtype_name(result), gm_dtype_name(out->dtype));
    return -1;
}

/* An int beyond int64 reached integer compute (float compute takes it as a double, like PyTorch). */
static int ew_check_scalars(const char *op, const ew_arg *args, int n, gm_dtype cdt) {
    for (int i = 0; i < n; i++)
        if (args[i].present && !args[i].t && args[i].big && !gm_dtype_is_float(cdt)) {
            PyErr_Format(PyExc_OverflowError, "%s: a Python int does not fit in %s", op, gm_dtype_name(cdt));
            return -1;
        }
    return 0;
}

#endif
