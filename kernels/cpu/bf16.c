// bf16 conversions (kernels/bf16.h) over flat arrays.
#include "kernels/bf16.h"

#define PAR_MIN 32768  // elements: below this, one thread

void bf16_from_f32(spk_bf16* y, const float* x, size_t n) {
#pragma omp parallel for simd schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) y[i] = spk_bf16_round(x[i]);
}

void bf16_to_f32(float* y, const spk_bf16* x, size_t n) {
#pragma omp parallel for simd schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) y[i] = spk_bf16_to_f32(x[i]);
}
