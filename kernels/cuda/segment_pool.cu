// CAM++'s segment context and mask over channels-last (B, T, C) maps (kernels/segment_pool.h).
// Every sum runs over time in order in float, as on the CPU (kernels/cpu/segment_pool.c), one
// thread per (sample, segment, channel) or (sample, channel), threads of consecutive channels
// reading consecutive floats of a frame; no atomics, so the result depends on the shape alone.
#include "kernels/cuda/launch.cuh"

namespace {

__device__ __forceinline__ int seg_end(int s, int T, int L) { return (s + 1) * L < T ? (s + 1) * L : T; }

// One thread per (b, s, c): the segment's sum of x in time order, its mean into ctx and the sum
// into sums (the utterance's total is made of them, as on the CPU).
__global__ void context_segments_kernel(float *ctx, float *sums, const float *x, int T, int C, int L, int S, size_t n) {
    SPK_GRID_LOOP(i, n) {
        const size_t bs = i / C, b = bs / S;
        const int c = (int)(i - bs * C), s = (int)(bs - b * S), e = seg_end(s, T, L);
        const float *r = x + (b * T + (size_t)s * L) * C + c;
        float acc = 0.0f;
        for (int t = s * L; t < e; t++, r += C) acc += *r;
        ctx[i] = acc * (1.0f / (float)(e - s * L));
        sums[i] = acc;
    }
}

// One thread per (b, c): the utterance's mean (its segments' sums in order) added to every segment.
__global__ void context_total_kernel(float *ctx, const float *sums, int T, int C, int S, size_t n) {
    SPK_GRID_LOOP(i, n) {
        const size_t b = i / C, o = b * S * C + (i - b * C);
        float total = 0.0f;
        for (int s = 0; s < S; s++) total += sums[o + (size_t)s * C];
        const float mean = total * (1.0f / (float)T);
        for (int s = 0; s < S; s++) ctx[o + (size_t)s * C] += mean;
    }
}

// One thread per (b, c): every frame's share of the utterance mean, sum_s dctx / T.
__global__ void context_mean_grad_kernel(float *mean, const float *dctx, int T, int C, int S, size_t n) {
    SPK_GRID_LOOP(i, n) {
        const size_t b = i / C, o = b * S * C + (i - b * C);
        float acc = 0.0f;
        for (int s = 0; s < S; s++) acc += dctx[o + (size_t)s * C];
        mean[i] = acc / (float)T;
    }
}

// One thread per element of dx: dx += mean + dctx of its segment / the segment's length.
__global__ void context_grad_kernel(float *dx, const float *mean, const float *dctx, int T, int C, int L, int S,
                                    size_t n) {
    SPK_GRID_LOOP(i, n) {
        const size_t bt = i / C, b = bt / T;
        const int c = (int)(i - bt * C), t = (int)(bt - b * T), s = t / L;
        const float inv = 1.0f / (float)(seg_end(s, T, L) - s * L);
        dx[i] += mean[b * C + c] + dctx[(b * S + s) * C + c] * inv;
    }
}

// y (row stride ldy) = x * the mask of the frame's segment, one thread per element of x.
__global__ void mask_forward_kernel(float *y, int ldy, const float *x, const float *mask, int T, int C, int L, int S,
                                    size_t n) {
    SPK_GRID_LOOP(i, n) {
        const size_t bt = i / C, b = bt / T;
        const int c = (int)(i - bt * C), t = (int)(bt - b * T);
        y[bt * ldy + c] = x[i] * mask[(b * S + t / L) * C + c];
    }
}

// One thread per (b, s, c): dx = dy * mask over the segment's frames, dmask = their sum of dy * x
// in time order.
__global__ void mask_backward_kernel(float *dx, float *dmask, const float *dy, int ldy, const float *x,
                                     const float *mask, int T, int C, int L, int S, size_t n) {
    SPK_GRID_LOOP(i, n) {
        const size_t bs = i / C, b = bs / S;
        const int c = (int)(i - bs * C), s = (int)(bs - b * S);
        const float m = mask[i];
        const int e = seg_end(s, T, L);
        float acc = 0.0f;
        for (int t = s * L; t < e; t++) {
            const size_t r = b * T + t;
            const float d = dy[r * ldy + c];
            dx[r * C + c] = d * m;
            acc += d * x[r * C + c];
        }
        dmask[i] = acc;
    }
}

int segments(int T, int L) { return (T + L - 1) / L; }

}  // namespace

extern "C" void segment_context_forward_cuda(float *ctx, const float *x, int B, int T, int C, int L) {
    SPK_ASSERT(B > 0 && T > 0 && C > 0 && L > 0);
    const int S = segments(T, L);
    const size_t n = (size_t)B * S * C;
    float *sums = (float *)spk_cuda_scratch(sizeof(float) * n);
    SPK_LAUNCH(context_segments_kernel, spk_grid(n), ctx, sums, x, T, C, L, S, n);
    SPK_LAUNCH(context_total_kernel, spk_grid((size_t)B * C), ctx, sums, T, C, S, (size_t)B * C);
}

extern "C" void segment_context_backward_cuda(float *dx, const float *dctx, int B, int T, int C, int L) {
    SPK_ASSERT(B > 0 && T > 0 && C > 0 && L > 0);
    const int S = segments(T, L);
    float *mean = (float *)spk_cuda_scratch(sizeof(float) * B * C);
    SPK_LAUNCH(context_mean_grad_kernel, spk_grid((size_t)B * C), mean, dctx, T, C, S, (size_t)B * C);
    const size_t n = (size_t)B * T * C;
    SPK_LAUNCH(context_grad_kernel, spk_grid(n), dx, mean, dctx, T, C, L, S, n);
}

extern "C" void segment_mask_forward_cuda(float *y, int ldy, const float *x, const float *mask, int B, int T, int C,
                                          int L) {
    SPK_ASSERT(B > 0 && T > 0 && C > 0 && L > 0 && ldy >= C);
    const size_t n = (size_t)B * T * C;
    SPK_LAUNCH(mask_forward_kernel, spk_grid(n), y, ldy, x, mask, T, C, L, segments(T, L), n);
}

extern "C" void segment_mask_backward_cuda(float *dx, float *dmask, const float *dy, int ldy, const float *x,
                                           const float *mask, int B, int T, int C, int L) {
    SPK_ASSERT(B > 0 && T > 0 && C > 0 && L > 0 && ldy >= C);
    const int S = segments(T, L);
    const size_t n = (size_t)B * S * C;
    SPK_LAUNCH(mask_backward_kernel, spk_grid(n), dx, dmask, dy, ldy, x, mask, T, C, L, S, n);
}
