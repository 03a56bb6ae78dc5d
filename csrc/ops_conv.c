/* csrc/ops_conv.c — placeholder until this op family lands. */
#include "gm.h"
PyMethodDef gm_conv_methods[] = {{NULL, NULL, 0, NULL}};
