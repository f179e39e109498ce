#include "conv_math.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "tf32.h"

namespace spk_emu {
namespace {

// ---- element access: float, or bfloat16 widened on load and rounded on store -------------------
float load(const float* p, size_t i) { return p[i]; }
float load(const uint16_t* p, size_t i) {
    const uint32_t u = (uint32_t)p[i] << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
void put(float* p, size_t i, float v) { p[i] = v; }
void put(uint16_t* p, size_t i, float v) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        u |= 0x400000u;  // NaN stays a quiet NaN
    else
        u += 0x7fffu + ((u >> 16) & 1u);  // to nearest, ties to even
    p[i] = (uint16_t)(u >> 16);
}

float in(const ConvShape& g, float v) { return g.tf32 ? round_tf32(v) : v; }

// Offsets of an element (n, c, h, w) of a tensor with C channels of H x W, in its layout.
size_t at(bool nhwc, int n, int c, int h, int w, int C, int H, int W) {
    return nhwc ? (((size_t)n * H + h) * W + w) * C + c : (((size_t)n * C + c) * H + h) * W + w;
}
size_t x_at(const ConvShape& g, int n, int c, int h, int w) { return at(g.x_nhwc, n, c, h, w, g.c, g.h, g.w); }
size_t y_at(const ConvShape& g, int n, int k, int h, int w) { return at(g.y_nhwc, n, k, h, w, g.k, g.oh, g.ow); }

// The filter tap (r, s) as stored: flipped for true convolution.
size_t tap(const ConvShape& g, int k, int c, int r, int s) {
    if (g.flip) r = g.r - 1 - r, s = g.s - 1 - s;
    return at(g.w_nhwc, k, c, r, s, g.c, g.r, g.s);
}

template <typename E>
void store(E* out, size_t i, float acc, float alpha, float beta) {
    put(out, i, beta == 0.0f ? alpha * acc : alpha * acc + beta * load(out, i));
}

// The output position reading input position i through tap t, or -1.
int output_of(int i, int t, int pad, int stride, int dil, int outs) {
    const int q = i + pad - t * dil;
    if (q < 0 || q % stride) return -1;
    return q / stride < outs ? q / stride : -1;
}

template <typename E>
void forward(const ConvShape& g, const E* x, const E* w, E* y, float alpha, float beta) {
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
                                acc = std::fma(in(g, load(x, x_at(g, n, c, ih, iw))),
                                               in(g, load(w, tap(g, k, c, r, s))), acc);
                            }
                        }
                    store(y, y_at(g, n, k, oh, ow), acc, alpha, beta);
                }
}

template <typename E>
void backward_data(const ConvShape& g, const E* w, const E* dy, E* dx, float alpha, float beta) {
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
                                acc = std::fma(in(g, load(dy, y_at(g, n, k, oh, ow))),
                                               in(g, load(w, tap(g, k, c, r, s))), acc);
                            }
                        }
                    store(dx, x_at(g, n, c, ih, iw), acc, alpha, beta);
                }
}

template <typename E>
void backward_filter(const ConvShape& g, const E* x, const E* dy, E* dw, float alpha, float beta,
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
                                acc = std::fma(in(g, load(dy, y_at(g, n, k, oh, ow))),
                                               in(g, load(x, x_at(g, n, c, ih, iw))), acc);
                            }
                        }
                    }
                    store(dw, tap(g, k, c, r, s), acc, alpha, beta);
                }
}

size_t elem(const ConvShape& g) { return g.bf16 ? sizeof(uint16_t) : sizeof(float); }

}  // namespace

size_t conv_x_bytes(const ConvShape& g) { return (size_t)g.n * g.c * g.h * g.w * elem(g); }
size_t conv_w_bytes(const ConvShape& g) { return (size_t)g.k * g.c * g.r * g.s * elem(g); }
size_t conv_y_bytes(const ConvShape& g) { return (size_t)g.n * g.k * g.oh * g.ow * elem(g); }

void conv_forward(const ConvShape& g, const void* x, const void* w, void* y, float alpha, float beta) {
    if (g.bf16)
        forward(g, (const uint16_t*)x, (const uint16_t*)w, (uint16_t*)y, alpha, beta);
    else
        forward(g, (const float*)x, (const float*)w, (float*)y, alpha, beta);
}

void conv_backward_data(const ConvShape& g, const void* w, const void* dy, void* dx, float alpha, float beta) {
    if (g.bf16)
        backward_data(g, (const uint16_t*)w, (const uint16_t*)dy, (uint16_t*)dx, alpha, beta);
    else
        backward_data(g, (const float*)w, (const float*)dy, (float*)dx, alpha, beta);
}

void conv_backward_filter(const ConvShape& g, const void* x, const void* dy, void* dw, float alpha, float beta,
                          bool batch_descending) {
    if (g.bf16)
        backward_filter(g, (const uint16_t*)x, (const uint16_t*)dy, (uint16_t*)dw, alpha, beta, batch_descending);
    else
        backward_filter(g, (const float*)x, (const float*)dy, (float*)dw, alpha, beta, batch_descending);
}

}  // namespace spk_emu
