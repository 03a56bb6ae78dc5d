/* csrc/ops_util.h — small helpers private to the op files (csrc/ops_*.c) that more than one op family uses.
 * ophelpers.c / gm.h hold what the whole C core shares; this header only what the op files repeat. */
#ifndef GM_OPS_UTIL_H
#define GM_OPS_UTIL_H

#include "gm.h"

/* Py_XDECREF of each listed tensor, left to right (the order the allocator sees them freed in). */
static inline void release_each(GMTensor *const *ts, size_t n) {
    for (size_t i = 0; i < n; i++) Py_XDECREF(ts[i]);
}
#define RELEASE(...)                                                                                           \
    release_each((GMTensor *const[]){__VA_ARGS__}, sizeof((GMTensor *const[]){__VA_ARGS__}) / sizeof(GMTensor *))

/* A tensor's data pointer, NULL for none. */
static inline void *data_or_null(GMTensor *t) { return t ? (void *)gm_tensor_data(t) : NULL; }

/* The declaration of an op file's entry point gm_py_<name> taking (args, kwargs) (METH_VARARGS | METH_KEYWORDS), for
 * the family header that its method table's file includes. */
#define GM_PY_KW_DECL(name) PyObject *gm_py_##name(PyObject *self, PyObject *args, PyObject *kwargs)

#endif
