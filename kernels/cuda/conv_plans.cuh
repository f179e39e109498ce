// cuDNN plans of the convolutions of kernels/cuda/conv1d.cu, conv2d.cu and conv2d_bf16.cu:
// descriptors, the algorithm of each pass with the math type it runs in, and the workspace they
// need, cached per shape (kernels/cuda/conv_plans.cu).
//
// A plan is a 2-D convolution as cuDNN sees it (spk_conv_geom_t) at a length, the size of its
// time axis. The 1-D convolution is one of height 1 on NCHW floats: x (B, Cin, 1, T + 2p) *
// w (Cout, Cin, 1, K), dilation (1, d), no cuDNN padding -> y (B, Cout, 1, T), length T. The 2-D
// ones run on channels-last tensors (NHWC) with KRSC filters, in float or in bf16 with float
// compute; their length is the input width W.
//
// Lengths share plans: the length is rounded up to a bucket (8 per octave above 64) and the
// algorithms are chosen once per bucket, for its largest length, so variable-length inference
// does not choose anew for every utterance and the choice does not depend on which length
// came first; the descriptors are re-set to each call's exact length (host-only). Eviction takes
// the least-used plan, so a run of one-off inference lengths cannot evict the training plans.
#pragma once
#include <stddef.h>

#include "kernels/cuda/context.h"

enum { SPK_CONV_FWD = 0, SPK_CONV_BWD_DATA = 1, SPK_CONV_BWD_FILTER = 2 };

// A convolution but for its length (ints only: plans compare it bytewise).
struct spk_conv_geom_t {
    int dims;             // 1: conv1d (the length is T); 2: conv2d (the length is the input width)
    int B, Cin, Cout, H;  // batch, channels, input height
    int W_extra;          // input width = length + W_extra (1-D: the reflect padding 2p, ours)
    int KH, KW, SH, SW;   // kernel, stride
    int PH, PW, DH, DW;   // cuDNN's zero padding, dilation
    int nhwc;             // tensors NHWC, filters KRSC (else NCHW, KCRS)
    int bf16;             // data bfloat16 with float compute (else float)
};

struct spk_conv_pass_t {
    int algo;                  // cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
    cudnnMathType_t reported;  // the heuristics' math type for it
    int deterministic;         // as the heuristics report (the fallback: 1)
    int fallback;              // no heuristic result ran: the classic algorithm
    size_t ws_bytes;           // at the plan's current length
    int tried;                 // candidates executed to choose it (those that failed included)
    int failed;                // of them, those cuDNN refused to run or whose workspace was over the cap
    float ms;                  // its timed run in SPKDDP_CUDNN_SEARCH=time, else 0
};

struct spk_conv_plan_t {
    int valid;
    spk_conv_geom_t geom;                // with `bucket`, the key
    int bucket;                          // of the length
    int len;                             // the length the descriptors describe now
    cudnnTensorDescriptor_t xd;          // (B, Cin, H, len + W_extra)
    cudnnTensorDescriptor_t yd;          // (B, Cout, OH, OW)
    cudnnFilterDescriptor_t wd;          // (Cout, Cin, KH, KW)
    cudnnConvolutionDescriptor_t cd[3];  // per pass, carrying the math type it runs in
    spk_conv_pass_t pass[3];
    size_t ws_bytes;   // the largest of the three
    long long uses;    // lookups, for eviction
    long long serial;  // creation order, for ties and listings
};

// The plan of this convolution, bound to exactly this length. Valid until the next call.
const spk_conv_plan_t &spk_conv_plan(const spk_conv_geom_t &g, int length);
