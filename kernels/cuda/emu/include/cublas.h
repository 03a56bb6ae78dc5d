/* kernels/cuda/emu/include/cublas.h — stops the real header from being used in the CUDA emulator build.
 * A CUDA toolkit may be installed where the compiler looks by default (/usr/local/include): without this file
 * its cublas.h would be mixed with the emulator's runtime types and fail in confusing ways, or worse, compile. */
#ifndef GM_EMU_GUARD_CUBLAS_H
#define GM_EMU_GUARD_CUBLAS_H
#error "cuBLAS/cuDNN are not emulated: in a GPUMEMNET_CUDA=emu build a .cu file that includes cublas.h is replaced by kernels/cuda/emu/<name>_emu.cpp (setup.py), and C code guards its use with #ifndef GM_CUDA_EMU"
#endif
