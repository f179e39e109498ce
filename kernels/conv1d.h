// Conv1d over (B, C, T) activations: stride 1, odd kernel size K, dilation d, bias, and
// 'same' output length via REFLECT padding of p = d*(K-1)/2 on each side (as
// torch.nn.functional.pad(x, (p, p), mode='reflect'); requires T > p). K = 1 is a plain
// channel-mixing GEMM.
//
//   y[b,o,t] = bias[o] + sum_{i,k} w[o,i,k] * xpad[b,i,t + k*d],  xpad[b,i,s] = x[b,i,r(s-p)]
//   r(u) = -u for u < 0, 2(T-1) - u for u >= T, u otherwise.
//
// Backward ACCUMULATES into dw and dbias, and into dx with dx_accumulate (else it overwrites
// dx, with the bits of zeroing it first); reflect padding folds the gradient of the padded
// positions back onto the reflected source positions. Any of dx, dw, dbias may be NULL
// (not needed). Outputs must not alias inputs. Scratch: `workspace` of
// conv1d_workspace_floats(...) floats (independent of the thread count), reusable between calls
// (its contents do not carry over). Call from a serial region (threads internally).
#pragma once
#include <stddef.h>

#include "kernels/exact_sum.h"

size_t conv1d_workspace_floats(int B, int Cin, int Cout, int T, int K, int dilation);

void conv1d_forward(float *y,           // (B, Cout, T)
                    const float *x,     // (B, Cin, T)
                    const float *w,     // (Cout, Cin, K)
                    const float *bias,  // (Cout) or NULL
                    int B, int Cin, int Cout, int T, int K, int dilation,
                    float *workspace);  // (conv1d_workspace_floats)

void conv1d_backward(float *dx,  // (B, Cin, T) += (dx_accumulate) or = ; or NULL
                     int dx_accumulate,
                     float *dw,        // (Cout, Cin, K) += ; or NULL
                     float *dbias,     // (Cout) += ; or NULL
                     const float *dy,  // (B, Cout, T)
                     const float *x,   // (B, Cin, T)
                     const float *w,   // (Cout, Cin, K)
                     int B, int Cin, int Cout, int T, int K, int dilation,
                     float *workspace);  // (conv1d_workspace_floats)

// The world-size-invariant mode (kernels/backend.h). conv1d_forward_fixed: conv1d_forward with
// each sample's GEMMs planned for one thread, so a sample's output depends on neither B nor the
// thread count. conv1d_forward_grouped: the same for groups of `group` consecutive samples (B is
// a multiple), a group's output depending on neither B nor the thread count (group 1: the
// fixed forward; larger groups may fold a group's samples into one GEMM, and G is then part of
// the result, as it is of the exact sums). conv1d_backward_exact: dx as conv1d_backward
// (computed the same way, by the grouped forward's chunks; += with dx_accumulate, else =, the
// bits of adding to zeros), and dw,
// dbias are exact sums (kernels/exact_sum.h) to which every group of `group` consecutive samples
// (B is a multiple) adds its contribution as one term (dw: the group's GEMMs over time, summed in
// order, by blocks set by the shapes; dbias: its samples' float sums over time), so they do not
// depend on which groups this call gets. dw_tmp: (Cout, Cin, K) floats of scratch, undefined
// afterwards (needed with dw). Either sum may be empty (xsum_none()).
// Their workspace: conv1d_workspace_floats_fixed (room for every group size's calls).
size_t conv1d_workspace_floats_fixed(int B, int Cin, int Cout, int T, int K, int dilation);
void conv1d_forward_fixed(float *y, const float *x, const float *w, const float *bias, int B, int Cin, int Cout, int T,
                          int K, int dilation, float *workspace);
void conv1d_forward_grouped(float *y, const float *x, const float *w, const float *bias, int B, int Cin, int Cout,
                            int T, int K, int dilation, float *workspace, int group);
void conv1d_backward_exact(float *dx,  // (B, Cin, T) += (dx_accumulate) or = ; or NULL
                           int dx_accumulate,
                           float *dw_tmp,    // (Cout, Cin, K) scratch
                           xsum_t dw,        // (Cout, Cin, K) +=
                           xsum_t dbias,     // (Cout) +=
                           const float *dy,  // (B, Cout, T)
                           const float *x,   // (B, Cin, T)
                           const float *w,   // (Cout, Cin, K)
                           int B, int Cin, int Cout, int T, int K, int dilation,
                           float *workspace,  // (conv1d_workspace_floats)
                           int group);

// Schedule selection (process-wide; for tuning and tests; conv1d_bf16 too). AUTO is what
// measured fastest: PER_SAMPLE for float32 operands on both GEMM backends, FOLDED for bf16 ones;
// see kernels/cpu/conv1d.c and docs/kernels.md.
typedef enum { CONV1D_AUTO = 0, CONV1D_FOLDED = 1, CONV1D_PER_SAMPLE = 2 } conv1d_algo;
void conv1d_set_algo(conv1d_algo algo);

// Plain reference (direct loops, explicit reflect indexing, double accumulation). Slow; for
// tests and for checking other backends.
void conv1d_forward_reference(float *y, const float *x, const float *w, const float *bias, int B, int Cin, int Cout,
                              int T, int K, int dilation);
