/* csrc/ops_optim.c — placeholder until this op family lands. */
#include "gm.h"
PyMethodDef gm_optim_methods[] = {{NULL, NULL, 0, NULL}};
