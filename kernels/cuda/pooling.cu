// Time pooling and reweighting over (B, C, T) (kernels/pooling.h). Row reductions run one block
// per (b, c) row: each thread sums a fixed strided subset of the T positions (compensated fp32,
// launch.cuh), then a fixed tree (deterministic, no atomics); results are rounded to float like
// the CPU's. The TSTP of channels-last maps sums along a strided axis instead: one thread per
// output, the time positions in order (below).
#include "kernels/cuda/launch.cuh"

namespace {

__global__ void time_mean_fwd_kernel(float *m, const float *x, int T) {
    __shared__ spk_fsum sh[SPK_CUDA_THREADS];
    const float *r = x + (size_t)blockIdx.x * T;
    spk_fsum acc = spk_fsum_zero();
    SPK_ROW_LOOP(t, T) spk_fsum_add(&acc, r[t]);
    const float s = spk_fsum_value(spk_block_sum(acc, sh));
    if (threadIdx.x == 0) m[blockIdx.x] = s / (float)T;
}

__global__ void time_mean_bwd_kernel(float *dx, const float *dm, size_t n, int T) {
    SPK_GRID_LOOP(i, n) dx[i] += dm[i / T] / (float)T;
}

__global__ void channel_scale_fwd_kernel(float *y, const float *x, const float *s, size_t n, int T) {
    SPK_GRID_LOOP(i, n) y[i] = x[i] * s[i / T];
}

// one block per row: ds[row] += sum_t dy * x; dx = dy * s
__global__ void channel_scale_bwd_kernel(float *dx, float *ds, const float *dy, const float *x, const float *s, int T) {
    __shared__ spk_fsum sh[SPK_CUDA_THREADS];
    const size_t row = blockIdx.x;
    const float *g = dy + row * T;
    if (ds) {
        const float *r = x + row * T;
        spk_fsum acc = spk_fsum_zero();
        SPK_ROW_LOOP(t, T) spk_fsum_add(&acc, g[t] * r[t]);
        const float tot = spk_fsum_value(spk_block_sum(acc, sh));
        if (threadIdx.x == 0) ds[row] += tot;
    }
    if (dx) {
        const float sc = s[row];
        float *o = dx + row * T;
        SPK_ROW_LOOP(t, T) o[t] = g[t] * sc;
    }
}

// mean = sum_t w x, std = sqrt(max(sum_t w (x - mean)^2, eps)) of this block's row; wr == NULL:
// w = 1/T.
__device__ void wstats_row(float *mean, float *std, const float *xr, const float *wr, int T, float eps,
                           spk_fsum *sh) {
    const float wu = 1.0f / (float)T;
    spk_fsum acc = spk_fsum_zero();
    SPK_ROW_LOOP(t, T) spk_fsum_add(&acc, (wr ? wr[t] : wu) * xr[t]);
    const float mu = spk_fsum_value(spk_block_sum(acc, sh));
    acc = spk_fsum_zero();
    SPK_ROW_LOOP(t, T) {
        const float d = xr[t] - mu;
        spk_fsum_add(&acc, (wr ? wr[t] : wu) * d * d);
    }
    const float var = spk_fsum_value(spk_block_sum(acc, sh));
    if (threadIdx.x == 0) {
        *mean = mu;
        *std = sqrtf(var > eps ? var : eps);
    }
}

__global__ void wstats_fwd_kernel(float *mean, float *std, const float *x, const float *w, int C, int T, int ld,
                                  float eps) {
    __shared__ spk_fsum sh[SPK_CUDA_THREADS];
    const size_t row = blockIdx.x;
    const size_t o = row / C * ld + row % C;
    wstats_row(mean + o, std + o, x + row * T, w ? w + row * T : nullptr, T, eps, sh);
}

// The gradient of wstats_row (see the CPU's row_stats_grad for the derivation):
// a = dmean - 2 gv s1 with s1 = sum w (x - mu), gv = dstd / (2 std) where var >= eps, else 0;
// then dx = w (a + 2 gv (x - mu)) and dw = x a + gv (x - mu)^2.
struct wstats_grad {
    float a, gv;
    // a frame's gradients, of its weight wt and its deviation d = x - mu
    __device__ float dx(float wt, float d) const { return wt * (a + 2.0f * gv * d); }
    __device__ float dw(float x, float d) const { return x * a + gv * d * d; }
};

__device__ wstats_grad wstats_row_grad(const float *xr, const float *wr, int T, float mu, float gm, const float *dstd,
                                       float std, float eps, spk_fsum *sh) {
    const float wu = 1.0f / (float)T;
    spk_fsum av = spk_fsum_zero(), a1 = spk_fsum_zero();
    SPK_ROW_LOOP(t, T) {
        const float wt = wr ? wr[t] : wu, d = xr[t] - mu;
        spk_fsum_add(&av, wt * d * d);
        spk_fsum_add(&a1, wt * d);
    }
    const float var = spk_fsum_value(spk_block_sum(av, sh));
    const float s1 = spk_fsum_value(spk_block_sum(a1, sh));
    const float gv = (dstd && var >= eps) ? *dstd * 0.5f / std : 0.0f;
    return {gm - 2.0f * gv * s1, gv};
}

__global__ void wstats_bwd_kernel(float *dx, float *dw, const float *dmean, const float *dstd, const float *x,
                                  const float *w, const float *mean, const float *std, int C, int T, int ld,
                                  float eps) {
    __shared__ spk_fsum sh[SPK_CUDA_THREADS];
    const size_t row = blockIdx.x;
    const size_t o = row / C * ld + row % C;
    const float *xr = x + row * T;
    const float *wr = w ? w + row * T : nullptr;
    const float wu = 1.0f / (float)T, mu = mean[o];
    const wstats_grad g = wstats_row_grad(xr, wr, T, mu, dmean ? dmean[o] : 0.0f, dstd ? dstd + o : nullptr, std[o],
                                          eps, sh);
    if (dx) {
        float *r = dx + row * T;
        SPK_ROW_LOOP(t, T) r[t] += g.dx(wr ? wr[t] : wu, xr[t] - mu);
    }
    if (dw) {
        float *r = dw + row * T;
        SPK_ROW_LOOP(t, T) r[t] = g.dw(xr[t], xr[t] - mu);
    }
}

// w = softmax of the row's logits (w may alias them: all reads end before the first write),
// then the statistics it weights; each thread reads back the weights it wrote.
__global__ void attentive_stats_fwd_kernel(float *w, float *mean, float *std, const float *logits, const float *x,
                                           int C, int T, int ld, float eps) {
    __shared__ float shf[SPK_CUDA_THREADS];
    __shared__ spk_fsum shd[SPK_CUDA_THREADS];
    const size_t row = blockIdx.x;
    const size_t o = row / C * ld + row % C;
    const float *r = logits + row * T;
    float mx = -INFINITY;
    SPK_ROW_LOOP(t, T) mx = fmaxf(mx, r[t]);
    mx = spk_block_max(mx, shf);
    spk_block_softmax_row(w + row * T, r, T, mx, shd);
    wstats_row(mean + o, std + o, x + row * T, w + row * T, T, eps, shd);
}

// The weights' gradient gw = x a + gv (x - mu)^2 through the softmax: dlogits = w (gw - sum_t gw w);
// dx = w (a + 2 gv (x - mu)), written or added.
__global__ void attentive_stats_bwd_kernel(float *dx, float *dlogits, const float *dmean, const float *dstd,
                                           const float *x, const float *w, const float *mean, const float *std, int C,
                                           int T, int ld, float eps, int dx_accumulate) {
    __shared__ spk_fsum sh[SPK_CUDA_THREADS];
    const size_t row = blockIdx.x;
    const size_t o = row / C * ld + row % C;
    const float *xr = x + row * T, *wr = w + row * T;
    const float mu = mean[o];
    const wstats_grad g = wstats_row_grad(xr, wr, T, mu, dmean ? dmean[o] : 0.0f, dstd ? dstd + o : nullptr, std[o],
                                          eps, sh);
    float *dl = dlogits + row * T, *r = dx + row * T;
    spk_fsum acc = spk_fsum_zero();
    SPK_ROW_LOOP(t, T) {
        const float d = xr[t] - mu, gw = g.dw(xr[t], d), gx = g.dx(wr[t], d);
        dl[t] = gw;
        spk_fsum_add(&acc, gw * wr[t]);
        r[t] = dx_accumulate ? r[t] + gx : gx;
    }
    const float s = spk_fsum_value(spk_block_sum(acc, sh));
    SPK_ROW_LOOP(t, T) dl[t] = wr[t] * (dl[t] - s);
}

// ---- TSTP over channels-last maps ---------------------------------------------------------
// One thread per (b, h, c), threads of consecutive channels reading consecutive floats of each
// time step; W (a few dozen frames at the encoder's end) summed in order, compensated fp32: the
// mean, then the squared deviations from it.
__global__ void tstp_fwd_kernel(float *out, const float *x, int H, int W, int C, size_t n, float eps) {
    SPK_GRID_LOOP(i, n) {
        const size_t c = i % C, bh = i / C, b = bh / H, h = bh - b * H;
        const float *r = x + bh * W * C + c;
        spk_fsum acc = spk_fsum_zero();
        for (int w = 0; w < W; w++) spk_fsum_add(&acc, r[(size_t)w * C]);
        const float mu = (float)(spk_fsum_double(acc) / W);
        acc = spk_fsum_zero();
        for (int w = 0; w < W; w++) {
            const float d = r[(size_t)w * C] - mu;
            spk_fsum_add(&acc, d * d);
        }
        const size_t P = (size_t)C * H, o = b * 2 * P + c * H + h;
        out[o] = mu;
        out[o + P] = sqrtf((float)(spk_fsum_double(acc) / (W - 1)) + eps);
    }
}

// dx += dmean / W + dstd (x - mean) / ((W - 1) std) (the mean's own change cancels), one thread
// per element of dx.
__global__ void tstp_bwd_kernel(float *dx, const float *dout, const float *x, const float *out, int H, int W, int C,
                                size_t n) {
    SPK_GRID_LOOP(j, n) {
        const size_t c = j % C, bh = j / C / W, b = bh / H, h = bh - b * H;
        const size_t P = (size_t)C * H, i = b * 2 * P + c * H + h;
        const float gm = dout[i] / (float)W, gs = dout[P + i] / ((float)(W - 1) * out[P + i]);
        dx[j] += gm + gs * (x[j] - out[i]);
    }
}

}  // namespace

extern "C" void tstp_forward_cuda(float *out, const float *x, int B, int H, int W, int C, float eps) {
    SPK_ASSERT(B > 0 && H > 0 && W > 1 && C > 0);
    const size_t n = (size_t)B * H * C;
    SPK_LAUNCH(tstp_fwd_kernel, spk_grid(n), out, x, H, W, C, n, eps);
}

extern "C" void tstp_backward_cuda(float *dx, const float *dout, const float *x, const float *out, int B, int H, int W,
                                   int C) {
    SPK_ASSERT(B > 0 && H > 0 && W > 1 && C > 0);
    const size_t n = (size_t)B * H * W * C;
    SPK_LAUNCH(tstp_bwd_kernel, spk_grid(n), dx, dout, x, out, H, W, C, n);
}

extern "C" void time_mean_forward_cuda(float *m, const float *x, int B, int C, int T) {
    SPK_ASSERT(B > 0 && C > 0 && T > 0);
    SPK_LAUNCH(time_mean_fwd_kernel, spk_rows_grid((size_t)B * C), m, x, T);
}

extern "C" void time_mean_backward_cuda(float *dx, const float *dm, int B, int C, int T) {
    SPK_ASSERT(B > 0 && C > 0 && T > 0);
    const size_t n = (size_t)B * C * T;
    SPK_LAUNCH(time_mean_bwd_kernel, spk_grid(n), dx, dm, n, T);
}

extern "C" void channel_scale_forward_cuda(float *y, const float *x, const float *s, int B, int C, int T) {
    SPK_ASSERT(B > 0 && C > 0 && T > 0);
    const size_t n = (size_t)B * C * T;
    SPK_LAUNCH(channel_scale_fwd_kernel, spk_grid(n), y, x, s, n, T);
}

extern "C" void channel_scale_backward_cuda(float *dx, float *ds, const float *dy, const float *x, const float *s,
                                            int B, int C, int T) {
    SPK_ASSERT(B > 0 && C > 0 && T > 0);
    if (!dx && !ds) return;
    SPK_LAUNCH(channel_scale_bwd_kernel, spk_rows_grid((size_t)B * C), dx, ds, dy, x, s, T);
}

extern "C" void weighted_stats_forward_cuda(float *mean, float *std, const float *x, const float *w, int B, int C,
                                            int T, int ld, float eps) {
    SPK_ASSERT(B > 0 && C > 0 && T > 0 && ld >= C);
    SPK_LAUNCH(wstats_fwd_kernel, spk_rows_grid((size_t)B * C), mean, std, x, w, C, T, ld, eps);
}

extern "C" void weighted_stats_backward_cuda(float *dx, float *dw, const float *dmean, const float *dstd,
                                             const float *x, const float *w, const float *mean, const float *std, int B,
                                             int C, int T, int ld, float eps) {
    SPK_ASSERT(B > 0 && C > 0 && T > 0 && ld >= C);
    SPK_ASSERT(w != NULL || dw == NULL);
    if (!dx && !dw) return;
    SPK_LAUNCH(wstats_bwd_kernel, spk_rows_grid((size_t)B * C), dx, dw, dmean, dstd, x, w, mean, std, C, T, ld, eps);
}

extern "C" void attentive_stats_forward_cuda(float *w, float *mean, float *std, const float *logits, const float *x,
                                             int B, int C, int T, int ld, float eps) {
    SPK_ASSERT(B > 0 && C > 0 && T > 0 && ld >= C);
    SPK_LAUNCH(attentive_stats_fwd_kernel, spk_rows_grid((size_t)B * C), w, mean, std, logits, x, C, T, ld, eps);
}
extern "C" void attentive_stats_backward_cuda(float *dx, float *dlogits, const float *dmean, const float *dstd,
                                              const float *x, const float *w, const float *mean, const float *std,
                                              int B, int C, int T, int ld, float eps, int dx_accumulate) {
    SPK_ASSERT(B > 0 && C > 0 && T > 0 && ld >= C && dx && dlogits);
    SPK_LAUNCH(attentive_stats_bwd_kernel, spk_rows_grid((size_t)B * C), dx, dlogits, dmean, dstd, x, w, mean, std, C,
               T, ld, eps, dx_accumulate);
}
