// bfloat16 storage for mixed-precision math: the upper 16 bits of an IEEE float32 (8-bit
// exponent, 7-bit mantissa). Operands of the bf16 GEMMs and convolutions are rounded to it;
// products are exact in float32 and every sum, output, weight and statistic stays float32.
//
// Rounding is to nearest, ties to even, on every backend (the same SPK_HD expression on the
// CPU and in CUDA kernels), so a value rounds to the same bits everywhere. NaN stays NaN,
// +-Inf stays +-Inf, subnormals round like any other value (no flush to zero), and floats above
// the largest bf16 (3.3895e38) round to Inf.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/spk_hd.h"

typedef uint16_t spk_bf16;

SPK_HD spk_bf16 spk_bf16_round(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (spk_bf16)((u >> 16) | 0x40u);  // NaN: keep it quiet
    u += 0x7fffu + ((u >> 16) & 1u);                                            // round half to even on bit 16
    return (spk_bf16)(u >> 16);
}

SPK_HD float spk_bf16_to_f32(spk_bf16 h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

// y[i] = bf16(x[i]); y must not overlap x. Parallel, deterministic.
void bf16_from_f32(spk_bf16 *y, const float *x, size_t n);
// y[i] = x[i] (exact). Parallel.
void bf16_to_f32(float *y, const spk_bf16 *x, size_t n);
// The batch folded into time: y[c, b*T + t] = bf16(x[b, c, t]) for x (B, C, T), y (C, B*T), the
// layout the bf16 GEMMs read with no gathering copy. When sums is not NULL, also
// sums[c] += sum over b, t of x[b, c, t] in float32 (a bias gradient, in the same pass).
void bf16_fold_from_f32(spk_bf16 *y, float *sums, const float *x, int B, int C, int T);
// C channels of a wider tensor, optionally plus a (B, C, T) one, rounded as a convolution's input
// with no copy: y[c*yc + b*yb + t] = bf16(x[(b*ldc + c)*T + t] + add[b, c, t]) (add NULL: without
// it), for x a channel slice of a (B, ldc, T) tensor (ldc >= C). y's strides place it: folded,
// (C, B*T) with yc = B*T and yb = T; or channels of a (B, D, T) tensor, yc = T and yb = D*T.
void bf16_slice_from_f32(spk_bf16 *y, size_t yc, size_t yb, const float *x, int ldc, const float *add, int B, int C,
                         int T);
