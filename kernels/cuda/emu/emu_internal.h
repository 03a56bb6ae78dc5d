/* kernels/cuda/emu/emu_internal.h — what the emulator's two halves share: the host API (emu_runtime.cpp)
 * keeps devices, memory and errors; the launcher (emu_launch.cpp) runs kernels and reports through these. */
#ifndef GM_EMU_INTERNAL_H
#define GM_EMU_INTERNAL_H

#include <cuda_runtime.h>
#include <stdint.h>

namespace gm_emu {

/* Records e as the calling thread's last error with an explanation (printf-style) for gm_emu_last_message();
 * returns e. */
cudaError_t fail(cudaError_t e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The devices are configured (environment read once) and the calling thread's current device is usable:
 * cudaSuccess and *dev, or the error (initialisation, no device, the device's sticky error), recorded. */
cudaError_t ready(int *dev);

/* How the launcher orders threads and blocks (GPUMEMNET_EMU_SCHEDULE): forward (the default), reverse, or a
 * pseudo-random permutation seeded by `seed` and the launch number, so a failing order can be replayed. */
enum Schedule { SCHEDULE_FORWARD, SCHEDULE_REVERSE, SCHEDULE_RANDOM };
Schedule schedule(unsigned long long *seed);

/* The byte fresh device memory and each block's shared memory are filled with (GPUMEMNET_EMU_POISON). */
unsigned char poison_byte();

/* Pointer arguments of a launch on device dev: cudaSuccess when each non-NULL one points into (or one past the
 * end of) a live cudaMalloc block of dev or into pinned host memory, which a GPU could dereference; else
 * cudaErrorIllegalAddress with the reason in why. Off with GPUMEMNET_EMU_CHECK_POINTERS=0. */
cudaError_t check_kernel_pointers(const void *const *ptrs, const int *arg_index, int n, int dev, char *why,
                                  size_t why_len);

/* After a launch on device dev: cudaSuccess, or cudaErrorIllegalAddress with why when a red zone around one
 * of its cudaMalloc blocks was overwritten (the first one found; its zones are restored). */
cudaError_t check_redzones(int dev, char *why, size_t why_len);

/* Address space reserved by cuMemAddressReserve (emu_vmm.cpp) is memory of device dev for the pointer and copy
 * checks, as one range without red zones: its pages are PROT_NONE until cuMemMap maps them, so touching an
 * unmapped page faults, as on a GPU. */
void add_vm_range(uintptr_t base, size_t size, int dev);
void remove_vm_range(uintptr_t base);
/* Physical memory (cuMemCreate) charged to device dev against its capacity, as cudaMalloc is: false when full. */
bool charge(int dev, size_t size);
void uncharge(int dev, size_t size);
/* The calling thread's current device. */
int current_device();

/* Marks device dev as crashed: every later call touching it returns e, until gm_emu_reset(). */
void set_sticky(int dev, cudaError_t e, const char *msg);

} // namespace gm_emu

#endif
