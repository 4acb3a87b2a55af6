// host_emulation.cuh: run mixprec's CUDA kernels on the CPU, to test their code without a GPU.
//
// tools/host_kernels.py compiles the very sources CuPy compiles (kernels/*.cu, as
// load_source splices them) with g++ -DMIXPREC_HOST_EMULATION -include this file.
// NVRTC never sees it. It supplies:
//   * the CUDA keywords, built-in variables and atomics the kernels use, and a launcher that
//     runs the grid's blocks and each block's threads one after another (the kernels
//     share no memory between threads and never synchronise, so any order is one a
//     GPU could take);
//   * host equivalents of the CUDA intrinsics and of the few PTX primitives that
//     amp_common.cuh keeps behind #ifndef MIXPREC_HOST_EMULATION, each the same IEEE
//     operation (compiled without fast-math, fused multiply-add or flush-to-zero).
// What this cannot show is listed in docs/grad-scaler.md ("What the host build proves").
#pragma once
#include <cmath>
#include <cstddef>
#include <cstring>
#include <utility>

#define __global__
#define __device__
#define __forceinline__ inline

struct host_dim3 { unsigned int x, y, z; };
static host_dim3 gridDim, blockDim, blockIdx, threadIdx;

inline unsigned int __float_as_uint(float x) { unsigned int u; std::memcpy(&u, &x, sizeof u); return u; }
inline float __uint_as_float(unsigned int u) { float x; std::memcpy(&x, &u, sizeof x); return x; }
inline long long __double_as_longlong(double x) { long long u; std::memcpy(&u, &x, sizeof u); return u; }
inline double __longlong_as_double(long long u) { double x; std::memcpy(&x, &u, sizeof x); return x; }
// Threads run one after another, so an atomic read-modify-write is a plain one.
inline unsigned int atomicMax(unsigned int* p, unsigned int v) { const unsigned int old = *p; *p = v > old ? v : old; return old; }

// The PTX primitives (cvt.f32.f16, cvt.rn.f16.f32, add/sub/mul/div/sqrt.rn.f32, sqrt.rn.f64, cvt.f64.f32,
// cvt.rn.f32.f64).
// _Float16 conversions are IEEE: exact widening, round-to-nearest-even narrowing.
inline float half_to_float(unsigned short bits) { _Float16 h; std::memcpy(&h, &bits, sizeof h); return (float)h; }
inline unsigned short float_to_half_rn(float x) {
    const _Float16 h = (_Float16)x;
    unsigned short bits;
    std::memcpy(&bits, &h, sizeof bits);
    return bits;
}
inline float add_f32(float a, float b) { return a + b; }
inline float sub_f32(float a, float b) { return a - b; }
inline float mul_f32(float a, float b) { return a * b; }
inline float div_f32(float a, float b) { return a / b; }
inline float sqrt_f32(float x) { return std::sqrt(x); }
inline double sqrt_f64(double x) { return std::sqrt(x); }
inline double f32_to_f64(float x) { return (double)x; }
inline float f64_to_f32(double x) { return (float)x; }

// kernel<<<grid, block>>>(args...): args[i] points to the i-th argument's value, as cuLaunchKernel's
// kernelParams (a pointer argument's value is the pointer; a struct's is its bytes).
template <typename... P, std::size_t... I>
void host_call(void (*kernel)(P...), void** args, std::index_sequence<I...>) {
    kernel(*static_cast<P*>(args[I])...);
}

template <typename... P>
void host_launch(unsigned int grid, unsigned int block, void (*kernel)(P...), void** args) {
    gridDim = host_dim3{grid, 1, 1};
    blockDim = host_dim3{block, 1, 1};
    for (unsigned int b = 0; b < grid; ++b) {
        for (unsigned int t = 0; t < block; ++t) {
            blockIdx = host_dim3{b, 0, 0};
            threadIdx = host_dim3{t, 0, 0};
            host_call(kernel, args, std::index_sequence_for<P...>{});
        }
    }
}
