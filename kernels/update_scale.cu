// update_scale.cu: the loss-scale update, one thread, entirely on the device.
//
// Its one argument is a struct UpdateArgs in device memory (amp_layout.h, generated
// from mixprec/amp/_layout.py): pointers to the arrays it reads and writes, and the
// rule. The host builds that block once and reuses it, so the launch needs no copy
// and a CUDA graph can capture it. The code reads in three parts:
//   1. torch's rule (torch._amp_update_scale_), bit for bit;
//   2. mixprec's opt-in extras, which only adjust what step 1 decided; their
//      defaults (hysteresis 1, bounds 0 and inf) change nothing;
//   3. bookkeeping: the next inv_scale, the statistics, clearing found_inf.
// Float32 values are compared and converted through float64 or their bits, never
// with float32 instructions that -ftz would make treat subnormals as zero.
#include "amp_common.cuh"
#include "amp_layout.h"

extern "C" __global__ void update_scale(const UpdateArgs* args) {
    if (blockIdx.x != 0 || threadIdx.x != 0) {
        return;
    }
    const UpdateArgs a = *args;
    bool found = false;  // any non-zero entry (a NaN counts): torch's "sum != 0" for 0/1 flags
    for (long long i = 0; i < a.n_found_inf; ++i) {
        found |= (__float_as_uint(a.found_inf[i]) & 0x7fffffffu) != 0u;
    }
    const float old_scale = *a.scale;
    float new_scale = old_scale;

    // 1. torch's rule: back off after an overflow, grow after growth_interval clean steps.
    bool backed_off = false, grew = false;
    if (found) {
        new_scale = f64_to_f32(f32_to_f64(old_scale) * a.backoff_factor);
        backed_off = true;
        *a.growth_tracker = 0;
    } else {
        const int successful = *a.growth_tracker + 1;
        if (successful == a.growth_interval) {
            const float grown = f64_to_f32(f32_to_f64(old_scale) * a.growth_factor);
            if (is_finite(grown)) {  // never grow past float32 to inf
                new_scale = grown;
                grew = true;
            }
            *a.growth_tracker = 0;
        } else {
            *a.growth_tracker = successful;
        }
    }

    // 2. mixprec's extras.
    if (a.overflow_tracker) {  // hysteresis: back off only on the hysteresis-th overflow in a row
        const int overflows = found ? *a.overflow_tracker + 1 : 0;
        const bool tolerated = found && overflows < a.hysteresis;
        *a.overflow_tracker = tolerated ? overflows : 0;
        if (tolerated) {
            new_scale = old_scale;
            backed_off = false;
        }
    }
    if (backed_off && f32_to_f64(new_scale) < a.min_scale) {  // the floor: the run overflows at every scale
        new_scale = f64_to_f32(a.min_scale);
        if (a.floor_hit) {
            *a.floor_hit = 1.0f;
        }
        if (a.stats) {
            a.stats[STAT_FLOOR_HITS] += 1.0;
        }
    }
    if (grew && f32_to_f64(new_scale) > a.max_scale) {
        new_scale = f64_to_f32(a.max_scale);
    }
    *a.scale = new_scale;

    // 3. Bookkeeping.
    if (a.inv_scale) {
        *a.inv_scale = f64_to_f32(1.0 / f32_to_f64(new_scale));  // as torch computes it
    }
    if (a.clear_found_inf) {
        for (long long i = 0; i < a.n_found_inf; ++i) {
            a.found_inf[i] = 0.0f;
        }
    }
    if (a.stats) {
        const double step = a.stats[STAT_STEPS];
        a.stats[STAT_STEPS] = step + 1.0;
        if (found) {
            a.stats[STAT_SKIPPED_STEPS] += 1.0;
            a.stats[STAT_LAST_OVERFLOW_PLUS_ONE] = step + 1.0;
        }
        if (a.history > 0 && __float_as_uint(new_scale) != __float_as_uint(old_scale)) {
            const long long slot = (long long)a.stats[STAT_SCALE_CHANGES] % a.history;
            a.stats[STAT_RING + 2 * slot] = step;
            a.stats[STAT_RING + 2 * slot + 1] = f32_to_f64(new_scale);
            a.stats[STAT_SCALE_CHANGES] += 1.0;
        }
    }
}
