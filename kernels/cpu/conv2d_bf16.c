// Conv2d with bf16 operands (kernels/conv2d_bf16.h), two ways to the same products:
//   native:  oneDNN's bf16 convolutions on the bf16 operands (kernels/cpu/conv2d_dnnl.c);
//   widened: the operands rounded to bf16 and held as float32, then the float32 convolution.
// A product of two bf16 values is exact in float32 and both sum in float32, so the two differ
// only in summation order. AUTO takes native where the CPU multiplies bf16 matrices in hardware
// (AMX) or runs AVX512-BF16 at full rate (AMD); on Intel's AVX512-BF16 alone oneDNN 2.6's bf16
// convolutions measured 140-170 GFLOP/s on ResNet34's shapes against 240-300 for its float32
// ones on the same cores (docs/kernels.md), so widened it is there. SPKDDP_CONV_BF16=native or
// widened overrides the choice (for measuring it).
#include "kernels/conv2d_bf16.h"

#include "kernels/base/env.h"
#include "kernels/base/spk_assert.h"
#include "kernels/cpu/conv2d_dnnl.h"
#include "kernels/cpu/conv2d_dnnl_fixed.h"
#include "kernels/cpu/conv2d_pointwise.h"
#include "kernels/cpu/rows.h"
#include "kernels/gemm_bf16.h"

#ifdef SPK_USE_DNNL
#include "kernels/cpu/dnnl_check.h"
#endif

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#define ALIGN 64

static conv2d_bf16_path g_path = CONV2D_BF16_AUTO;

void conv2d_bf16_set_path(conv2d_bf16_path p) { g_path = p; }

// AMD's AVX512-BF16 (Zen 4 on) runs its bf16 dot products at twice the float32 FMA rate, and
// oneDNN's bf16 convolutions there beat the widened path (CAM++'s step 46-54 against 25-34
// samples/s on a Zen 4 EPYC); Intel's without AMX do not (above).
#ifdef SPK_USE_DNNL
static int cpu_is_amd(void) {
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return 0;
    return b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;  // "Auth" "enti" "cAMD"
#else
    return 0;
#endif
}
#endif

static int native(void) {
    if (g_path == CONV2D_BF16_AUTO) {  // SPKDDP_CONV_BF16=native|widened overrides the choice
        const int e = spk_env_choice("SPKDDP_CONV_BF16", "auto|native|widened");
        if (e == 1) g_path = CONV2D_BF16_NATIVE;
        if (e == 2) g_path = CONV2D_BF16_WIDENED;
    }
    if (!conv2d_dnnl_usable(CONV2D_BF16) || g_path == CONV2D_BF16_WIDENED) return 0;
    if (g_path == CONV2D_BF16_NATIVE) return 1;
#ifdef SPK_USE_DNNL
    return spk_dnnl_isa_has(dnnl_cpu_isa_avx512_core_amx) ||
           (spk_dnnl_isa_has(dnnl_cpu_isa_avx512_core_bf16) && cpu_is_amd());
#else
    return 0;
#endif
}

static size_t up_floats(size_t n) { return (n + ALIGN / 4 - 1) / (ALIGN / 4) * (ALIGN / 4); }
static size_t half_floats(size_t n) { return up_floats((n + 1) / 2); }  // n bf16 values, in floats

// The widened path's workspace (wide_parts): x, w and dy rounded, as float32, then conv floats
// for the float32 convolution.
static size_t widened_floats(const conv2d_shape_t *s, size_t conv) {
    return up_floats(conv2d_x_size(s)) + up_floats(conv2d_w_size(s)) + up_floats(conv2d_y_size(s)) + conv;
}

// Workspace, native: [dy rounded (bf16)][oneDNN's]. Widened: [x][w][dy] rounded, as float32,
// then the float32 convolution's workspace.
size_t conv2d_bf16_workspace_floats(const conv2d_shape_t *s) {
    SPK_ASSERT(conv2d_shape_ok(s));
    if (native()) {  // (the rounded forward's plan has its own primitives)
        const size_t a = conv2d_dnnl_workspace_bytes(s, CONV2D_BF16),
                     b = conv2d_dnnl_workspace_bytes(s, CONV2D_BF16_OUT);
        return half_floats(conv2d_y_size(s)) + ((a > b ? a : b) + 3) / 4;
    }
    return widened_floats(s, conv2d_workspace_floats(s));
}

// The same parts, of the float32-output forward's plan alone: no rounded forward's plan, no
// backward's parts.
size_t conv2d_bf16_forward_workspace_floats(const conv2d_shape_t *s) {
    SPK_ASSERT(conv2d_shape_ok(s));
    if (native()) return half_floats(conv2d_y_size(s)) + (conv2d_dnnl_forward_workspace_bytes(s, CONV2D_BF16) + 3) / 4;
    return widened_floats(s, conv2d_forward_workspace_floats(s));
}

typedef struct {
    float *x, *w, *dy, *conv;
} wide_t;

static wide_t wide_parts(const conv2d_shape_t *s, float *workspace) {
    wide_t p;
    p.x = workspace;
    p.w = p.x + up_floats(conv2d_x_size(s));
    p.dy = p.w + up_floats(conv2d_w_size(s));
    p.conv = p.dy + up_floats(conv2d_y_size(s));
    return p;
}

// One pass: xh = bf16(x) and xr = its value as float32.
static void round_both(spk_bf16 *xh, float *xr, const float *x, size_t n) {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) {
        const spk_bf16 h = spk_bf16_round(x[i]);
        xh[i] = h;
        xr[i] = spk_bf16_to_f32(h);
    }
}

// xr = x rounded to bf16, as float32.
static void round_wide(float *xr, const float *x, size_t n) {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) xr[i] = spk_bf16_to_f32(spk_bf16_round(x[i]));
}

void conv2d_bf16_forward(float *y, spk_bf16 *xh, const float *x, const spk_bf16 *w, const float *bias,
                         const conv2d_shape_t *s, float *workspace) {
    SPK_ASSERT(conv2d_shape_ok(s));
    const size_t nx = conv2d_x_size(s);
    if (native()) {
        if (x) bf16_from_f32(xh, x, nx);
        conv2d_dnnl_forward(y, xh, w, bias, s, CONV2D_BF16, CONV2D_ALGO_DIRECT,
                            workspace + half_floats(conv2d_y_size(s)));
        return;
    }
    const wide_t p = wide_parts(s, workspace);
    if (x)
        round_both(xh, p.x, x, nx);
    else
        bf16_to_f32(p.x, xh, nx);
    bf16_to_f32(p.w, w, conv2d_w_size(s));
    conv2d_forward(y, p.x, p.w, bias, s, p.conv);
}

// Native: oneDNN writes the rounded sums. Widened: the float32 convolution into the workspace's
// dy part, then rounded.
void conv2d_bf16_forward_rounded(spk_bf16 *yh, spk_bf16 *xh, const float *x, const spk_bf16 *w, const conv2d_shape_t *s,
                                 float *workspace) {
    SPK_ASSERT(conv2d_shape_ok(s));
    if (native()) {
        if (x) bf16_from_f32(xh, x, conv2d_x_size(s));
        conv2d_dnnl_forward(yh, xh, w, NULL, s, CONV2D_BF16_OUT, CONV2D_ALGO_DIRECT,
                            workspace + half_floats(conv2d_y_size(s)));
        return;
    }
    const wide_t p = wide_parts(s, workspace);
    conv2d_bf16_forward(p.dy, xh, x, w, NULL, s, workspace);  // (its y is not among the parts it uses)
    bf16_from_f32(yh, p.dy, conv2d_y_size(s));
}

void conv2d_bf16_backward(float *dx, int dx_accumulate, float *dw, float *dbias, const float *dy, const spk_bf16 *dyh,
                          const spk_bf16 *xh, const spk_bf16 *w, const conv2d_shape_t *s, float *workspace) {
    SPK_ASSERT(conv2d_shape_ok(s));
    SPK_ASSERT(!dyh != !dy && (!dyh || !dbias));
    const size_t ny = conv2d_y_size(s);
    if (dbias) spk_rows_channel_sums(dbias, dy, ny / (size_t)s->Cout, s->Cout);  // of dy as it is
    if (!dx && !dw) return;
    if (native()) {
        if (!dyh) {
            spk_bf16 *r = (spk_bf16 *)workspace;
            bf16_from_f32(r, dy, ny);
            dyh = r;
        }
        if (dw && conv2d_pointwise(s)) {
            conv2d_pointwise_weight_grad_bf16(dw, dyh, xh, s);
            dw = NULL;
        }
        float *ws = workspace + half_floats(ny);
        if (dx || dw) conv2d_dnnl_backward(dx, dx_accumulate, dw, dyh, xh, w, s, CONV2D_BF16, CONV2D_ALGO_DIRECT, ws);
        return;
    }
    const wide_t p = wide_parts(s, workspace);
    if (dyh)
        bf16_to_f32(p.dy, dyh, ny);
    else
        round_wide(p.dy, dy, ny);
    if (dx) {
        bf16_to_f32(p.w, w, conv2d_w_size(s));
        conv2d_backward(dx, dx_accumulate, NULL, NULL, p.dy, NULL, p.w, s, p.conv);
    }
    if (dw) {
        bf16_to_f32(p.x, xh, conv2d_x_size(s));
        conv2d_backward(NULL, 0, dw, NULL, p.dy, p.x, NULL, s, p.conv);
    }
}

// Native: the weight gradient on conv2d_bf16_backward's plan (the same bits), the input gradient
// on the plan that writes it in bf16. Widened: conv2d_bf16_backward's float32 passes on the
// widened operands (dy widened once for both), the input gradient into the workspace's x part
// once the weight gradient has used it, then rounded.
void conv2d_bf16_backward_rounded(spk_bf16 *dxh, float *dw, const spk_bf16 *dyh, const spk_bf16 *xh, const spk_bf16 *w,
                                  const conv2d_shape_t *s, float *workspace) {
    SPK_ASSERT(conv2d_shape_ok(s) && dxh && dyh);
    if (native()) {
        float *ws = workspace + half_floats(conv2d_y_size(s));
        if (dw && conv2d_pointwise(s))
            conv2d_pointwise_weight_grad_bf16(dw, dyh, xh, s);
        else if (dw)
            conv2d_dnnl_backward(NULL, 0, dw, dyh, xh, w, s, CONV2D_BF16, CONV2D_ALGO_DIRECT, ws);
        conv2d_dnnl_backward(dxh, 0, NULL, dyh, xh, w, s, CONV2D_BF16_OUT, CONV2D_ALGO_DIRECT, ws);
        return;
    }
    const wide_t p = wide_parts(s, workspace);
    bf16_to_f32(p.dy, dyh, conv2d_y_size(s));
    if (dw) {
        bf16_to_f32(p.x, xh, conv2d_x_size(s));
        conv2d_backward(NULL, 0, dw, NULL, p.dy, p.x, NULL, s, p.conv);
    }
    bf16_to_f32(p.w, w, conv2d_w_size(s));
    conv2d_backward(p.x, 0, NULL, NULL, p.dy, NULL, p.w, s, p.conv);
    bf16_from_f32(dxh, p.x, conv2d_x_size(s));
}

// ---- the world-size-invariant mode (kernels/conv2d_bf16.h) ------------------------------------
// Native where the default is and oneDNN has the shape's fixed plans (kernels/cpu/
// conv2d_dnnl_fixed.h: blocks of samples, made and run on one thread, threads over blocks), the
// first layer's one input channel included (1-3% of ResNet34's and CAM++'s bf16 step against
// its widened loops). Elsewhere widened, whatever the CPU, on the float32 convolution's fixed
// twins (kernels/conv2d.h). The products are the same bf16 ones, summed in float32.

static int native_fixed(const conv2d_shape_t *s) {
    return native() && conv2d_dnnl_fixed_usable(s, CONV2D_BF16, CONV2D_ALGO_DIRECT);
}

// Native: [dy rounded (bf16)][the bias gradient's per-sample sums (B, Cout)][oneDNN's, or a
// pointwise layer's weight gradient's] (the rounded forward's plans have their own parts).
size_t conv2d_bf16_workspace_floats_fixed(const conv2d_shape_t *s) {
    SPK_ASSERT(conv2d_shape_ok(s));
    if (native_fixed(s)) {
        const size_t a = conv2d_dnnl_fixed_workspace_bytes(s, CONV2D_BF16),
                     b = conv2d_dnnl_fixed_workspace_bytes(s, CONV2D_BF16_OUT);
        const size_t dnnl = ((a > b ? a : b) + 3) / 4, pw = conv2d_pointwise_exact_floats(s);
        return half_floats(conv2d_y_size(s)) + up_floats((size_t)s->B * s->Cout) + (dnnl > pw ? dnnl : pw);
    }
    return up_floats(conv2d_x_size(s)) + up_floats(conv2d_w_size(s)) + up_floats(conv2d_y_size(s)) +
           conv2d_workspace_floats_fixed(s);
}

// The native forward: xh = bf16(x) where x is given, then oneDNN's fixed plans (y in float32, or
// in bf16 for CONV2D_BF16_OUT).
static void native_forward_fixed(void *y, spk_bf16 *xh, const float *x, const spk_bf16 *w, const float *bias,
                                 const conv2d_shape_t *s, conv2d_operands t, float *workspace) {
    if (x) bf16_from_f32(xh, x, conv2d_x_size(s));
    conv2d_dnnl_forward_fixed(y, xh, w, bias, s, t, CONV2D_ALGO_DIRECT, workspace);
}

void conv2d_bf16_forward_fixed(float *y, spk_bf16 *xh, const float *x, const spk_bf16 *w, const float *bias,
                               const conv2d_shape_t *s, float *workspace) {
    SPK_ASSERT(conv2d_shape_ok(s));
    if (native_fixed(s)) {
        native_forward_fixed(y, xh, x, w, bias, s, CONV2D_BF16, workspace);
        return;
    }
    const wide_t p = wide_parts(s, workspace);
    if (x)
        round_both(xh, p.x, x, conv2d_x_size(s));
    else
        bf16_to_f32(p.x, xh, conv2d_x_size(s));
    bf16_to_f32(p.w, w, conv2d_w_size(s));
    conv2d_forward_fixed(y, p.x, p.w, bias, s, p.conv);
}

// Native: oneDNN writes the rounded sums, as the default's. Widened: the fixed forward into the
// workspace's dy part, then rounded.
void conv2d_bf16_forward_rounded_fixed(spk_bf16 *yh, spk_bf16 *xh, const float *x, const spk_bf16 *w,
                                       const conv2d_shape_t *s, float *workspace) {
    SPK_ASSERT(conv2d_shape_ok(s));
    if (native_fixed(s)) {
        native_forward_fixed(yh, xh, x, w, NULL, s, CONV2D_BF16_OUT, workspace);
        return;
    }
    const wide_t p = wide_parts(s, workspace);
    conv2d_bf16_forward_fixed(p.dy, xh, x, w, NULL, s, workspace);  // (its y is not among the parts it uses)
    bf16_from_f32(yh, p.dy, conv2d_y_size(s));
}

// The native workspace's oneDNN part (after dy rounded and the bias gradient's sums).
static float *native_dnnl_part(const conv2d_shape_t *s, float *workspace) {
    return workspace + half_floats(conv2d_y_size(s)) + up_floats((size_t)s->B * s->Cout);
}

void conv2d_bf16_backward_exact(float *dx, int dx_accumulate, float *dw_tmp, xsum_t dw, xsum_t dbias, const float *dy,
                                const spk_bf16 *dyh, const spk_bf16 *xh, const spk_bf16 *w, const conv2d_shape_t *s,
                                float *workspace, int group) {
    SPK_ASSERT(conv2d_shape_ok(s));
    SPK_ASSERT(!dy != !dyh && (!dyh || xsum_empty(dbias)));
    const size_t ny = conv2d_y_size(s);
    const int nat = native_fixed(s);
    float *after_dy = nat ? workspace + half_floats(ny) : NULL;
    const wide_t p = wide_parts(s, workspace);
    if (!xsum_empty(dbias))  // of dy as it is, as conv2d_bf16_backward's
        conv2d_backward_exact(NULL, 0, NULL, xsum_none(), dbias, dy, NULL, NULL, s, nat ? after_dy : p.conv, group);
    if (!dx && xsum_empty(dw)) return;
    if (nat) {
        if (!dyh) {
            spk_bf16 *r = (spk_bf16 *)workspace;
            bf16_from_f32(r, dy, ny);
            dyh = r;
        }
        if (!xsum_empty(dw) && conv2d_pointwise(s)) {
            conv2d_pointwise_weight_grad_exact(dw, dyh, xh, 1, s, group, native_dnnl_part(s, workspace));
            dw = xsum_none();
        }
        if (dx || !xsum_empty(dw))
            conv2d_dnnl_backward_exact(dx, dx_accumulate, dw, dyh, xh, w, s, CONV2D_BF16, CONV2D_ALGO_DIRECT, group,
                                       native_dnnl_part(s, workspace));
        return;
    }
    if (dyh)
        bf16_to_f32(p.dy, dyh, ny);
    else
        round_wide(p.dy, dy, ny);
    if (dx) bf16_to_f32(p.w, w, conv2d_w_size(s));
    if (!xsum_empty(dw)) bf16_to_f32(p.x, xh, conv2d_x_size(s));
    conv2d_backward_exact(dx, dx_accumulate, dw_tmp, dw, xsum_none(), p.dy, xsum_empty(dw) ? NULL : p.x,
                          dx ? p.w : NULL, s, p.conv, group);
}

// The weight sums as conv2d_bf16_backward_exact's (the same call). The input gradient, native: on
// the fixed plans that write it in bf16; widened: conv2d_bf16_backward_exact's into the
// workspace's x part (which its input gradient leaves alone), then rounded.
void conv2d_bf16_backward_rounded_exact(spk_bf16 *dxh, float *dw_tmp, xsum_t dw, const spk_bf16 *dyh,
                                        const spk_bf16 *xh, const spk_bf16 *w, const conv2d_shape_t *s,
                                        float *workspace, int group) {
    SPK_ASSERT(conv2d_shape_ok(s) && dxh && dyh);
    if (!xsum_empty(dw))
        conv2d_bf16_backward_exact(NULL, 0, dw_tmp, dw, xsum_none(), NULL, dyh, xh, w, s, workspace, group);
    if (native_fixed(s)) {
        conv2d_dnnl_backward_exact(dxh, 0, xsum_none(), dyh, xh, w, s, CONV2D_BF16_OUT, CONV2D_ALGO_DIRECT, group,
                                   native_dnnl_part(s, workspace));
        return;
    }
    const wide_t p = wide_parts(s, workspace);
    conv2d_bf16_backward_exact(p.x, 0, NULL, xsum_none(), xsum_none(), NULL, dyh, xh, w, s, workspace, group);
    bf16_from_f32(dxh, p.x, conv2d_x_size(s));
}
