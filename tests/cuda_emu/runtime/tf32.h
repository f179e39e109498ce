// TF32, the tensor-core input format of CUBLAS_TF32_TENSOR_OP_MATH and cuDNN's tensor-op
// math for fp32: a float with its mantissa rounded (to nearest, ties to even) to 10 bits.
#pragma once
#include <cstdint>
#include <cstring>

namespace spk_emu {

inline float round_tf32(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7f800000u) != 0x7f800000u) {  // finite: round; inf and NaN stay
        u += 0xfffu + ((u >> 13) & 1u);
        u &= ~0x1fffu;
    }
    memcpy(&x, &u, sizeof x);
    return x;
}

}  // namespace spk_emu
