/* kernels/cuda/emu/include/cooperative_groups.h — stops the real header from being used in the CUDA emulator build.
 * A CUDA toolkit may be installed where the compiler looks by default (/usr/local/include): without this file
 * its cooperative_groups.h would be mixed with the emulator's runtime types and fail in confusing ways, or worse, compile. */
#ifndef GM_EMU_GUARD_COOPERATIVE_GROUPS_H
#define GM_EMU_GUARD_COOPERATIVE_GROUPS_H
#error "cooperative groups are not allowed in gpumemnet kernels (kernels/cuda/README.md: synchronise with __syncthreads only) and the CUDA emulator does not provide them"
#endif
