/* kernels/cpu/philox.h — the CPU backend's header for the random stream: the stream, gm_philox_blocks and
 * gm_philox_fill (kernels/cpu/philox.c) are declared in kernels/philox.h, which both backends share; this name is
 * kept so that csrc and the kernels include the CPU's view of every family from kernels/cpu/. */
#ifndef GM_KERNELS_CPU_PHILOX_H
#define GM_KERNELS_CPU_PHILOX_H

#include "../philox.h"

#endif
