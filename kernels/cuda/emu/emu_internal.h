/* kernels/cuda/emu/emu_internal.h — what the emulator's two halves share: the host API (emu_runtime.cpp)
 * keeps devices, memory and errors; the launcher (emu_launch.cpp) runs kernels and reports through these. */
#ifndef GM_EMU_INTERNAL_H
#define GM_EMU_INTERNAL_H

#include <cuda_runtime.h>

namespace gm_emu {

/* Records e as the calling thread's last error with an explanation (printf-style) for gm_emu_last_message();
 * returns e. */
cudaError_t fail(cudaError_t e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The devices are configured (environment read once) and the calling thread's current device is usable:
 * cudaSuccess and *dev, or the error (initialisation, no device, the device's sticky error), recorded. */
cudaError_t ready(int *dev);

/* Marks device dev as crashed: every later call touching it returns e, until gm_emu_reset(). */
void set_sticky(int dev, cudaError_t e, const char *msg);

} // namespace gm_emu

#endif
