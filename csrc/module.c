/* csrc/module.c — gpumemnet._C: creates the module, the Tensor base type and OutOfMemoryError, gathers the
 * method table of every family, and registers the hooks through which a lower file calls a higher one. The top of
 * the C core: nothing calls into it. */
#include "gm.h"

int gm_numpy_init(void); /* numpy.c */

static struct PyModuleDef gm_module = {
    PyModuleDef_HEAD_INIT, "gpumemnet._C", "The C core of gpumemnet: tensors, the allocator, ops.", -1, NULL,
};

PyMODINIT_FUNC PyInit__C(void) {
    if (gm_numpy_init() < 0) return NULL;
    if (gm_allocator_init() < 0) return NULL;
    gm_threads_init();
    gm_transfer_init(gm_copy_into);
    PyObject *m = PyModule_Create(&gm_module);
    if (!m) return NULL;
    /* First: every other init and every raise in csrc uses the exception classes (gm.h). */
    if (gm_errors_init(m) < 0) goto fail;
    PyMethodDef *tables[] = {gm_tensor_module_methods, gm_allocator_methods, gm_alloc_policy_methods,
                             gm_category_methods, gm_threads_methods, gm_elementwise_methods,
                             gm_reduce_methods, gm_matmul_methods, gm_index_methods, gm_random_methods,
                             gm_cuda_methods, gm_cuda_event_methods, gm_conv_methods, gm_pool_methods,
                             gm_nnops_methods, gm_optim_methods, gm_amp_methods, gm_transfer_methods, gm_pad_methods,
                             gm_roi_methods, gm_dist_mpi_methods, gm_dist_nccl_methods, gm_autograd_node_methods,
                             gm_autograd_engine_methods};
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
        if (PyModule_AddFunctions(m, tables[i]) < 0) goto fail;
    if (gm_autograd_node_init(m) < 0) goto fail; /* before TensorBase: it fills the operator slots */
    if (gm_tensor_type_init(m) < 0) goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
