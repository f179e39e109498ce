// Pooling and reweighting over the time axis of (B, C, T) activations. Backward functions
// ACCUMULATE into their gradient outputs; any gradient output may be NULL (not needed).
#pragma once

// ---- time mean: m[b,c] = mean_t x[b,c,t] ---------------------------------------------------
void time_mean_forward(float *m,        // (B, C)
                       const float *x,  // (B, C, T)
                       int B, int C, int T);
void time_mean_backward(float *dx,        // (B, C, T) += dm[b,c] / T
                        const float *dm,  // (B, C)
                        int B, int C, int T);

// ---- channel scale: y[b,c,t] = x[b,c,t] * s[b,c]  (squeeze-excitation output) -------------
// y may alias x in forward.
void channel_scale_forward(float *y,        // (B, C, T)
                           const float *x,  // (B, C, T)
                           const float *s,  // (B, C)
                           int B, int C, int T);
void channel_scale_backward(float *dx,        // (B, C, T) = dy * s (written: the scaled map's only use)
                            float *ds,        // (B, C) += sum_t dy * x
                            const float *dy,  // (B, C, T)
                            const float *x,   // (B, C, T)
                            const float *s,   // (B, C)
                            int B, int C, int T);

// ---- weighted statistics (attentive statistics pooling) ------------------------------------
// mean[b,c] = sum_t w x,  std[b,c] = sqrt(max(sum_t w (x - mean)^2, eps))
// (SpeechBrain _compute_statistics; eps = 1e-12 there). w == NULL means uniform w = 1/T
// (global context); then dw must be NULL. Backward adds to dx (the pooled frames have other
// gradients) and writes dw (the attention weights' only one). The gradient is exact for any w
// (no assumption that rows sum to 1); where the clamp is active (variance < eps) no gradient
// flows through it.
// mean/std/dmean/dstd are (B, C) blocks with row stride ld >= C (ld = C: packed; ld = 2C with
// std = mean + C: the [mean | std] concatenation of attentive statistics pooling).
void weighted_stats_forward(float *mean,     // (B, ld) first C of each row written
                            float *std,      // (B, ld)
                            const float *x,  // (B, C, T)
                            const float *w,  // (B, C, T) or NULL
                            int B, int C, int T, int ld, float eps);
void weighted_stats_backward(float *dx,           // (B, C, T) +=, or NULL
                             float *dw,           // (B, C, T) =, or NULL
                             const float *dmean,  // (B, ld) or NULL (no gradient)
                             const float *dstd,   // (B, ld) or NULL
                             const float *x,      // (B, C, T)
                             const float *w,      // (B, C, T) or NULL (uniform)
                             const float *mean,   // (B, ld) from forward
                             const float *std,    // (B, ld) from forward
                             int B, int C, int T, int ld, float eps);

// ---- attentive statistics: a softmax over time, then the statistics it weights --------------
// w = softmax over t of logits[b,c,:], then weighted_stats_forward(mean, std, x, w): the same
// bits as the two in turn, in one pass over the rows. w may alias logits.
void attentive_stats_forward(float *w,             // (B, C, T) the attention weights
                             float *mean,          // (B, ld)
                             float *std,           // (B, ld)
                             const float *logits,  // (B, C, T)
                             const float *x,       // (B, C, T)
                             int B, int C, int T, int ld, float eps);
// Its gradient: dlogits (written) is the softmax's backward of weighted_stats_backward's dw;
// dx gets weighted_stats_backward's dx, written (dx_accumulate 0: the frames' first gradient,
// no zeroing pass) or added. dlogits must not alias w or x.
void attentive_stats_backward(float *dx,           // (B, C, T)
                              float *dlogits,      // (B, C, T) =
                              const float *dmean,  // (B, ld) or NULL
                              const float *dstd,   // (B, ld) or NULL
                              const float *x,      // (B, C, T)
                              const float *w,      // (B, C, T) from forward
                              const float *mean,   // (B, ld) from forward
                              const float *std,    // (B, ld) from forward
                              int B, int C, int T, int ld, float eps, int dx_accumulate);

// ---- temporal statistics of channels-last maps (WeSpeaker's TSTP) --------------------------
// x (B, H, W, C) with W the time axis (kernels/conv2d.h's layout); per channel c and height h:
//   out[b, c*H + h]         = mean_w x[b,h,w,c]
//   out[b, C*H + c*H + h]   = sqrt(var_w x[b,h,w,c] + eps),  var unbiased (over W - 1; W > 1)
// which is torch.cat((x.mean(-1), torch.sqrt(torch.var(x, -1) + eps)), 1) of the (B, C, H, W)
// map flattened from dimension 1 (eps = 1e-7 in WeSpeaker). Backward ACCUMULATES into dx and
// takes the forward's output.
void tstp_forward(float *out,      // (B, 2*C*H)
                  const float *x,  // (B, H, W, C)
                  int B, int H, int W, int C, float eps);
void tstp_backward(float *dx,          // (B, H, W, C) +=
                   const float *dout,  // (B, 2*C*H)
                   const float *x,     // (B, H, W, C)
                   const float *out,   // (B, 2*C*H) from forward
                   int B, int H, int W, int C);
