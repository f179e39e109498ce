#include "conv_math.h"

#include <cmath>
#include <cstddef>

#include "tf32.h"

namespace spk_emu {
namespace {

float in(const ConvShape& g, float v) { return g.tf32 ? round_tf32(v) : v; }

size_t at(int a, int b, int c, int d, int B, int C, int D) { return (((size_t)a * B + b) * C + c) * D + d; }

// The filter tap (r, s) as stored: flipped for true convolution.
size_t tap(const ConvShape& g, int k, int c, int r, int s) {
    if (g.flip) r = g.r - 1 - r, s = g.s - 1 - s;
    return at(k, c, r, s, g.c, g.r, g.s);
}

void store(float& out, float acc, float alpha, float beta) {
    out = beta == 0.0f ? alpha * acc : alpha * acc + beta * out;
}

// The output position reading input position i through tap t, or -1.
int output_of(int i, int t, int pad, int stride, int dil, int outs) {
    const int q = i + pad - t * dil;
    if (q < 0 || q % stride) return -1;
    return q / stride < outs ? q / stride : -1;
}

}  // namespace

void conv_forward(const ConvShape& g, const float* x, const float* w, float* y, float alpha, float beta) {
    for (int n = 0; n < g.n; n++)
        for (int k = 0; k < g.k; k++)
            for (int oh = 0; oh < g.oh; oh++)
                for (int ow = 0; ow < g.ow; ow++) {
                    float acc = 0.0f;
                    for (int c = 0; c < g.c; c++)
                        for (int r = 0; r < g.r; r++) {
                            const int ih = oh * g.stride_h - g.pad_h + r * g.dil_h;
                            if (ih < 0 || ih >= g.h) continue;
                            for (int s = 0; s < g.s; s++) {
                                const int iw = ow * g.stride_w - g.pad_w + s * g.dil_w;
                                if (iw < 0 || iw >= g.w) continue;
                                acc = std::fma(in(g, x[at(n, c, ih, iw, g.c, g.h, g.w)]), in(g, w[tap(g, k, c, r, s)]),
                                               acc);
                            }
                        }
                    store(y[at(n, k, oh, ow, g.k, g.oh, g.ow)], acc, alpha, beta);
                }
}

void conv_backward_data(const ConvShape& g, const float* w, const float* dy, float* dx, float alpha, float beta) {
    for (int n = 0; n < g.n; n++)
        for (int c = 0; c < g.c; c++)
            for (int ih = 0; ih < g.h; ih++)
                for (int iw = 0; iw < g.w; iw++) {
                    float acc = 0.0f;
                    for (int k = 0; k < g.k; k++)
                        for (int r = 0; r < g.r; r++) {
                            const int oh = output_of(ih, r, g.pad_h, g.stride_h, g.dil_h, g.oh);
                            if (oh < 0) continue;
                            for (int s = 0; s < g.s; s++) {
                                const int ow = output_of(iw, s, g.pad_w, g.stride_w, g.dil_w, g.ow);
                                if (ow < 0) continue;
                                acc = std::fma(in(g, dy[at(n, k, oh, ow, g.k, g.oh, g.ow)]),
                                               in(g, w[tap(g, k, c, r, s)]), acc);
                            }
                        }
                    store(dx[at(n, c, ih, iw, g.c, g.h, g.w)], acc, alpha, beta);
                }
}

void conv_backward_filter(const ConvShape& g, const float* x, const float* dy, float* dw, float alpha, float beta,
                          bool batch_descending) {
    for (int k = 0; k < g.k; k++)
        for (int c = 0; c < g.c; c++)
            for (int r = 0; r < g.r; r++)
                for (int s = 0; s < g.s; s++) {
                    float acc = 0.0f;
                    for (int i = 0; i < g.n; i++) {
                        const int n = batch_descending ? g.n - 1 - i : i;
                        for (int oh = 0; oh < g.oh; oh++) {
                            const int ih = oh * g.stride_h - g.pad_h + r * g.dil_h;
                            if (ih < 0 || ih >= g.h) continue;
                            for (int ow = 0; ow < g.ow; ow++) {
                                const int iw = ow * g.stride_w - g.pad_w + s * g.dil_w;
                                if (iw < 0 || iw >= g.w) continue;
                                acc = std::fma(in(g, dy[at(n, k, oh, ow, g.k, g.oh, g.ow)]),
                                               in(g, x[at(n, c, ih, iw, g.c, g.h, g.w)]), acc);
                            }
                        }
                    }
                    store(dw[tap(g, k, c, r, s)], acc, alpha, beta);
                }
}

}  // namespace spk_emu
