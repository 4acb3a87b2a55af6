// multi_tensor_unscale.cu: one launch checks and unscales a whole list of gradients.
//
// For every element x of every listed tensor:
//     out = narrow(widen(x) * inv_scale)        (in place when out is the source)
//     if x is inf or NaN:  found_inf[0] = 1.0f
// widen/narrow are exact widening to float32 (float64 stays float64) and
// round-to-nearest-even back (amp_common.cuh). Nothing is read back to the host.
//
// Work is split into chunks of `chunk_size` elements; block b handles one chunk,
// named by the chunk table, a single int64 device array built by the host:
//     [0, T)           source pointers         T = number of tensors
//     [T, 2T)          destination pointers    (equal to the source when in place)
//     [2T, 3T)         element counts
//     [3T, 3T+B)       tensor index of block b B = number of chunks = gridDim.x
//     [3T+B, 3T+2B)    chunk index of block b within its tensor
// The host keeps the table on the device and reuses it while the gradients stay
// at the same addresses, so a steady loop copies nothing host-to-device and the
// launch can be captured in a CUDA graph. inv_scale is read from device memory
// for the same reason.
#include "amp_common.cuh"

template <typename Tin, typename Tout>
__global__ void multi_tensor_unscale(const long long* table, int n_tensors, long long chunk_size,
                                     float* found_inf, const float* inv_scale) {
    typedef typename opmath<Tin>::type acc_t;
    const int VEC = 16 / sizeof(Tin);  // elements per 128-bit load of the source

    const long long tensor = table[3 * (long long)n_tensors + blockIdx.x];
    const long long chunk = table[3 * (long long)n_tensors + gridDim.x + blockIdx.x];
    const long long start = chunk * chunk_size;
    const long long left = table[2 * n_tensors + tensor] - start;
    const long long n = left < chunk_size ? left : chunk_size;
    const Tin* src = reinterpret_cast<const Tin*>(table[tensor]) + start;
    Tout* dst = reinterpret_cast<Tout*>(table[n_tensors + tensor]) + start;
    acc_t inv;
    load_scalar(inv_scale, inv);

    bool bad = false;
    long long done = 0;
    // chunk_size is a multiple of VEC, so a chunk is aligned when its tensor is.
    if (aligned_to(src, sizeof(Tin) * VEC) && aligned_to(dst, sizeof(Tout) * VEC)) {
        const long long n_vec = n / VEC;
        const pack<Tin, VEC>* vsrc = reinterpret_cast<const pack<Tin, VEC>*>(src);
        pack<Tout, VEC>* vdst = reinterpret_cast<pack<Tout, VEC>*>(dst);
        for (long long i = threadIdx.x; i < n_vec; i += blockDim.x) {
            const pack<Tin, VEC> a = vsrc[i];
            pack<Tout, VEC> r;
#pragma unroll
            for (int k = 0; k < VEC; ++k) {
                const acc_t x = widen(a.v[k]);
                bad |= !is_finite(x);
                narrow(mul(x, inv), r.v[k]);
            }
            vdst[i] = r;
        }
        done = n_vec * VEC;
    }
    for (long long i = done + threadIdx.x; i < n; i += blockDim.x) {  // tail, or all when misaligned
        const acc_t x = widen(src[i]);
        bad |= !is_finite(x);
        narrow(mul(x, inv), dst[i]);
    }
    if (bad) {
        *found_inf = 1.0f;  // every writer stores the same value: no atomic needed
    }
}
