// multi_tensor_optimizers.cu: fused Adam/AdamW and SGD, one launch for a whole (device, dtype) group.
//
// The tensors come from a chunk table (multi_tensor.cuh) with the lists LISTS["ADAM"] or LISTS["SGD"]
// of mixprec/amp/_layout.py; the hyper-parameters, and the device addresses of the loss scale and of
// found_inf, from one struct AdamArgs / SGDArgs in device memory. torch's fused contract with the
// GradScaler, entirely on the device:
//   * found_inf non-zero (an inf/NaN gradient this iteration): return before touching anything, so
//     parameters, gradients and optimizer state stay bit-identical (the step is skipped);
//   * grad_scale given: the gradient is divided by the scale in the opmath type, and the unscaled
//     gradient is written back (as torch's fused kernels do);
//   * the step count (Adam) lives on the device: count_steps adds one unless found_inf is set, then
//     fused_adam derives the bias corrections from it. A CUDA graph that captured the two launches
//     replays them with whatever the device holds: nothing is read back to the host.
// P is the storage type of the parameter, its gradient and its optimizer state; the arithmetic runs
// in opmath<P> (float32 for float16/bfloat16/float32, float64 for float64) and each value is rounded
// once, when it is stored. C is the type of a low-precision copy written from the updated parameter
// (O2: the float16 model weight of a float32 master), or no_copy.
// mixprec/optim/fused.py holds the NumPy twin; each line below has its line there.
#include "amp_common.cuh"
#include "multi_tensor.cuh"

// The low-precision copy of an updated parameter: written when there is one (C a format), else nothing.
struct no_copy {};
template <typename T, typename C>
__device__ __forceinline__ void write_copy(T p, C* copy, long long i) { narrow(p, copy[i]); }
template <typename T>
__device__ __forceinline__ void write_copy(T, no_copy*, long long) {}

// Any non-zero found_inf (a NaN counts) skips the step, as in update_scale.cu.
__device__ __forceinline__ bool skipped(const float* found_inf) {
    return found_inf && (__float_as_uint(*found_inf) & 0x7fffffffu) != 0u;
}

// base**n by squaring: the same float64 products, in the same order, as the twin's (bit for bit; pow()
// differs between CUDA's and the C library's last bits).
__device__ __forceinline__ double power(double base, long long n) {
    double result = 1.0;
    while (n > 0) {
        if (n & 1) {
            result *= base;
        }
        base *= base;
        n >>= 1;
    }
    return result;
}

// The gradient both optimizers start from: divided by the loss scale when there is one (the unscaled
// value written back, as torch's fused kernels do), then negated to maximize.
template <typename T, typename P>
__device__ __forceinline__ T gradient(P& stored, const float* grad_scale, T scale, bool maximize) {
    T g = widen(stored);
    if (grad_scale) {
        g = div(g, scale);
        narrow(g, stored);
    }
    return maximize ? negate(g) : g;
}

// ---- Adam / AdamW ----
// One thread per tensor: step += 1 unless this iteration found an inf/NaN. Launched before fused_adam,
// which reads the new count (separate launches: all blocks of a tensor must see the same count).
extern "C" __global__ void count_steps(const long long* table, const AdamArgs* args) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < table[CHUNK_N_TENSORS] && !skipped(args->found_inf)) {
        *list_entry<long long>(table, ADAM_STEP, t) += 1;
    }
}

template <typename P, typename C>
__global__ void fused_adam(const long long* table, const AdamArgs* args) {
    typedef typename opmath<P>::type T;
    const AdamArgs a = *args;
    if (skipped(a.found_inf)) {
        return;
    }
    const ChunkWork w = chunk_work(table);
    P* param = chunk_pointer<P>(table, ADAM_PARAM, w);
    P* grad = chunk_pointer<P>(table, ADAM_GRAD, w);
    P* exp_avg = chunk_pointer<P>(table, ADAM_EXP_AVG, w);
    P* exp_avg_sq = chunk_pointer<P>(table, ADAM_EXP_AVG_SQ, w);
    P* max_exp_avg_sq = chunk_pointer<P>(table, ADAM_MAX_EXP_AVG_SQ, w);  // used only with amsgrad
    C* copy = chunk_pointer<C>(table, ADAM_WEIGHT_COPY, w);
    const long long step = *list_entry<const long long>(table, ADAM_STEP, w.tensor);

    // The scalars, from float64 host numbers, rounded once to the opmath type (torch's scalar_t(...)).
    const double bias_correction1 = 1.0 - power(a.beta1, step);
    const double bias_correction2 = 1.0 - power(a.beta2, step);
    T neg_step_size, bias_correction2_sqrt, eps, beta2, one_minus_beta2, weight, wd, decay, scale = T(1);
    from_double(-(a.lr / bias_correction1), neg_step_size);
    from_double(sqrt_f64(bias_correction2), bias_correction2_sqrt);
    from_double(a.eps, eps);
    from_double(a.beta2, beta2);
    from_double(1.0 - a.beta2, one_minus_beta2);
    from_double(1.0 - a.beta1, weight);  // exp_avg = lerp(exp_avg, g, weight)
    from_double(a.weight_decay, wd);
    from_double(1.0 - a.lr * a.weight_decay, decay);
    const bool lerp_from_start = as_double(weight) < 0.5;  // torch's two-sided lerp, exact at both ends
    const T one_minus_weight = sub(T(1), weight);
    if (a.grad_scale) {
        load_scalar(a.grad_scale, scale);
    }

    for (long long i = threadIdx.x; i < w.n; i += blockDim.x) {
        T g = gradient(grad[i], a.grad_scale, scale, a.maximize);
        T p = widen(param[i]);
        if (a.weight_decay != 0.0) {
            if (a.decoupled_weight_decay) {
                p = mul(p, decay);          // AdamW: p *= 1 - lr * weight_decay
            } else {
                g = add(g, mul(p, wd));     // Adam: the L2 penalty joins the gradient
            }
        }
        T m = widen(exp_avg[i]);
        m = lerp_from_start ? add(m, mul(weight, sub(g, m))) : sub(g, mul(sub(g, m), one_minus_weight));
        T v = widen(exp_avg_sq[i]);
        v = add(mul(v, beta2), mul(mul(one_minus_beta2, g), g));
        narrow(m, exp_avg[i]);
        narrow(v, exp_avg_sq[i]);
        if (a.amsgrad) {
            v = maximum(widen(max_exp_avg_sq[i]), v);
            narrow(v, max_exp_avg_sq[i]);
        }
        const T denom = add(div(square_root(v), bias_correction2_sqrt), eps);
        p = add(p, div(mul(neg_step_size, m), denom));
        narrow(p, param[i]);
        write_copy(p, copy, i);
    }
}

// ---- SGD ----
template <typename P, typename C>
__global__ void fused_sgd(const long long* table, const SGDArgs* args) {
    typedef typename opmath<P>::type T;
    const SGDArgs a = *args;
    if (skipped(a.found_inf)) {
        return;
    }
    const ChunkWork w = chunk_work(table);
    P* param = chunk_pointer<P>(table, SGD_PARAM, w);
    P* grad = chunk_pointer<P>(table, SGD_GRAD, w);
    P* buffer = chunk_pointer<P>(table, SGD_MOMENTUM_BUFFER, w);  // used only with momentum
    C* copy = chunk_pointer<C>(table, SGD_WEIGHT_COPY, w);
    T lr, momentum, one_minus_dampening, wd, scale = T(1);
    from_double(a.lr, lr);
    from_double(a.momentum, momentum);
    from_double(1.0 - a.dampening, one_minus_dampening);
    from_double(a.weight_decay, wd);
    if (a.grad_scale) {
        load_scalar(a.grad_scale, scale);
    }

    for (long long i = threadIdx.x; i < w.n; i += blockDim.x) {
        T g = gradient(grad[i], a.grad_scale, scale, a.maximize);
        T p = widen(param[i]);
        if (a.weight_decay != 0.0) {
            g = add(g, mul(wd, p));
        }
        if (a.momentum != 0.0) {
            const T b = a.first_step ? g : add(mul(widen(buffer[i]), momentum), mul(one_minus_dampening, g));
            narrow(b, buffer[i]);
            g = a.nesterov ? add(g, mul(momentum, b)) : b;
        }
        p = sub(p, mul(lr, g));
        narrow(p, param[i]);
        write_copy(p, copy, i);
    }
}
