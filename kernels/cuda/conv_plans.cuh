// cuDNN plans of the convolutions of kernels/cuda/conv1d.cu: descriptors, the algorithm of each
// pass with the math type it runs in, and the workspace they need, cached per shape
// (kernels/cuda/conv_plans.cu).
//
// The 1-D convolution is a 2-D one of height 1: x (B, Cin, 1, T + 2p) * w (Cout, Cin, 1, K),
// dilation (1, d), no cuDNN padding -> y (B, Cout, 1, T).
//
// Lengths share plans: T is rounded up to a bucket (8 per octave above 64 frames) and the
// algorithms are chosen once per bucket, for its largest length, so variable-length inference
// does not choose anew for every utterance and the choice does not depend on which length
// came first; the descriptors are re-set to each call's exact T (host-only). Eviction takes
// the least-used plan, so a run of one-off inference lengths cannot evict the training plans.
#pragma once
#include <stddef.h>

#include "kernels/cuda/context.h"

enum { SPK_CONV_FWD = 0, SPK_CONV_BWD_DATA = 1, SPK_CONV_BWD_FILTER = 2 };

struct spk_conv_pass_t {
    int algo;                  // cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
    cudnnMathType_t reported;  // the heuristics' math type for it
    int deterministic;         // as the heuristics report (the fallback: 1)
    int fallback;              // no heuristic result ran: the classic algorithm
    size_t ws_bytes;           // at the plan's current T
    int tried;                 // candidates executed to choose it (those that failed included)
    int failed;                // of them, those cuDNN refused to run or whose workspace was over the cap
    float ms;                  // its timed run in SPKDDP_CUDNN_SEARCH=time, else 0
};

struct spk_conv_plan_t {
    int valid;
    int key[6];                          // B, Cin, Cout, bucket of T, K, dilation
    int T;                               // the length the descriptors describe now
    cudnnTensorDescriptor_t xd;          // (B, Cin, 1, T + 2p)
    cudnnTensorDescriptor_t yd;          // (B, Cout, 1, T)
    cudnnFilterDescriptor_t wd;          // (Cout, Cin, 1, K)
    cudnnConvolutionDescriptor_t cd[3];  // per pass, carrying the math type it runs in
    spk_conv_pass_t pass[3];
    size_t ws_bytes;   // the largest of the three
    long long uses;    // lookups, for eviction
    long long serial;  // creation order, for ties and listings
};

// The plan of this shape, bound to exactly this T. Valid until the next call.
const spk_conv_plan_t &spk_conv_plan(int B, int Cin, int Cout, int T, int K, int dilation);
