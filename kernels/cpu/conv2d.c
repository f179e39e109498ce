// Conv2d over channels-last activations (kernels/conv2d.h) on the CPU: oneDNN's direct
// convolutions where oneDNN is built in and chosen as the GEMM backend (kernels/cpu/conv2d_dnnl.c,
// measured 2.5-5x faster than im2col here, docs/kernels.md), else im2col + SGEMM per sample;
// loops of our own for one input channel, where oneDNN is slow; 1x1 layers as GEMMs over all the
// rows, whose weight gradient outruns oneDNN's convolution everywhere. Winograd where asked for:
// ours (kernels/cpu/conv2d_winograd.c) on AVX-512 and where oneDNN has none, in both modes, else
// oneDNN's (an AVX-512 CPU running a portable build); 3x3 layers that stride
// the height by ours where oneDNN's kernels are AVX2's (kernels/cpu/conv2d_taps.c). The bias
// gradient is ours either way: channel sums over the output rows.
#include "kernels/conv2d.h"

#include <omp.h>
#include <string.h>

#include "kernels/base/spk_assert.h"
#include "kernels/cpu/conv2d_dnnl.h"
#include "kernels/cpu/conv2d_dnnl_fixed.h"
#include "kernels/cpu/conv2d_pointwise.h"
#include "kernels/cpu/conv2d_taps.h"
#include "kernels/cpu/conv2d_winograd.h"
#include "kernels/cpu/group_terms.h"
#include "kernels/cpu/rows.h"
#include "kernels/gemm.h"

static void check_shape(const conv2d_shape_t *s) { SPK_ASSERT(conv2d_shape_ok(s)); }

// ---- im2col + SGEMM ------------------------------------------------------------------------------
// With K = KH*KW*Cin and P = OH*OW: a sample's patches col (P, K), col[p, (r*KW + s)*Cin + c] =
// x[b, i*SH - PH + r*DH, j*SW - PW + s*DW, c] (0 outside), and the weights as wr (Cout, K) in the
// same order, so y_b (P, Cout) = col wr^T, dcol = dy_b wr, dwr += dy_b^T col.
// Workspace: [wr (Cout, K)][dwr (Cout, K)][one col per thread].

static size_t patch_len(const conv2d_shape_t *s) { return (size_t)s->KH * s->KW * s->Cin; }
static size_t patches(const conv2d_shape_t *s) { return (size_t)conv2d_out_h(s) * conv2d_out_w(s); }

static size_t im2col_floats(const conv2d_shape_t *s) {
    return 2 * (size_t)s->Cout * patch_len(s) + (size_t)omp_get_max_threads() * patches(s) * patch_len(s);
}

// (Cout, Cin, KH, KW) -> (Cout, KH, KW, Cin), and back (added).
static void weights_to_rows(float *wr, const float *w, const conv2d_shape_t *s) {
    for (int o = 0; o < s->Cout; o++)
        for (int c = 0; c < s->Cin; c++)
            for (int r = 0; r < s->KH * s->KW; r++)
                wr[((size_t)o * s->KH * s->KW + r) * s->Cin + c] = w[((size_t)o * s->Cin + c) * s->KH * s->KW + r];
}

static void rows_add_to_weights(float *w, const float *wr, const conv2d_shape_t *s) {
    for (int o = 0; o < s->Cout; o++)
        for (int c = 0; c < s->Cin; c++)
            for (int r = 0; r < s->KH * s->KW; r++)
                w[((size_t)o * s->Cin + c) * s->KH * s->KW + r] += wr[((size_t)o * s->KH * s->KW + r) * s->Cin + c];
}

// The input row read by output row i through tap r, or -1 outside.
static int source(int i, int r, int stride, int pad, int dil, int size) {
    const int v = i * stride - pad + r * dil;
    return v >= 0 && v < size ? v : -1;
}

static void im2col(float *col, const float *xb, const conv2d_shape_t *s) {
    const int OH = conv2d_out_h(s), OW = conv2d_out_w(s), C = s->Cin;
    for (int i = 0; i < OH; i++)
        for (int j = 0; j < OW; j++) {
            float *p = col + ((size_t)i * OW + j) * patch_len(s);
            for (int r = 0; r < s->KH; r++)
                for (int q = 0; q < s->KW; q++, p += C) {
                    const int u = source(i, r, s->SH, s->PH, s->DH, s->H), v = source(j, q, s->SW, s->PW, s->DW, s->W);
                    if (u < 0 || v < 0)
                        memset(p, 0, sizeof(float) * C);
                    else
                        memcpy(p, xb + ((size_t)u * s->W + v) * C, sizeof(float) * C);
                }
        }
}

// dxb += the patches' gradients, each folded back onto the input position it was copied from.
static void col2im_add(float *dxb, const float *col, const conv2d_shape_t *s) {
    const int OH = conv2d_out_h(s), OW = conv2d_out_w(s), C = s->Cin;
    for (int i = 0; i < OH; i++)
        for (int j = 0; j < OW; j++) {
            const float *p = col + ((size_t)i * OW + j) * patch_len(s);
            for (int r = 0; r < s->KH; r++)
                for (int q = 0; q < s->KW; q++, p += C) {
                    const int u = source(i, r, s->SH, s->PH, s->DH, s->H), v = source(j, q, s->SW, s->PW, s->DW, s->W);
                    if (u < 0 || v < 0) continue;
                    float *d = dxb + ((size_t)u * s->W + v) * C;
                    for (int c = 0; c < C; c++) d[c] += p[c];
                }
        }
}

static void im2col_forward(float *y, const float *x, const float *w, const float *bias, const conv2d_shape_t *s,
                           float *ws) {
    const size_t K = patch_len(s), P = patches(s), xs = (size_t)s->H * s->W * s->Cin;
    float *wr = ws, *cols = ws + 2 * (size_t)s->Cout * K;
    weights_to_rows(wr, w, s);
#pragma omp parallel for schedule(dynamic, 1)
    for (int b = 0; b < s->B; b++) {
        float *col = cols + (size_t)omp_get_thread_num() * P * K;
        float *yb = y + (size_t)b * P * s->Cout;
        im2col(col, x + b * xs, s);
        spk_sgemm_serial('N', 'T', (int)P, s->Cout, (int)K, 1.0f, col, (int)K, wr, (int)K, 0.0f, yb, s->Cout);
        if (bias)
            for (size_t p = 0; p < P; p++)
                for (int o = 0; o < s->Cout; o++) yb[p * s->Cout + o] += bias[o];
    }
}

static void im2col_backward(float *dx, int accumulate, float *dw, const float *dy, const float *x, const float *w,
                            const conv2d_shape_t *s, float *ws) {
    const size_t K = patch_len(s), P = patches(s), xs = (size_t)s->H * s->W * s->Cin;
    float *wr = ws, *dwr = ws + (size_t)s->Cout * K, *cols = ws + 2 * (size_t)s->Cout * K;
    if (dx) {
        weights_to_rows(wr, w, s);
#pragma omp parallel for schedule(dynamic, 1)
        for (int b = 0; b < s->B; b++) {
            float *col = cols + (size_t)omp_get_thread_num() * P * K;
            float *dxb = dx + b * xs;
            if (!accumulate) memset(dxb, 0, sizeof(float) * xs);
            spk_sgemm_serial('N', 'N', (int)P, (int)K, s->Cout, 1.0f, dy + (size_t)b * P * s->Cout, s->Cout, wr, (int)K,
                             0.0f, col, (int)K);
            col2im_add(dxb, col, s);
        }
    }
    if (dw) {  // samples in order, each GEMM threaded
        for (int b = 0; b < s->B; b++) {
            im2col(cols, x + b * xs, s);
            spk_sgemm('T', 'N', s->Cout, (int)K, (int)P, 1.0f, dy + (size_t)b * P * s->Cout, s->Cout, cols, (int)K,
                      b ? 1.0f : 0.0f, dwr, (int)K);
        }
        rows_add_to_weights(dw, dwr, s);
    }
}

// ---- one input channel (a 2-D encoder's first layer) -----------------------------------------------
// oneDNN 2.6 reaches 55 GFLOP/s forward and 120 backward-weights on ResNet34's first layer (1 -> 32
// channels, 3x3, 80 x 200) where its other layers run at 240-300: with one input channel its
// kernels have nothing to vectorise over. These loops vectorise over the output channels
// instead: each output pixel is KH*KW broadcasts times rows of the transposed weights.
// Workspace: [the weights (KH*KW, Cout)][one weight-gradient partial per sample].

static int one_channel(const conv2d_shape_t *s) { return s->Cin == 1; }

static size_t one_channel_floats(const conv2d_shape_t *s) { return (size_t)(s->B + 1) * s->KH * s->KW * s->Cout; }

static void one_channel_forward(float *y, const float *x, const float *w, const float *bias, const conv2d_shape_t *s,
                                float *ws) {
    const int OH = conv2d_out_h(s), OW = conv2d_out_w(s), O = s->Cout, taps = s->KH * s->KW;
    float *wt = ws;  // (taps, Cout)
    for (int o = 0; o < O; o++)
        for (int t = 0; t < taps; t++) wt[(size_t)t * O + o] = w[(size_t)o * taps + t];
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < s->B; b++)
        for (int i = 0; i < OH; i++) {
            const float *xb = x + (size_t)b * s->H * s->W;
            for (int j = 0; j < OW; j++) {
                float *out = y + (((size_t)b * OH + i) * OW + j) * O;
#pragma omp simd
                for (int o = 0; o < O; o++) out[o] = bias ? bias[o] : 0.0f;
                for (int r = 0; r < s->KH; r++) {
                    const int u = source(i, r, s->SH, s->PH, s->DH, s->H);
                    for (int q = 0; q < s->KW && u >= 0; q++) {
                        const int v = source(j, q, s->SW, s->PW, s->DW, s->W);
                        if (v < 0) continue;
                        const float xv = xb[(size_t)u * s->W + v];
                        const float *wr = wt + (size_t)(r * s->KW + q) * O;
#pragma omp simd
                        for (int o = 0; o < O; o++) out[o] += xv * wr[o];
                    }
                }
            }
        }
}

// dw += sum over every output pixel of dy times the input it read, each sample's sum formed
// on its own and the samples added in order (the same bits for any thread count).
static void one_channel_weights(float *dw, const float *dy, const float *x, const conv2d_shape_t *s, float *ws) {
    const int OH = conv2d_out_h(s), OW = conv2d_out_w(s), O = s->Cout, taps = s->KH * s->KW;
    float *part = ws + (size_t)taps * O;  // (B, taps, Cout)
#pragma omp parallel for schedule(static)
    for (int b = 0; b < s->B; b++) {
        float *pb = part + (size_t)b * taps * O;
        for (size_t k = 0; k < (size_t)taps * O; k++) pb[k] = 0.0f;
        const float *xb = x + (size_t)b * s->H * s->W;
        for (int i = 0; i < OH; i++)
            for (int j = 0; j < OW; j++) {
                const float *g = dy + (((size_t)b * OH + i) * OW + j) * O;
                for (int r = 0; r < s->KH; r++) {
                    const int u = source(i, r, s->SH, s->PH, s->DH, s->H);
                    for (int q = 0; q < s->KW && u >= 0; q++) {
                        const int v = source(j, q, s->SW, s->PW, s->DW, s->W);
                        if (v < 0) continue;
                        const float xv = xb[(size_t)u * s->W + v];
                        float *pr = pb + (size_t)(r * s->KW + q) * O;
#pragma omp simd
                        for (int o = 0; o < O; o++) pr[o] += xv * g[o];
                    }
                }
            }
    }
    for (int b = 0; b < s->B; b++)
        for (int t = 0; t < taps; t++)
            for (int o = 0; o < O; o++) dw[(size_t)o * taps + t] += part[((size_t)b * taps + t) * O + o];
}

// ---- pointwise (1x1, stride 1, no padding): GEMMs over the rows (kernels/cpu/conv2d_pointwise.h)

// Whether the forward and input gradient of a pointwise shape go to the GEMM: below 256 input
// channels, where it was up to 2x faster; above, oneDNN's forward was 4-25% faster and its input
// gradient within 15% either way, and keeps them (a Zen 3, 2 threads, docs/kernels.md).
static int pointwise_gemm(const conv2d_shape_t *s) {
    return conv2d_pointwise(s) && (s->Cin < 256 || !conv2d_dnnl_usable(CONV2D_F32));
}

// ---- the contract ------------------------------------------------------------------------------

static conv2d_algorithm g_algorithm = CONV2D_ALGO_DIRECT;

void conv2d_set_algorithm(conv2d_algorithm a) { g_algorithm = a; }

// Our Winograd runs the shape: asked for, and ours is AVX-512's or oneDNN has none here.
static int winograd_ours(const conv2d_shape_t *s) {
    return g_algorithm == CONV2D_ALGO_WINOGRAD && conv2d_winograd_shape(s) &&
           (conv2d_winograd_avx512() || !(conv2d_dnnl_usable(CONV2D_F32) && conv2d_dnnl_winograd_available()));
}

// Ours (kernels/cpu/conv2d_taps.c) runs two kinds of CAM++'s layers where oneDNN's best kernels
// are AVX2's or oneDNN is not the backend: the front end's layers that stride the height (3x3,
// and the 1x1 shortcuts), which oneDNN 2.6 runs on channels-last at a third of the peak (the
// weight gradient of the 3x3) or blocked with reorders (the 1x1: ours 2.1x faster), and the
// context layers' dilated 1-D convolutions, whose blocked weight gradient oneDNN has only as
// reference loops (channels-last: 37% of the peak).
static int taps_layer(const conv2d_shape_t *s) {
    const int strided = s->SH > 1 && s->SW == 1 && ((s->KH == 3 && s->KW == 3) || (s->KH == 1 && s->KW == 1));
    const int dilated = s->H == 1 && s->KH == 1 && s->DW > 1;
    return (strided || dilated) && conv2d_taps_shape(s);
}

static int taps_ours(const conv2d_shape_t *s) {
    return taps_layer(s) && !(conv2d_dnnl_usable(CONV2D_F32) && conv2d_dnnl_avx512());
}

// 1x1 convolutions of stride > 1 and fewer than 16 input channels take the im2col path on
// AVX-512 CPUs: there oneDNN 2.6's weight gradient (jit_1x1:avx512_core) writes past the
// scratchpad it asks for, over whatever the workspace holds next (2 -> 4 channels, batch 4, 80 x
// 100 maps: 33 KB asked, 116 KB written; 4 -> 8: 65 KB and 137 KB), which made a ResNet's
// narrow shortcut's weight gradient garbage; oneDNN 3.2's does not. Such layers are little work.
static int narrow_strided_pointwise(const conv2d_shape_t *s) {
    return s->KH == 1 && s->KW == 1 && (s->SH > 1 || s->SW > 1) && s->Cin < 16 && conv2d_dnnl_avx512();
}

static int dnnl_takes(const conv2d_shape_t *s) {
    return conv2d_dnnl_usable(CONV2D_F32) && !narrow_strided_pointwise(s);
}

// Enough for either algorithm, and for ours or oneDNN's kernels of a layer: a workspace sized
// while one model's choice (or one GEMM backend) held stays enough under the other. oneDNN's
// plan sized by dnnl_bytes.
static size_t workspace_floats(const conv2d_shape_t *s, size_t (*dnnl_bytes)(const conv2d_shape_t *, conv2d_operands)) {
    check_shape(s);
    size_t n = dnnl_takes(s) ? (dnnl_bytes(s, CONV2D_F32) + 3) / 4 : im2col_floats(s);
    if (one_channel(s) && one_channel_floats(s) > n) n = one_channel_floats(s);
    if (conv2d_winograd_shape(s) && conv2d_winograd_workspace_floats(s) > n) n = conv2d_winograd_workspace_floats(s);
    if (taps_layer(s) && conv2d_taps_workspace_floats(s) > n) n = conv2d_taps_workspace_floats(s);
    return n;
}

size_t conv2d_workspace_floats(const conv2d_shape_t *s) { return workspace_floats(s, conv2d_dnnl_workspace_bytes); }

size_t conv2d_forward_workspace_floats(const conv2d_shape_t *s) {
    return workspace_floats(s, conv2d_dnnl_forward_workspace_bytes);
}

// Winograd or oneDNN where allowed; the invariant mode's forward is the per-sample im2col path.
static void forward_on(int fast, float *y, const float *x, const float *w, const float *bias, const conv2d_shape_t *s,
                       float *workspace) {
    check_shape(s);
    if (one_channel(s))
        one_channel_forward(y, x, w, bias, s, workspace);
    else if (fast && pointwise_gemm(s))
        conv2d_pointwise_forward(y, x, w, bias, s);
    else if (fast && winograd_ours(s))
        conv2d_winograd_forward(y, x, w, bias, s, workspace);
    else if (fast && taps_ours(s))
        conv2d_taps_forward(y, x, w, bias, s, workspace);
    else if (fast && dnnl_takes(s))
        conv2d_dnnl_forward(y, x, w, bias, s, CONV2D_F32, g_algorithm, workspace);
    else
        im2col_forward(y, x, w, bias, s, workspace);
}

void conv2d_forward(float *y, const float *x, const float *w, const float *bias, const conv2d_shape_t *s,
                    float *workspace) {
    forward_on(1, y, x, w, bias, s, workspace);
}

void conv2d_backward(float *dx, int dx_accumulate, float *dw, float *dbias, const float *dy, const float *x,
                     const float *w, const conv2d_shape_t *s, float *workspace) {
    check_shape(s);
    if (dbias) spk_rows_channel_sums(dbias, dy, (size_t)s->B * conv2d_out_h(s) * conv2d_out_w(s), s->Cout);
    if (dw && one_channel(s)) {  // the input gradient (rarely wanted of a first layer) as below
        one_channel_weights(dw, dy, x, s, workspace);
        dw = NULL;
    }
    if (dw && conv2d_pointwise(s)) {
        conv2d_pointwise_weight_grad(dw, dy, x, s);
        dw = NULL;
    }
    if (dx && pointwise_gemm(s)) {
        conv2d_pointwise_input_grad(dx, dx_accumulate, dy, w, s);
        dx = NULL;
    }
    if (winograd_ours(s)) {
        conv2d_winograd_backward(dx, dx_accumulate, dw, dy, x, w, s, workspace);
        return;
    }
    if (taps_ours(s)) {
        conv2d_taps_backward(dx, dx_accumulate, dw, dy, x, w, s, workspace);
        return;
    }
    if (!dnnl_takes(s)) {
        im2col_backward(dx, dx_accumulate, dw, dy, x, w, s, workspace);
        return;
    }
    if (dx || dw) conv2d_dnnl_backward(dx, dx_accumulate, dw, dy, x, w, s, CONV2D_F32, g_algorithm, workspace);
}

void conv2d_forward_reference(float *y, const float *x, const float *w, const float *bias, const conv2d_shape_t *s) {
    check_shape(s);
    const int OH = conv2d_out_h(s), OW = conv2d_out_w(s);
    for (int b = 0; b < s->B; b++)
        for (int i = 0; i < OH; i++)
            for (int j = 0; j < OW; j++)
                for (int o = 0; o < s->Cout; o++) {
                    double acc = bias ? bias[o] : 0.0;
                    for (int r = 0; r < s->KH; r++) {
                        const int u = source(i, r, s->SH, s->PH, s->DH, s->H);
                        for (int q = 0; q < s->KW && u >= 0; q++) {
                            const int v = source(j, q, s->SW, s->PW, s->DW, s->W);
                            if (v < 0) continue;
                            for (int c = 0; c < s->Cin; c++)
                                acc += (double)x[(((size_t)b * s->H + u) * s->W + v) * s->Cin + c] *
                                       w[(((size_t)o * s->Cin + c) * s->KH + r) * s->KW + q];
                        }
                    }
                    y[(((size_t)b * OH + i) * OW + j) * s->Cout + o] = (float)acc;
                }
}

// ---- the world-size-invariant mode ------------------------------------------------------------
// Every sample on its own: by our Winograd where the default takes it (its forward and input
// gradient compute each tile on its own, whatever the batch and threads); by oneDNN's fixed plans
// of blocks of samples on one thread where it has the shape (kernels/cpu/conv2d_dnnl_fixed.h);
// else im2col and GEMMs on one thread per sample (the loops above, whose GEMMs are serial);
// threads over samples. The first layer's loops compute each pixel on its own already. Weight
// gradients: each sample's (or block's), summed over its group in order (in float, as xsum_add
// sums a group's rows), each group's sum one exact term; a pointwise layer's a GEMM over its
// group's rows (kernels/cpu/conv2d_pointwise.h); Winograd's by blocks of samples, each on one
// thread (conv2d_winograd_weight_sums_serial), a group's added in order and turned into kernels.
// Workspace: [the bias gradient's per-sample sums (B, Cout)] then oneDNN's part, or [one slot per
// thread: col (P, K), dwr (Cout, K), dwt (Cout, Cin, KH, KW)], or Winograd's parts
// (winograd_exact_floats; its forward and input gradient use the workspace from the start, as
// the default's); a pointwise layer's weight gradient uses it from the start, once the bias's
// sums are in.

static int fixed_dnnl(const conv2d_shape_t *s) {
    return !one_channel(s) && !narrow_strided_pointwise(s) && conv2d_dnnl_fixed_usable(s, CONV2D_F32, g_algorithm);
}

// Winograd's weight gradient in blocks of up to 8 samples (the largest power of two that divides
// the group): a block's sums (36 Cin Cout) are zeroed, kept apart and added to its group's, which
// on ResNet34's 256-channel 10 x 25 maps cost as much as a sample's products. Blocks of one
// sample on the larger maps cost 17 ms more a step than blocks of 8 (one rank of one thread,
// batch 16). A rank's threads beyond its blocks idle in this pass.
static int winograd_block(int group) {
    int P = 1;
    while (P < 8 && group % (2 * P) == 0) P *= 2;
    return P;
}

// Blocks a wave of the weight gradient: the threads, at most as many as keep the blocks' sums
// within WINOGRAD_WAVE_BYTES (ResNet34's 256-channel layers: 9.4 MB a block). The wave is the
// schedule alone: a group's blocks are added in order whichever waves hold them.
#define WINOGRAD_WAVE_BYTES (64u << 20)

static int winograd_wave(const conv2d_shape_t *s) {
    const size_t fit = WINOGRAD_WAVE_BYTES / (conv2d_winograd_sums_floats(s) * sizeof(float));
    const int threads = omp_get_max_threads();
    return fit < 1 ? 1 : fit < (size_t)threads ? (int)fit : threads;
}

// [a wave's blocks' sums][a group's running sum][its term (Cout Cin 9)][a serial workspace a
// thread]
static size_t winograd_exact_floats(const conv2d_shape_t *s) {
    const size_t ns = conv2d_winograd_sums_floats(s);
    const size_t own = ((size_t)winograd_wave(s) + 1) * ns + conv2d_w_size(s) +
                       (size_t)omp_get_max_threads() * conv2d_winograd_serial_workspace_floats(s);
    const size_t plain = conv2d_winograd_workspace_floats(s);
    return own > plain ? own : plain;
}

typedef struct {
    xsum_t dw;
    float *term;
    const conv2d_shape_t *s;
} winograd_done_t;

// A group's sums over tiles turned into kernels, into dw's sums.
static void winograd_group_done(const float *sums, void *ctx) {
    const winograd_done_t *g = ctx;
    const size_t nw = conv2d_w_size(g->s);
    memset(g->term, 0, nw * sizeof(float));
    conv2d_winograd_weight_of_sums(g->term, sums, g->s);
    xsum_add(g->dw, g->term, 1, (int64_t)nw, 1);
}

// dw += each group's term: its blocks' sums over tiles (threads over a wave's blocks) added in
// order into the group's running sum (kernels/cpu/group_terms.h), turned into kernels once the
// group is complete.
static void winograd_weight_grad_exact(xsum_t dw, const float *dy, const float *x, const conv2d_shape_t *s, int group,
                                       float *workspace) {
    const int P = winograd_block(group), blocks = s->B / P, per = group / P, wave = winograd_wave(s);
    const size_t ns = conv2d_winograd_sums_floats(s), xs = (size_t)s->H * s->W * s->Cin,
                 ys = (size_t)conv2d_out_h(s) * conv2d_out_w(s) * s->Cout,
                 serial = conv2d_winograd_serial_workspace_floats(s);
    float *sums = workspace, *run = sums + (size_t)wave * ns, *term = run + ns, *slots = term + conv2d_w_size(s);
    winograd_done_t g = {dw, term, s};
    conv2d_shape_t one = *s;
    one.B = P;
    for (int u0 = 0; u0 < blocks; u0 += wave) {
        const int n = blocks - u0 < wave ? blocks - u0 : wave;
#pragma omp parallel for schedule(dynamic, 1)
        for (int i = 0; i < n; i++) {
            const size_t u = (size_t)(u0 + i);
            conv2d_winograd_weight_sums_serial(sums + (size_t)i * ns, dy + u * P * ys, x + u * P * xs, &one,
                                               slots + (size_t)omp_get_thread_num() * serial);
        }
        spk_group_terms_fold(run, sums, ns, u0, n, per, winograd_group_done, &g);
    }
}

static size_t slot_floats(const conv2d_shape_t *s) {
    return patches(s) * patch_len(s) + (size_t)s->Cout * patch_len(s) + conv2d_w_size(s);
}

size_t conv2d_workspace_floats_fixed(const conv2d_shape_t *s) {
    check_shape(s);
    if (winograd_ours(s)) return (size_t)s->B * s->Cout + winograd_exact_floats(s);
    const size_t ours = (size_t)omp_get_max_threads() * slot_floats(s);
    const size_t exact =
        (size_t)s->B * s->Cout + (fixed_dnnl(s) ? (conv2d_dnnl_fixed_workspace_bytes(s, CONV2D_F32) + 3) / 4 : ours);
    size_t n = im2col_floats(s) > exact ? im2col_floats(s) : exact;
    if (conv2d_pointwise_exact_floats(s) > n) n = conv2d_pointwise_exact_floats(s);
    return one_channel(s) && one_channel_floats(s) > n ? one_channel_floats(s) : n;
}

void conv2d_forward_fixed(float *y, const float *x, const float *w, const float *bias, const conv2d_shape_t *s,
                          float *workspace) {
    if (winograd_ours(s))
        conv2d_winograd_forward(y, x, w, bias, s, workspace);
    else if (fixed_dnnl(s))
        conv2d_dnnl_forward_fixed(y, x, w, bias, s, CONV2D_F32, g_algorithm, workspace);
    else
        forward_on(0, y, x, w, bias, s, workspace);
}

void conv2d_backward_exact(float *dx, int dx_accumulate, float *dw_tmp, xsum_t dw, xsum_t dbias, const float *dy,
                           const float *x, const float *w, const conv2d_shape_t *s, float *workspace, int group) {
    check_shape(s);
    SPK_ASSERT(group > 0 && s->B % group == 0);
    const size_t K = patch_len(s), P = patches(s), xs = (size_t)s->H * s->W * s->Cin, nw = conv2d_w_size(s);
    const int winograd = winograd_ours(s), dnnl = !winograd && fixed_dnnl(s);
    if (dx && winograd)
        conv2d_winograd_backward(dx, dx_accumulate, NULL, dy, x, w, s, workspace);
    else if (dx && !dnnl)
        im2col_backward(dx, dx_accumulate, NULL, dy, x, w, s, workspace);  // per sample, serial GEMMs
    if (!xsum_empty(dbias)) {  // each sample's float sum over its pixels, in order
        float *part = workspace;
#pragma omp parallel for schedule(static)
        for (int b = 0; b < s->B; b++) {
            float *pb = part + (size_t)b * s->Cout;
            for (int o = 0; o < s->Cout; o++) pb[o] = 0.0f;
            for (size_t p = 0; p < P; p++)
#pragma omp simd
                for (int o = 0; o < s->Cout; o++) pb[o] += dy[((size_t)b * P + p) * s->Cout + o];
        }
        xsum_add(dbias, part, s->B, s->Cout, group);
    }
    if (!xsum_empty(dw) && conv2d_pointwise(s)) {
        conv2d_pointwise_weight_grad_exact(dw, dy, x, 0, s, group, workspace);  // (the bias's sums are in)
        dw = xsum_none();
    }
    if (dnnl) {  // after the bias gradient: oneDNN's part of the workspace follows its sums
        if (dx || !xsum_empty(dw))
            conv2d_dnnl_backward_exact(dx, dx_accumulate, dw, dy, x, w, s, CONV2D_F32, g_algorithm, group,
                                       workspace + (size_t)s->B * s->Cout);
        return;
    }
    if (xsum_empty(dw)) return;
    if (winograd) {  // after the bias gradient: the blocks' terms follow its sums
        winograd_weight_grad_exact(dw, dy, x, s, group, workspace + (size_t)s->B * s->Cout);
        return;
    }
    SPK_ASSERT(dw_tmp != NULL);
    (void)dw_tmp;  // the slots below hold each group's gradient; dw_tmp's contract is kept for the GPU
    float *slots = workspace + (size_t)s->B * s->Cout;
#pragma omp parallel for schedule(dynamic, 1)
    for (int g = 0; g < s->B / group; g++) {
        float *col = slots + (size_t)omp_get_thread_num() * slot_floats(s), *dwr = col + P * K,
              *dwt = dwr + s->Cout * K;
        for (int i = 0; i < group; i++) {
            const int b = g * group + i;
            im2col(col, x + b * xs, s);
            spk_sgemm_serial('T', 'N', s->Cout, (int)K, (int)P, 1.0f, dy + (size_t)b * P * s->Cout, s->Cout, col,
                             (int)K, i ? 1.0f : 0.0f, dwr, (int)K);
        }
        memset(dwt, 0, nw * sizeof(float));
        rows_add_to_weights(dwt, dwr, s);
#pragma omp critical(conv2d_exact_dw)
        xsum_add(dw, dwt, 1, (int64_t)nw, 1);
    }
}
