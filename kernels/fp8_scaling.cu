// fp8_scaling.cu: FP8 quantization and its scales (mixprec.amp.fp8), entirely on the device.
//
// Five kernels; every one takes device arrays and, last, `args`: a small int64 table
// built on the host and kept on the device (mixprec.amp._kernels.DeviceTables), so a
// launch copies nothing and a step never waits for the host. An "amax" array is
// float32 in Python and read here as the bits of non-negative floats: for those,
// unsigned order is numeric order, and the default NaN (0x7fc00000) sorts above inf,
// so atomicMax on the bits is a maximum in which a NaN wins, as NumPy's max does.
//
//   fp8_amax<T>            amax[s] = max |x| over segment s (x viewed as segments of
//                          args[1] elements: the whole tensor, a row, or a block of 32);
//                          amax must hold zeros (or earlier amaxes to fold in).
//   fp8_current_scale      per segment: scale = scaled_max / amax, scale_inv = 1 / scale
//                          (Transformer Engine's current scaling: amax 0, inf or NaN ->
//                          scale 1; a scale past float32 -> the largest float32;
//                          optionally rounded down to a power of two).
//   fp8_mx_scale           per block of 32: the OCP Microscaling v1.0 scale,
//                          shared_exp = floor(log2(amax)) - emax_elem clamped to
//                          E8M0's [-127, 127] (a zero block counts as amax = 2^-126,
//                          the smallest normal float32, so it gets 2^-127); E8M0 bits
//                          shared_exp + 127, or 0xff (NaN) for an inf or NaN amax;
//                          and the multiplier 2^-shared_exp (NaN for a NaN scale).
//   fp8_cast<T, F>         out[i] = F(saturate(x[i] * scale[i / args[1]])), rounded to
//                          nearest even; +-inf saturate to +-max and NaN stays NaN, as
//                          CUDA's __NV_SATFINITE conversion that Transformer Engine casts
//                          with (stored as 0x7f with x[i]'s sign bit, the bits torch gives
//                          a NaN in both formats; the product's NaN has no reliable sign on
//                          a GPU, which returns the canonical NaN). If args[2],
//                          also folds max |x| into amax[0] (cast-with-amax).
//   fp8_delayed_update     one thread per tensor, all tensors in one launch (delayed
//                          scaling): a new amax that is finite and > 0 is appended to
//                          the tensor's history row (the oldest entry drops out), then
//                          amax = max(row) ("max") or the new amax ("most_recent") and
//                          scale = scaled_max / amax (inf -> largest float32), scale_inv
//                          = 1 / scale (if wanted). An amax of 0 (tensor unused) or inf/NaN
//                          (overflow) leaves row and scale as they were. Optionally
//                          zeroes the amaxes for the next step.
//
// The float32 -> FP8 conversion is integer arithmetic on the bits (no FP8 instruction
// before sm_89, and none that NVRTC takes for sm_70), and the arithmetic is the
// non-flushing PTX of amp_common.cuh: the NumPy twins (mixprec.amp.fp8.scaling) give
// the same bits.
#include "amp_common.cuh"

#define FP8_SPAN 32            // elements one thread reduces before its one atomic
#define FP8_NAN_BITS 0x7fc00000u
#define FP8_FLT_MAX_BITS 0x7f7fffffu

// |v| as bits, a NaN as the default NaN.
__device__ __forceinline__ unsigned int abs_bits(float v) {
    const unsigned int a = __float_as_uint(v) & 0x7fffffffu;
    return a > 0x7f800000u ? FP8_NAN_BITS : a;
}

// The two FP8 formats: mantissa bits, exponent bias, bits of the largest finite value,
// of the NaN with the sign bit clear (torch's), and the largest value as float32 bits.
struct fp8_e4m3fn {  // largest 448
    enum { MBITS = 3, BIAS = 7, MAX = 0x7e, NAN_ = 0x7f };
    static const unsigned int MAX_F32 = 0x43e00000u;
};
struct fp8_e5m2 {  // largest 57344
    enum { MBITS = 2, BIAS = 15, MAX = 0x7b, NAN_ = 0x7f };
    static const unsigned int MAX_F32 = 0x47600000u;
};

// Round to nearest even: (v + half - 1 + lowest kept bit) >> shift, for shift in [1, 31].
__device__ __forceinline__ unsigned int round_shift(unsigned int v, int shift) {
    return (v + ((1u << (shift - 1)) - 1u) + ((v >> shift) & 1u)) >> shift;
}

// y's FP8 bits; a NaN y gives the format's NaN with the sign bit nan_sign (0x80 or 0).
template <typename F>
__device__ __forceinline__ unsigned char to_fp8(float y, unsigned int nan_sign) {
    const unsigned int u = __float_as_uint(y);
    const unsigned int sign = (u >> 24) & 0x80u;
    const unsigned int a = u & 0x7fffffffu;
    if (a > 0x7f800000u) {
        return (unsigned char)(nan_sign | F::NAN_);
    }
    if (a >= F::MAX_F32) {  // saturate (+-inf included)
        return (unsigned char)(sign | F::MAX);
    }
    const int emin = 1 - F::BIAS;  // exponent of the smallest normal FP8 value
    const int biased = (int)(a >> 23);
    if (biased - 127 >= emin) {  // an FP8 normal: drop 23 - MBITS mantissa bits, then re-bias the exponent
        const unsigned int r = round_shift(a, 23 - F::MBITS) - ((unsigned int)(127 - F::BIAS) << F::MBITS);
        return (unsigned char)(sign | r);
    }
    // An FP8 subnormal (or zero): count units of 2^(emin - MBITS); rounding up to 2^MBITS units gives
    // exactly the bits of the smallest normal.
    const unsigned int mant = (a & 0x7fffffu) | (biased ? 0x800000u : 0u);
    const int e = biased ? biased - 127 : -126;
    const int shift = 23 + emin - F::MBITS - e;
    const unsigned int m = shift > 31 ? 0u : round_shift(mant, shift);
    return (unsigned char)(sign | m);
}

__device__ __forceinline__ long long global_thread() { return (long long)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ long long thread_count() { return (long long)gridDim.x * blockDim.x; }

// args: n elements, segment length.
template <typename T>
__global__ void fp8_amax(const T* x, unsigned int* amax, const long long* args) {
    const long long n = args[0], seg = args[1];
    if (n == 0) {
        return;
    }
    const long long spans_per_seg = (seg + FP8_SPAN - 1) / FP8_SPAN;
    const long long spans = (n / seg) * spans_per_seg;
    long long current = -1;  // the segment m belongs to: one atomic per segment a thread touches, not per span
    unsigned int m = 0u;
    for (long long j = global_thread(); j < spans; j += thread_count()) {
        const long long s = j / spans_per_seg;
        if (s != current) {
            if (m) {
                atomicMax(amax + current, m);
            }
            current = s;
            m = 0u;
        }
        const long long start = s * seg + (j % spans_per_seg) * FP8_SPAN;
        const long long end = start + FP8_SPAN < (s + 1) * seg ? start + FP8_SPAN : (s + 1) * seg;
        for (long long i = start; i < end; ++i) {
            const unsigned int b = abs_bits(widen(x[i]));
            m = b > m ? b : m;
        }
    }
    if (m) {
        atomicMax(amax + current, m);
    }
}

// args: n segments, scaled_max (float32 bits), power-of-two flag.
extern "C" __global__ void fp8_current_scale(const unsigned int* amax, float* scale, float* scale_inv,
                                             const long long* args) {
    const long long n = args[0];
    const float scaled_max = __uint_as_float((unsigned int)args[1]);
    for (long long s = global_thread(); s < n; s += thread_count()) {
        const unsigned int a = amax[s];
        float sc = 1.0f;
        if (a != 0u && a < 0x7f800000u) {
            sc = div_f32(scaled_max, __uint_as_float(a));
            if (!is_finite(sc)) {
                sc = __uint_as_float(FP8_FLT_MAX_BITS);
            }
        }
        if (args[2]) {
            sc = __uint_as_float(__float_as_uint(sc) & 0xff800000u);
        }
        scale[s] = sc;
        scale_inv[s] = div_f32(1.0f, sc);
    }
}

// args: n blocks, emax_elem.
extern "C" __global__ void fp8_mx_scale(const unsigned int* amax, unsigned char* e8m0, float* multiplier,
                                        const long long* args) {
    const long long n = args[0];
    const int emax_elem = (int)args[1];
    for (long long b = global_thread(); b < n; b += thread_count()) {
        const unsigned int a = amax[b];
        if (a >= 0x7f800000u) {
            e8m0[b] = 0xffu;
            multiplier[b] = __uint_as_float(FP8_NAN_BITS);
            continue;
        }
        int floor_log2 = -126;  // a zero block: log2 of the smallest normal float32
        if (a >= 0x00800000u) {
            floor_log2 = (int)(a >> 23) - 127;
        } else if (a) {  // a float32 subnormal: 2^-149 times its integer bits
            int msb = 0;
            while (a >> (msb + 1)) {
                ++msb;
            }
            floor_log2 = msb - 149;
        }
        int shared = floor_log2 - emax_elem;
        shared = shared < -127 ? -127 : (shared > 127 ? 127 : shared);
        e8m0[b] = (unsigned char)(shared + 127);
        // 2^-shared: shared <= 127 - 8 for float32 amaxes, so 127 - shared is a normal biased exponent
        multiplier[b] = __uint_as_float((unsigned int)(127 - shared) << 23);
    }
}

// args: n elements, segment length (elements per scale), fold-amax flag.
template <typename T, typename F>
__global__ void fp8_cast(const T* x, unsigned char* out, const float* scale, unsigned int* amax,
                         const long long* args) {
    const long long n = args[0], seg = args[1];
    unsigned int m = 0u;
    for (long long i = global_thread(); i < n; i += thread_count()) {
        const float v = widen(x[i]);
        out[i] = to_fp8<F>(mul_f32(v, scale[i / seg]), (__float_as_uint(v) >> 24) & 0x80u);
        const unsigned int b = abs_bits(v);
        m = b > m ? b : m;
    }
    if (args[2] && m) {
        atomicMax(amax, m);
    }
}

// args: n tensors, history length, 1 for "most_recent" (0: "max"), 1 to zero the amaxes, 1 to write
// scale_inv, then each tensor's scaled_max (float32 bits). history: n x length, newest last.
extern "C" __global__ void fp8_delayed_update(float* history, float* scale, float* scale_inv, float* amax,
                                              const long long* args) {
    const long long n = args[0], length = args[1];
    for (long long t = global_thread(); t < n; t += thread_count()) {
        const float a = amax[t];
        if (is_finite(a) && as_double(a) > 0.0) {
            float* row = history + t * length;
            float m = a;
            for (long long k = 0; k + 1 < length; ++k) {
                row[k] = row[k + 1];
                m = maximum(m, row[k]);
            }
            row[length - 1] = a;
            const float use = args[2] ? a : m;
            if (is_finite(use) && as_double(use) > 0.0) {
                float sc = div_f32(__uint_as_float((unsigned int)args[5 + t]), use);
                if (!is_finite(sc)) {
                    sc = __uint_as_float(FP8_FLT_MAX_BITS);
                }
                scale[t] = sc;
                if (args[4]) {
                    scale_inv[t] = div_f32(1.0f, sc);
                }
            }
        }
        if (args[3]) {
            amax[t] = 0.0f;
        }
    }
}
