/* kernels/cuda/emu/include/device_launch_parameters.h — the built-in variables (threadIdx & co.) live in
 * cuda_runtime.h in the CUDA emulator; this name exists because some code includes it explicitly. */
#ifndef GM_EMU_DEVICE_LAUNCH_PARAMETERS_H
#define GM_EMU_DEVICE_LAUNCH_PARAMETERS_H
#include "cuda_runtime.h"
#endif
