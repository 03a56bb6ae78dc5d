/* csrc/ops_pool.c — placeholder until this op family lands. */
#include "gm.h"
PyMethodDef gm_pool_methods[] = {{NULL, NULL, 0, NULL}};
