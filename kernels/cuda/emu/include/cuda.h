/* kernels/cuda/emu/include/cuda.h — stops the real header from being used in the CUDA emulator build.
 * A CUDA toolkit may be installed where the compiler looks by default (/usr/local/include): without this file
 * its cuda.h would be mixed with the emulator's runtime types and fail in confusing ways, or worse, compile. */
#ifndef GM_EMU_GUARD_CUDA_H
#define GM_EMU_GUARD_CUDA_H
#error "the CUDA driver API is not emulated: use the runtime API (cuda_runtime.h)"
#endif
