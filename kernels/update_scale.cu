// update_scale.cu: the loss-scale update, one thread, entirely on the device.
//
// torch's rule (torch._amp_update_scale_), bit for bit:
//   found = any of found_inf[0..n_found_inf) is non-zero (torch sums the 0/1 flags)
//   found: scale = float(double(scale) * backoff_factor), growth_tracker = 0
//   otherwise:  growth_tracker += 1; when it reaches growth_interval,
//               scale = float(double(scale) * growth_factor) if that is finite,
//               and growth_tracker = 0.
// Two optional rules, off by default (hysteresis = 1, min_scale = 0, max_scale = inf):
//   hysteresis H: back off only on the H-th consecutive overflow (overflow_tracker
//     counts them; a clean step or a back-off resets it);
//   bounds: a grown scale is capped at max_scale; a backed-off scale below
//     min_scale is raised to min_scale and floor_hit[0] is set to 1.0f.
// Bookkeeping, each skipped when its pointer is null:
//   inv_scale[0] = float(1.0 / double(scale)) for the next unscale (as torch computes it);
//   clear_found_inf: found_inf[0..n) = 0 for the next iteration;
//   stats (float64, zero-initialised): [0] updates, [1] updates that saw an overflow,
//     [2] 1 + index of the last such update (0: none), [3] times the floor was hit,
//     [4] scale changes recorded, then a ring of `history` (update index, new scale) pairs.
#include "amp_common.cuh"

extern "C" __global__ void update_scale(float* scale, int* growth_tracker, int* overflow_tracker,
                                        float* found_inf, int n_found_inf, int clear_found_inf,
                                        double growth_factor, double backoff_factor, int growth_interval,
                                        int hysteresis, float min_scale, float max_scale,
                                        float* floor_hit, float* inv_scale, double* stats, int history) {
    if (blockIdx.x != 0 || threadIdx.x != 0) {
        return;
    }
    // Float32 values are compared and converted through float64 or their bits, never
    // with float32 instructions that -ftz would make treat subnormals as zero.
    bool found = false;  // any non-zero entry (a NaN counts): torch's "sum != 0" for 0/1 flags
    for (int i = 0; i < n_found_inf; ++i) {
        found |= (__float_as_uint(found_inf[i]) & 0x7fffffffu) != 0u;
        if (clear_found_inf) {
            found_inf[i] = 0.0f;
        }
    }
    const float old_scale = *scale;
    float new_scale = old_scale;
    if (found) {
        *growth_tracker = 0;
        int overflows = 1;
        if (overflow_tracker) {
            overflows = *overflow_tracker + 1;
            *overflow_tracker = overflows < hysteresis ? overflows : 0;
        }
        if (overflows >= hysteresis) {
            new_scale = f64_to_f32(f32_to_f64(old_scale) * backoff_factor);
            if (f32_to_f64(new_scale) < f32_to_f64(min_scale)) {
                new_scale = min_scale;
                if (floor_hit) {
                    *floor_hit = 1.0f;
                }
                if (stats) {
                    stats[3] += 1.0;
                }
            }
        }
    } else {
        if (overflow_tracker) {
            *overflow_tracker = 0;
        }
        const int successful = *growth_tracker + 1;
        if (successful == growth_interval) {
            const float grown = f64_to_f32(f32_to_f64(old_scale) * growth_factor);
            if (is_finite(grown)) {  // never grow past float32 to inf
                new_scale = f32_to_f64(grown) < f32_to_f64(max_scale) ? grown : max_scale;
            }
            *growth_tracker = 0;
        } else {
            *growth_tracker = successful;
        }
    }
    *scale = new_scale;
    if (inv_scale) {
        *inv_scale = f64_to_f32(1.0 / f32_to_f64(new_scale));
    }
    if (stats) {
        const double step = stats[0];
        stats[0] = step + 1.0;
        if (found) {
            stats[1] += 1.0;
            stats[2] = step + 1.0;
        }
        if (history > 0 && __float_as_uint(new_scale) != __float_as_uint(old_scale)) {
            const long long slot = (long long)stats[4] % history;
            stats[5 + 2 * slot] = step;
            stats[6 + 2 * slot] = f32_to_f64(new_scale);
            stats[4] += 1.0;
        }
    }
}
