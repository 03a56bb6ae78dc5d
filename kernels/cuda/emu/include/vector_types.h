/* kernels/cuda/emu/include/vector_types.h — uint3 and dim3 for the CUDA emulator.
 * In C++ dim3 has the real runtime's constructors (every dimension defaults to 1, and a dim3 converts from an
 * unsigned, so `dim3(grid)` works for both); in C both are plain structs. */
#ifndef GM_EMU_VECTOR_TYPES_H
#define GM_EMU_VECTOR_TYPES_H

struct uint3 {
    unsigned int x, y, z;
};
typedef struct uint3 uint3;

#ifdef __cplusplus
struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return uint3{x, y, z}; }
};
#else
struct dim3 {
    unsigned int x, y, z;
};
typedef struct dim3 dim3;
#endif

#endif
