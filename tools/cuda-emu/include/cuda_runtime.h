/* cuda-emu: device-side stand-ins for kernels compiled as C++ (run.sh turns
 * every launch into emu_launch). */
#ifndef EMU_CUDA_RUNTIME_H
#define EMU_CUDA_RUNTIME_H
#include "cuda_runtime_api.h"
#ifdef __cplusplus
#include <cmath>
#include <cstring>
#include <functional>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)
#define RC_CUDA_EMU 1

struct uint3 { unsigned x, y, z; };
struct dim3 {
	unsigned x, y, z;
	dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;

void emu_launch(dim3 g, dim3 b, size_t shmem, cudaStream_t s, const std::function<void()> &f);

float emu_tex2dlayered(cudaTextureObject_t t, float x, float y, int layer);
float emu_tex3d(cudaTextureObject_t t, float x, float y, float z);
template <class T> T tex2DLayered(cudaTextureObject_t t, float x, float y, int layer)
{
	return emu_tex2dlayered(t, x, y, layer);
}
template <class T> T tex3D(cudaTextureObject_t t, float x, float y, float z)
{
	return emu_tex3d(t, x, y, z);
}
static inline float atomicAdd(float *p, float v) { float o = *p; *p = o + v; return o; }
static inline double atomicAdd(double *p, double v) { double o = *p; *p = o + v; return o; }
static inline unsigned atomicMax(unsigned *p, unsigned v) { unsigned o = *p; *p = o > v ? o : v; return o; }
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, sizeof u); return u; }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, sizeof f); return f; }
/* round-to-nearest float operations that nvcc never contracts into an FMA;
 * run.sh compiles without -mfma, so g++ emits plain mul and add here too */
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
template <class T> static inline T __ldg(const T *p) { return *p; }
using std::floor;
#endif
#endif
