/* csrc/module.c — gpumemnet._C: creates the module, the Tensor base type and OutOfMemoryError, and gathers
 * the method table of every op family. */
#include "gm.h"

int gm_numpy_init(void); /* numpy.c */

static struct PyModuleDef gm_module = {
    PyModuleDef_HEAD_INIT, "gpumemnet._C", "The C core of gpumemnet: tensors, the allocator, ops.", -1, NULL,
};

PyMODINIT_FUNC PyInit__C(void) {
    if (gm_numpy_init() < 0) return NULL;
    if (gm_allocator_init() < 0) return NULL;
    PyObject *m = PyModule_Create(&gm_module);
    if (!m) return NULL;
    PyMethodDef *tables[] = {gm_tensor_module_methods, gm_allocator_methods, gm_elementwise_methods,
                             gm_reduce_methods, gm_matmul_methods, gm_index_methods, gm_random_methods,
                             gm_cuda_methods, gm_conv_methods, gm_pool_methods, gm_nnops_methods,
                             gm_optim_methods, gm_amp_methods, gm_transfer_methods};
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
        if (PyModule_AddFunctions(m, tables[i]) < 0) goto fail;
    if (gm_tensor_type_init(m) < 0) goto fail;
    GM_OutOfMemoryError = PyErr_NewExceptionWithDoc(
        "gpumemnet.OutOfMemoryError",
        "A device ran out of memory (or hit the limit set with gpumemnet.memory.set_limit). The message and the "
        "attributes say what was asked, for what, and what holds the memory.",
        PyExc_RuntimeError, NULL);
    if (!GM_OutOfMemoryError) goto fail;
    Py_INCREF(GM_OutOfMemoryError);
    if (PyModule_AddObject(m, "OutOfMemoryError", GM_OutOfMemoryError) < 0) goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
