/* kernels/cuda/emu/include/cuda_runtime_api.h — the host API of the CUDA emulator (GPUMEMNET_CUDA=emu).
 *
 * Same names, types and error codes as the real CUDA runtime, C linkage, valid C11 and C++17. Everything runs
 * synchronously on the calling thread: streams and events are tokens, "device" memory is host memory that
 * kernels (fibers on the CPU, see cuda_runtime.h) and memcpy touch directly. Implemented in
 * kernels/cuda/emu/emu_runtime.cpp; what the emulator checks and what it cannot is described there.
 *
 * Environment (read once, at the first call):
 *   GPUMEMNET_EMU_DEVICES  number of devices (default 1; 0 = no device, like a machine without a GPU)
 *   GPUMEMNET_EMU_MEMORY   bytes per device (default 8 GiB; a K/M/G suffix, powers of 1024, is accepted)
 *   GPUMEMNET_EMU_POISON   the byte fresh cudaMalloc memory is filled with (default 0xCD)
 *   GPUMEMNET_EMU_SCHEDULE forward (default), reverse or random:SEED: the order blocks and threads run in
 *   GPUMEMNET_EMU_CHECK_POINTERS  1 (default): a launch with a pointer argument a GPU could not dereference fails
 * A malformed value makes every call fail with cudaErrorInitializationError, saying which. */
#ifndef GM_EMU_CUDA_RUNTIME_API_H
#define GM_EMU_CUDA_RUNTIME_API_H

#include <stddef.h>

#include "driver_types.h"
#include "vector_types.h"

/* The runtime version the emulator reports (CUDA 12.8: 1000 * major + 10 * minor). */
#define CUDART_VERSION 12080

#ifdef __cplusplus
extern "C" {
#endif

/* ---- devices ---- */
cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device);
cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaDeviceReset(void);
cudaError_t cudaDriverGetVersion(int *version);
cudaError_t cudaRuntimeGetVersion(int *version);

/* ---- memory ---- */
cudaError_t cudaMalloc(void **ptr, size_t size);
cudaError_t cudaFree(void *ptr);
cudaError_t cudaMallocHost(void **ptr, size_t size);
cudaError_t cudaHostAlloc(void **ptr, size_t size, unsigned int flags);
cudaError_t cudaFreeHost(void *ptr);
/* Memory from cudaHostAlloc(..., cudaHostAllocMapped) is addressable by kernels and copies as device memory; with
 * unified addressing (every 64-bit GPU) its device pointer is its host pointer, as here. */
cudaError_t cudaHostGetDevicePointer(void **pDevice, void *pHost, unsigned int flags);
/* The driver function `symbol` (only cuMem* of cuda.h), as the real runtime's entry-point query. */
cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr, unsigned int cudaVersion,
                                             unsigned long long flags,
                                             enum cudaDriverEntryPointQueryResult *driverStatus);
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t stream GM_EMU_DV(0));
cudaError_t cudaMemset(void *ptr, int value, size_t count);
cudaError_t cudaMemsetAsync(void *ptr, int value, size_t count, cudaStream_t stream GM_EMU_DV(0));

/* ---- streams and events ---- */
cudaError_t cudaStreamCreate(cudaStream_t *stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags GM_EMU_DV(0));
cudaError_t cudaEventCreate(cudaEvent_t *event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream GM_EMU_DV(0));
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);
cudaError_t cudaEventDestroy(cudaEvent_t event);

/* ---- errors ---- */
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
const char *cudaGetErrorName(cudaError_t error);
const char *cudaGetErrorString(cudaError_t error);

/* ---- emulator only (tests) ---- */
/* Clears a sticky launch failure on every device (like recreating a crashed context, but allocations stay
 * valid) and the calling thread's last error. */
void gm_emu_reset(void);
/* What the emulator last had to say on this thread: why a call failed (which pointer, how many bytes over
 * capacity) or why a kernel launch failed (divergent __syncthreads, ...); "" if nothing. */
const char *gm_emu_last_message(void);
/* Sets device `device`'s capacity to `bytes` (cudaMemGetInfo and cudaMalloc follow; bytes already allocated
 * stay). cudaErrorInvalidDevice for a bad index. */
cudaError_t gm_emu_set_device_memory(int device, size_t bytes);
/* On: events recorded from now on stay pending (cudaEventQuery: cudaErrorNotReady) until cudaEventSynchronize,
 * cudaStreamSynchronize or cudaDeviceSynchronize on their device, or until turned off: as work a GPU would still
 * have queued (the emulator runs everything at once), so tests can see what waits for it. */
void gm_emu_hold_streams(int on);
/* The stream log, for tests of what overlaps what (the emulator runs everything at once, so only the issue order
 * and the streams can be checked): while on, each kernel launch, async copy, event record and stream wait adds
 * a line "kernel S", "copy S D2H|H2D|D2D|H2H N", "record S E", "wait S E" (S, E: the handles as %p; a launch's S
 * is its ctx's stream). With buf NULL: the bytes logged so far. Otherwise copies up to cap - 1 of them and a NUL
 * into buf, clears the log, sets it on or off, and returns the bytes copied. */
size_t gm_emu_stream_log(int on, char *buf, size_t cap);
/* GM_LAUNCH's note of the stream a kernel was launched on (the log above). */
void gm_emu_log_launch(const void *stream);
/* For the header's templates: cudaSuccess when the runtime is usable and `stream` is a live stream (else the
 * error, recorded with fn's name). */
cudaError_t gm_emu_stream_ready(const char *fn, cudaStream_t stream);
/* For cudaGetSymbolAddress: [symbol, symbol + size) becomes device memory (of every device) for copies and for
 * the kernel pointer checks. */
cudaError_t gm_emu_register_symbol(const void *symbol, size_t size);
/* Number of kernel launches run so far (all devices): lets tests check that an op launched at all. */
unsigned long long gm_emu_launch_count(void);

#ifdef __cplusplus
}
#endif

#endif
