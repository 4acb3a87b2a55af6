// amp_common.cuh: number formats shared by the loss-scaling kernels.
//
// The kernels include no CUDA header on purpose: they compile with NVRTC alone,
// the same way under CuPy on a GPU machine and under tools/compile_kernels.py in
// CI (no GPU, no toolkit). So float16 and bfloat16 are held as raw 16-bit
// patterns and converted explicitly:
//   float16 -> float32 and back: the PTX conversions behind __half2float and
//     __float2half_rn (cvt.f32.f16, cvt.rn.f16.f32): exact widening, IEEE
//     round-to-nearest-even narrowing, overflow to inf, subnormals kept.
//   bfloat16 -> float32: the 16 bits are the high half of the float32 (exact).
//   float32 -> bfloat16: round to nearest even on the bit pattern, the rule of
//     __float2bfloat16_rn (and of cvt.rn.bf16.f32 on sm_80+), written in integer
//     arithmetic so that it also compiles for sm_70.
// CuPy compiles every kernel with -ftz=true (appended after our options, and NVRTC
// honours the last occurrence), which would flush float32 subnormals to zero. So
// every float32 operation whose inputs or result may be subnormal is written as
// explicit PTX without .ftz (add_f32, sub_f32, mul_f32, div_f32, sqrt_f32,
// f32_to_f64, f64_to_f32), and so is float64's square root (sqrt_f64, to need no
// math header); tests check the PTX. Each is one IEEE operation rounded to nearest
// even, which is what NumPy does on the CPU: the twins match bit for bit.
// Those few PTX primitives are the only code behind the MIXPREC_HOST_EMULATION
// switch: tools/host_kernels.py compiles these same sources with g++ and supplies
// host equivalents (host_emulation.cuh) to check the kernels on a CPU.
// A NaN result is stored as the format's default quiet NaN (the bits of NumPy's
// np.nan in that format). GPU arithmetic does not keep NaN payloads the way a CPU
// does, so fixing one pattern is what lets the NumPy reference match bit for bit.
#pragma once

struct half_bits { unsigned short bits; };      // IEEE binary16
struct bfloat16_bits { unsigned short bits; };  // bfloat16: top half of a float32

// Arithmetic type: float32 for every format except float64.
template <typename T> struct opmath { typedef float type; };
template <> struct opmath<double> { typedef double type; };

#ifndef MIXPREC_HOST_EMULATION  // the device path: PTX without .ftz, as the comment above explains
__device__ __forceinline__ float half_to_float(unsigned short bits) {  // exact
    float r;
    asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(bits));
    return r;
}
__device__ __forceinline__ unsigned short float_to_half_rn(float x) {  // round to nearest even
    unsigned short r;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(x));
    return r;
}
// IEEE float32 operations that ignore -ftz (subnormals in and out are kept).
__device__ __forceinline__ float add_f32(float a, float b) {
    float r;
    asm("add.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}
__device__ __forceinline__ float sub_f32(float a, float b) {
    float r;
    asm("sub.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}
__device__ __forceinline__ float mul_f32(float a, float b) {
    float r;
    asm("mul.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}
__device__ __forceinline__ float div_f32(float a, float b) {
    float r;
    asm("div.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}
__device__ __forceinline__ float sqrt_f32(float x) {
    float r;
    asm("sqrt.rn.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}
__device__ __forceinline__ double sqrt_f64(double x) {
    double r;
    asm("sqrt.rn.f64 %0, %1;" : "=d"(r) : "d"(x));
    return r;
}
__device__ __forceinline__ double f32_to_f64(float x) {
    double r;
    asm("cvt.f64.f32 %0, %1;" : "=d"(r) : "f"(x));
    return r;
}
__device__ __forceinline__ float f64_to_f32(double x) {  // round to nearest even
    float r;
    asm("cvt.rn.f32.f64 %0, %1;" : "=f"(r) : "d"(x));
    return r;
}
#endif

__device__ __forceinline__ float widen(float x) { return x; }
__device__ __forceinline__ double widen(double x) { return x; }
__device__ __forceinline__ float widen(half_bits x) { return half_to_float(x.bits); }
__device__ __forceinline__ float widen(bfloat16_bits x) {
    return __uint_as_float(((unsigned int)x.bits) << 16);
}

// The arithmetic of the opmath types, one IEEE operation each (float64 never flushes: plain C++ is enough).
__device__ __forceinline__ float add(float a, float b) { return add_f32(a, b); }
__device__ __forceinline__ double add(double a, double b) { return a + b; }
__device__ __forceinline__ float sub(float a, float b) { return sub_f32(a, b); }
__device__ __forceinline__ double sub(double a, double b) { return a - b; }
__device__ __forceinline__ float mul(float a, float b) { return mul_f32(a, b); }
__device__ __forceinline__ double mul(double a, double b) { return a * b; }
__device__ __forceinline__ float div(float a, float b) { return div_f32(a, b); }
__device__ __forceinline__ double div(double a, double b) { return a / b; }
__device__ __forceinline__ float square_root(float x) { return sqrt_f32(x); }
__device__ __forceinline__ double square_root(double x) { return sqrt_f64(x); }
__device__ __forceinline__ float negate(float x) { return __uint_as_float(__float_as_uint(x) ^ 0x80000000u); }
__device__ __forceinline__ double negate(double x) {
    return __longlong_as_double(__double_as_longlong(x) ^ (long long)0x8000000000000000ull);
}
// An opmath value in float64 (exact; float32 comparisons would flush subnormals under -ftz).
__device__ __forceinline__ double as_double(float x) { return f32_to_f64(x); }
__device__ __forceinline__ double as_double(double x) { return x; }
// NumPy's maximum: a when a >= b or a is NaN, else b (so a NaN in either wins).
__device__ __forceinline__ float maximum(float a, float b) { return (a != a || as_double(a) >= as_double(b)) ? a : b; }
__device__ __forceinline__ double maximum(double a, double b) { return (a != a || a >= b) ? a : b; }
// A host-side float64 number in the opmath type (float32: rounded to nearest even once).
__device__ __forceinline__ void from_double(double x, float& out) { out = f64_to_f32(x); }
__device__ __forceinline__ void from_double(double x, double& out) { out = x; }
__device__ __forceinline__ void load_scalar(const float* p, float& out) { out = *p; }
__device__ __forceinline__ void load_scalar(const float* p, double& out) { out = f32_to_f64(*p); }

__device__ __forceinline__ bool is_finite(float x) {
    return (__float_as_uint(x) & 0x7f800000u) != 0x7f800000u;
}
__device__ __forceinline__ bool is_finite(double x) {
    return ((unsigned long long)__double_as_longlong(x) & 0x7ff0000000000000ull) != 0x7ff0000000000000ull;
}

// narrow(y, out): store the opmath value y in out's format (round to nearest even).
__device__ __forceinline__ void narrow(float y, float& out) {
    out = (y != y) ? __uint_as_float(0x7fc00000u) : y;
}
__device__ __forceinline__ void narrow(double y, double& out) {
    out = (y != y) ? __longlong_as_double(0x7ff8000000000000ll) : y;
}
__device__ __forceinline__ void narrow(float y, half_bits& out) {
    const unsigned short r = float_to_half_rn(y);
    out.bits = (y != y) ? (unsigned short)0x7e00u : r;
}
__device__ __forceinline__ void narrow(float y, bfloat16_bits& out) {
    unsigned int u = __float_as_uint(y);
    // Adding 0x7fff plus the lowest kept bit carries into the kept half exactly
    // when the dropped half is above one half ulp, or equal to it with an odd kept
    // half: round to nearest, ties to even. Overflow lands on inf as it should.
    unsigned int rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    out.bits = (y != y) ? (unsigned short)0x7fc0u : (unsigned short)rounded;
}

// `N` elements loaded or stored as one aligned vector (128 bits for the source format).
template <typename T, int N>
struct alignas(sizeof(T) * N) pack { T v[N]; };

__device__ __forceinline__ bool aligned_to(const void* p, unsigned long long bytes) {
    return ((unsigned long long)p % bytes) == 0;
}
