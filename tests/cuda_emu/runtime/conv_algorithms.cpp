#include "conv_algorithms.h"

#include "config.h"

namespace spk_emu {
namespace {

bool permits_tensor_ops(cudnnMathType_t m) { return m != CUDNN_FMA_MATH; }

// How an offer's math type ranks under a descriptor's (lower is preferred, -1 excluded): the
// descriptor's own first, then tensor ops where permitted, then FMA. The fp16 down-conversion
// runs only when the descriptor asks for it.
int math_rank(cudnnMathType_t descriptor, cudnnMathType_t offered) {
    if (offered == descriptor) return 0;
    if (offered == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) return -1;
    if (offered == CUDNN_TENSOR_OP_MATH) return permits_tensor_ops(descriptor) ? 1 : -1;
    return 2;  // FMA
}

ConvOffer offer(int algo, bool deterministic, cudnnMathType_t math, size_t floats) {
    return {algo, CUDNN_STATUS_SUCCESS, deterministic, math, floats * sizeof(float)};
}

}  // namespace

std::vector<ConvOffer> conv_offers(ConvPass pass, const ConvShape& g, cudnnMathType_t permitted) {
    const size_t crs = (size_t)g.c * g.r * g.s, krs = (size_t)g.k * g.r * g.s;
    std::vector<ConvOffer> v;
    // bf16 data under CUDNN_DEFAULT_MATH: no tensor-core offers, as cuDNN 9.19 on an H200
    // (only its non-tensor-core kernels); CUDNN_TENSOR_OP_MATH brings them.
    const bool tensor = permits_tensor_ops(permitted) && !(g.bf16 && permitted == CUDNN_DEFAULT_MATH);
    switch (pass) {
        case ConvPass::forward: {
            if (permitted == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION || permitted == CUDNN_DEFAULT_MATH)
                v.push_back(offer(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, true,
                                  CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION, 2 * crs + 64));
            if (tensor)
                v.push_back(
                    offer(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, true, CUDNN_TENSOR_OP_MATH, 2 * crs + 64));
            ConvOffer fft =
                offer(CUDNN_CONVOLUTION_FWD_ALGO_FFT, true, CUDNN_FMA_MATH, (size_t)g.n * g.c * g.h * g.w * 2);
            // cuDNN's FFT convolutions take neither dilation nor stride, and NCHW float tensors only
            if (g.dil_h > 1 || g.dil_w > 1 || g.stride_h > 1 || g.stride_w > 1 || g.x_nhwc || g.y_nhwc || g.bf16)
                fft.status = CUDNN_STATUS_NOT_SUPPORTED;
            v.push_back(fft);
            v.push_back(offer(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, true, CUDNN_FMA_MATH, crs + 32));
            v.push_back(offer(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, true, CUDNN_FMA_MATH, 0));
            break;
        }
        case ConvPass::backward_data:
            if (tensor)
                v.push_back(offer(CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, !config().cudnn_reports_default,
                                  CUDNN_TENSOR_OP_MATH, 2 * krs + 64));
            v.push_back(offer(CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, false, CUDNN_FMA_MATH, 0));
            v.push_back(offer(CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, true, CUDNN_FMA_MATH, krs + 16));
            break;
        case ConvPass::backward_filter:
            if (tensor)
                v.push_back(offer(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, !config().cudnn_reports_default,
                                  CUDNN_TENSOR_OP_MATH, 2 * krs * g.c + 64));
            v.push_back(offer(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, false, CUDNN_FMA_MATH, 0));
            v.push_back(offer(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3, false, CUDNN_FMA_MATH, (size_t)g.n * 64));
            v.push_back(offer(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, true, CUDNN_FMA_MATH, krs * g.c + 128));
            break;
    }
    return v;
}

cudnnMathType_t conv_reported_math(const ConvOffer& o) {
    return o.math == CUDNN_FMA_MATH && config().cudnn_reports_default ? CUDNN_DEFAULT_MATH : o.math;
}

bool conv_offer_for(ConvPass pass, const ConvShape& g, cudnnMathType_t descriptor_math, int algo, ConvOffer* out) {
    int best = -1;
    for (const ConvOffer& o : conv_offers(pass, g, descriptor_math)) {
        const int rank = math_rank(descriptor_math, o.math);
        if (o.algo != algo || o.status != CUDNN_STATUS_SUCCESS || rank < 0 || (best >= 0 && rank >= best)) continue;
        *out = o;
        best = rank;
    }
    return best >= 0;
}

}  // namespace spk_emu
