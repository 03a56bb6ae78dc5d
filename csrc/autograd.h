/* csrc/autograd.h — the autograd node shared by autograd_node.c (the type, recording) and autograd_engine.c (the
 * backward walk). */
#ifndef GM_AUTOGRAD_H
#define GM_AUTOGRAD_H
#include "gm.h"

enum { META_NONE = 0, META_TENSOR = 1, META_NUMBER = 2 };

typedef struct {
    int kind;
    int ndim;
    gm_dtype dtype;
    int host_0d; /* a 0-d CPU tensor (which may join tensors of another device: its gradient comes back to the CPU) */
    int64_t shape[GM_MAX_DIMS];
    PyObject *number; /* META_NUMBER: the Python number */
} node_meta;

#define NODE_MAX_META 4
#define GM_SEQ_ACCUMULATE UINT64_MAX

typedef struct {
    PyObject_HEAD
    PyObject *next_functions; /* list: (node, output_nr) feeding input i, or None */
    PyObject *saved;          /* tuple of _SavedTensor / None, or None */
    PyObject *pre_hooks;      /* dict output_nr -> [hook], or None */
    PyObject *needs_input_grad;
    PyObject *variable; /* AccumulateGrad: the leaf it accumulates into (None for other nodes) */
    PyObject *weakreflist;
    const char *scope; /* interned (gm_intern): the scope the forward ran in */
    uint64_t seq;      /* creation order, PyTorch's sequence_nr: the walk runs the latest ready node first;
                        * GM_SEQ_ACCUMULATE for AccumulateGrad (leaf gradients are written as soon as complete) */
    int released;
    int n_meta;
    node_meta meta[NODE_MAX_META];
} GMNode;

extern PyTypeObject *GMNode_Type;  /* _C.Node (autograd_node.c) */
extern PyObject *gm_grad_mode;      /* grad mode's ContextVar, registered by _autograd_setup */
extern PyObject *gm_accumulate_cls; /* autograd.AccumulateGrad, registered by _autograd_setup */
uint64_t gm_next_sequence_nr(void); /* autograd_node.c: the next node's sequence number */

#endif
