/* csrc/category.c — what every allocation is tagged with: the memory category and the scope of the calling
 * thread (DESIGN.md "State is per thread"), set from Python (gm.memory scopes, modules, autograd) and read by the
 * allocator at every allocation; and gm_intern, which keeps the strings blocks point at alive. Below the
 * allocator: it uses nothing else in csrc/. */
#include "gm.h"

/* In gm_category's order; each is defined beside the enum in gm.h. */
const char *const gm_category_names[GM_NCAT] = {"parameter", "gradient",  "optimizer", "activation",
                                                "activation_grad", "workspace", "input",
                                                "communication", "other"};

static _Thread_local int cur_category = GM_CAT_OTHER;
static _Thread_local const char *cur_scope = "";
/* dict str -> str: interned strings (scopes, tensor names) kept alive for blocks to point at. Touched with the
 * GIL only. */
static PyObject *interned;

int gm_current_category(void) { return cur_category; }

const char *gm_current_scope(void) { return cur_scope; }

const char *gm_set_scope(const char *interned_scope) {
    const char *prev = cur_scope;
    cur_scope = interned_scope;
    return prev;
}

int gm_swap_category(int category) {
    int prev = cur_category;
    cur_category = category;
    return prev;
}

const char *gm_intern(PyObject *str) {
    if (!interned && !(interned = PyDict_New())) return NULL;
    PyObject *kept = PyDict_SetDefault(interned, str, str); /* kept alive as long as the process */
    return kept ? PyUnicode_AsUTF8(kept) : NULL;
}

static PyObject *py_set_category(PyObject *self, PyObject *arg) {
    const char *name = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
    if (!name) {
        PyErr_Format(PyExc_TypeError, "category must be a str, got %R", arg);
        return NULL;
    }
    for (int i = 0; i < GM_NCAT; i++) {
        if (strcmp(name, gm_category_names[i]) == 0) {
            int prev = cur_category;
            cur_category = i;
            return PyUnicode_FromString(gm_category_names[prev]);
        }
    }
    PyErr_Format(PyExc_ValueError, "unknown memory category %R; expected one of parameter, gradient, optimizer, "
                 "activation, activation_grad, workspace, input, communication, other", arg);
    return NULL;
}

static PyObject *py_get_category(PyObject *self, PyObject *unused) {
    return PyUnicode_FromString(gm_category_names[cur_category]);
}

static PyObject *py_set_scope(PyObject *self, PyObject *arg) {
    if (!PyUnicode_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "scope must be a str, got %R", arg);
        return NULL;
    }
    /* Interned: blocks keep a pointer to the scope's UTF-8, so the string must outlive them. */
    const char *s = gm_intern(arg);
    if (!s) return NULL;
    PyObject *prev = PyUnicode_FromString(cur_scope);
    cur_scope = s;
    return prev;
}

static PyObject *py_get_scope(PyObject *self, PyObject *unused) { return PyUnicode_FromString(cur_scope); }

PyMethodDef gm_category_methods[] = {
    {"set_category", py_set_category, METH_O, "Set this thread's allocation category; returns the previous."},
    {"get_category", py_get_category, METH_NOARGS, "This thread's allocation category."},
    {"set_scope", py_set_scope, METH_O, "Set this thread's allocation scope; returns the previous."},
    {"get_scope", py_get_scope, METH_NOARGS, "This thread's allocation scope."},
    {NULL, NULL, 0, NULL},
};
