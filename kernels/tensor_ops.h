// Small layout and arithmetic helpers for assembling layers over (B, C, T) tensors:
// channel slices (Res2Net split, concatenation along channels), repeating (B, C) over time,
// per-sample transposes, copies and sums. All parallel over rows, deterministic.
#pragma once
#include <stddef.h>

// Copy C channels between (B, *, T) tensors with different channel counts:
// dst[b, c, t] = src[b, c, t] for c < C, where dst has dst_channels channels per sample and
// src has src_channels (pass pointers already offset to the first channel: base + c0 * T).
void channel_slice_copy(float *dst, int dst_channels, const float *src, int src_channels, int B, int C, int T);
// Same, accumulating: dst[b, c, t] += src[b, c, t].
void channel_slice_add(float *dst, int dst_channels, const float *src, int src_channels, int B, int C, int T);

// y[b, c, t] = s[b * ld + c] for c < C, t < T; y has y_channels channels per sample
// (pointer offset to the first channel written). Backward: ds[b * ld + c] += sum_t dy[b, c, t].
// The forward accepts ld = 0: every sample then gets the same vector s[0..C) (a bias shared by
// the batch). The backward does not (all samples would accumulate into the same ds entries).
void time_repeat_forward(float *y, int y_channels, const float *s, int ld, int B, int C, int T);
void time_repeat_backward(float *ds, int ld, const float *dy, int dy_channels, int B, int C, int T);

// Per-sample transpose (B, R, C) -> (B, C, R): y[(b * C + c) * R + r] = x[(b * R + r) * C + c].
// Turns time-major frames (B, T, F) into (B, F, T) and back. y must not alias x.
void batch_transpose(float *y, const float *x, int B, int R, int C);

// Rows by index (the sampled classes of a sharded head): dst[i, :] = src[idx[i], :] for i < n,
// and back, dst[idx[i], :] += src[i, :] (the indices distinct, so no two rows meet). E columns.
void rows_gather(float *dst, const float *src, const int *idx, int n, int E);
void rows_scatter_add(float *dst, const float *src, const int *idx, int n, int E);

void vec_acc(float *y, const float *a, size_t n);   // y += a
void vec_zero(float *y, size_t n);                  // y = 0
void vec_copy(float *y, const float *a, size_t n);  // y = a (no overlap)
