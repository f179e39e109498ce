// The phases of a convolution's input gradient (kernels/cpu/conv2d_phases.h).
#include "kernels/cpu/conv2d_phases.h"

#include <stdint.h>
#include <string.h>

#define OFFSET_ALIGN 32  // elements: each phase's output starts on a cache line (64 bytes or more)

// One dimension of a phase: its taps, the forward convolution's paddings and dilation, and its
// output size.
typedef struct {
    int taps, top, step, pad_lo, pad_hi, dil, out;
} phase_dim_t;

// Phase r of a dimension of input size n and output size on (kernel K, padding P, stride S,
// dilation D, not both above 1): 0 where its forward convolution would need negative padding.
static int phase_dim(phase_dim_t *d, int r, int n, int on, int K, int P, int S, int D) {
    d->taps = 0, d->top = -1, d->pad_lo = d->pad_hi = 0;
    d->step = S, d->dil = S == 1 ? D : 1;  // taps S kernel rows apart meet dy's rows one apart
    d->out = (n - r + S - 1) / S;
    if (d->out <= 0) return d->out = 0, 1;
    for (int k = K - 1; k >= 0; k--)
        if (((r + P - D * k) % S + S) % S == 0) {
            if (d->top < 0) d->top = k;
            d->taps++;
        }
    if (!d->taps) return 1;
    const int first = (r + P - D * d->top) / S;  // dy's row for output 0 and tap 0, less 0
    const int last = first + (d->taps - 1) * d->dil;
    d->pad_lo = -first;
    d->pad_hi = (d->out - 1) + last - (on - 1);
    return d->pad_lo >= 0 && d->pad_hi >= 0;
}

static size_t round_up(size_t n) { return (n + OFFSET_ALIGN - 1) / OFFSET_ALIGN * OFFSET_ALIGN; }

int conv2d_phases_of(conv2d_phase_t *ph, const conv2d_shape_t *s) {
    if (s->SH > 2 || s->SW > 2 || (s->SH > 1 && s->DH > 1) || (s->SW > 1 && s->DW > 1)) return 0;
    size_t offset = 0;
    int n = 0;
    for (int rh = 0; rh < s->SH; rh++)
        for (int rw = 0; rw < s->SW; rw++, n++) {
            phase_dim_t h, w;
            if (!phase_dim(&h, rh, s->H, conv2d_out_h(s), s->KH, s->PH, s->SH, s->DH) ||
                !phase_dim(&w, rw, s->W, conv2d_out_w(s), s->KW, s->PW, s->SW, s->DW))
                return 0;
            const int any = h.taps && w.taps;
            ph[n] = (conv2d_phase_t){.out_h = h.out,
                                     .out_w = w.out,
                                     .taps_h = any ? h.taps : 0,
                                     .taps_w = any ? w.taps : 0,
                                     .top_h = h.top,
                                     .top_w = w.top,
                                     .step_h = h.step,
                                     .step_w = w.step,
                                     .pad_t = h.pad_lo,
                                     .pad_l = w.pad_lo,
                                     .pad_b = h.pad_hi,
                                     .pad_r = w.pad_hi,
                                     .dil_h = h.dil,
                                     .dil_w = w.dil,
                                     .offset = offset};
            offset = round_up(offset + (size_t)s->B * h.out * w.out * s->Cin);
        }
    return n;
}

size_t conv2d_phases_size(const conv2d_phase_t *ph, int count, const conv2d_shape_t *s) {
    const conv2d_phase_t *l = &ph[count - 1];
    return l->offset + (size_t)s->B * l->out_h * l->out_w * s->Cin;
}

void conv2d_phase_turn(spk_bf16 *wt, const spk_bf16 *w, const conv2d_shape_t *s, const conv2d_phase_t *ph) {
    const int th = ph->taps_h, tw = ph->taps_w, pairs = s->Cout * s->Cin, taps = s->KH * s->KW;
    const int flip = th * tw == taps;  // every tap (stride 1): the kernel reversed
#pragma omp parallel for schedule(static)
    for (int i = 0; i < pairs; i++) {
        const spk_bf16 *from = w + (size_t)i * taps;
        spk_bf16 *to = wt + (size_t)i * th * tw;
        if (flip) {
            for (int k = 0; k < taps; k++) to[k] = from[taps - 1 - k];
            continue;
        }
        for (int jh = 0; jh < th; jh++)
            for (int jw = 0; jw < tw; jw++)
                to[jh * tw + jw] = from[(ph->top_h - ph->step_h * jh) * s->KW + ph->top_w - ph->step_w * jw];
    }
}

int conv2d_phase_turns(const conv2d_phase_t *ph, const conv2d_shape_t *s) {
    return s->KH * s->KW > 1 || ph->taps_h * ph->taps_w != 1;
}

// n elements of one row: dx = or += part (NULL: zero); float32 (elem 4) or bf16 (written alone).
static inline void span(void *dx, const void *part, int accumulate, size_t n, size_t elem) {
    if (!part) {
        if (!accumulate) memset(dx, 0, n * elem);
    } else if (accumulate) {
        float *restrict d = dx;
        const float *restrict f = part;
#pragma omp simd
        for (size_t c = 0; c < n; c++) d[c] += f[c];
    } else
        memcpy(dx, part, n * elem);
}

void conv2d_phases_interleave(void *dx, int accumulate, const void *parts, const conv2d_phase_t *ph,
                              const conv2d_shape_t *s, size_t elem) {
    const int C = s->Cin;
#pragma omp parallel for schedule(static)
    for (int row = 0; row < s->B * s->H; row++) {
        const int b = row / s->H, h = row % s->H;
        // a row of dx takes its pixels from SW phases in turn (one phase: the whole row at once)
        const int run = s->SW == 1 ? s->W : 1;
        for (int x = 0; x < s->W; x += run) {
            const conv2d_phase_t *p = &ph[(h % s->SH) * s->SW + x % s->SW];
            const size_t to = ((size_t)row * s->W + x) * C;
            const size_t from = p->offset + (((size_t)b * p->out_h + h / s->SH) * p->out_w + x / s->SW) * C;
            span((char *)dx + to * elem, p->taps_h ? (const char *)parts + from * elem : NULL, accumulate,
                 (size_t)run * C, elem);
        }
    }
}
