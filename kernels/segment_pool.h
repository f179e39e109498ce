// CAM++'s context-aware masking over channels-last (B, T, C) activations: the context of every
// frame is the utterance's mean plus the mean of its segment of L frames (segments from the
// first frame, the last one shorter: S = ceil(T / L) segments, each averaged over the frames it
// has, as avg_pool1d(kernel L, stride L, ceil_mode) does), and a mask per segment scales the
// local convolution's output. Deterministic: every sum runs over time in order (float), one
// thread per (sample, block of channels). Backward functions as stated; nothing aliases.
#pragma once

// ctx[b, s, c] = mean_t x[b, t, c] + mean_{t in segment s} x[b, t, c]   (ctx: (B, S, C))
void segment_context_forward(float *ctx, const float *x, int B, int T, int C, int L);
// dx[b, t, c] += sum_s dctx[b, s, c] / T + dctx[b, s(t), c] / |s(t)|
void segment_context_backward(float *dx, const float *dctx, int B, int T, int C, int L);

// y[b, t, c] = x[b, t, c] * mask[b, s(t), c]; y has row stride ldy (a slice of a wider buffer),
// x and mask are packed ((B, T, C) and (B, S, C)).
void segment_mask_forward(float *y, int ldy, const float *x, const float *mask, int B, int T, int C, int L);
// From dy (row stride ldy): dx = dy * mask (overwritten) and dmask[b, s, c] = sum_{t in s}
// dy * x (overwritten).
void segment_mask_backward(float *dx, float *dmask, const float *dy, int ldy, const float *x, const float *mask, int B,
                           int T, int C, int L);
