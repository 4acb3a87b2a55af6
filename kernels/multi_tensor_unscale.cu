// multi_tensor_unscale.cu: one launch checks and unscales a whole list of gradients.
//
// For every element x of every listed tensor:
//     out = narrow(widen(x) * inv_scale)        (in place when out is the source)
//     if x is inf or NaN:  found_inf[0] = 1.0f
// widen/narrow are exact widening to float32 (float64 stays float64) and
// round-to-nearest-even back (amp_common.cuh). The tensors come from a chunk table
// (multi_tensor.cuh) with two pointer lists, UNSCALE_SOURCE and UNSCALE_DESTINATION.
// Nothing is read back to the host, and inv_scale is read from device memory, so a
// CUDA graph that captured the launch follows the scale as it changes.
#include "amp_common.cuh"
#include "multi_tensor.cuh"

template <typename Tin, typename Tout>
__global__ void multi_tensor_unscale(const long long* table, float* found_inf, const float* inv_scale) {
    typedef typename opmath<Tin>::type acc_t;
    const int VEC = 16 / sizeof(Tin);  // elements per 128-bit load of the source

    const ChunkWork w = chunk_work(table);
    const Tin* src = chunk_pointer<const Tin>(table, UNSCALE_SOURCE, w);
    Tout* dst = chunk_pointer<Tout>(table, UNSCALE_DESTINATION, w);
    const long long n = w.n;
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
