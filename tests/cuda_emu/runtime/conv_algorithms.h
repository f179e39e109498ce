// The algorithms the stand-in's cuDNN heuristics offer, best first, for a pass, a shape and
// the math type a convolution descriptor permits. A fixed menu modelled on cuDNN's, so that a
// caller's choice is exercised: a non-deterministic algorithm ranked first (it sums in another
// order under each scheduling order), TF32 offers when tensor-op math is permitted (one with
// the fp16 down-conversion first), an FFT that does not support dilation, stride, NHWC or
// bfloat16, and workspaces that differ per algorithm and are really written. A convolution runs
// only with an algorithm and math type that were offered for its shape.
#pragma once
#include <cstddef>
#include <vector>

#include "conv_math.h"
#include "cudnn.h"

namespace spk_emu {

enum class ConvPass { forward, backward_data, backward_filter };

struct ConvOffer {
    int algo;
    cudnnStatus_t status;  // CUDNN_STATUS_NOT_SUPPORTED for a shape it cannot do
    bool deterministic;
    cudnnMathType_t math;  // the kernel's: CUDNN_FMA_MATH plain fp32; otherwise TF32 inputs
    size_t workspace_bytes;
};

std::vector<ConvOffer> conv_offers(ConvPass pass, const ConvShape& g, cudnnMathType_t permitted);
// The math type the heuristics report for an offer (SPKDDP_CUDA_EMU_CUDNN_REPORT, config.h).
cudnnMathType_t conv_reported_math(const ConvOffer& o);
// The offer that runs `algo` under a descriptor's math type (tensor-op offers first where the
// math type permits them), or nullptr when the algorithm is not available that way.
bool conv_offer_for(ConvPass pass, const ConvShape& g, cudnnMathType_t descriptor_math, int algo, ConvOffer* out);

}  // namespace spk_emu
