// oneDNN convolution plans (kernels/cpu/conv2d_dnnl.h), whose cache and the calls that run them
// (kernels/cpu/conv2d_dnnl_plan.h) serve the invariant mode's too. The activations are "nhwc"
// memory, which oneDNN's direct (jit/brgemm) convolutions read without reordering on AVX-512
// CPUs; Winograd plans, and float32 direct ones of up to 128 channels in eights where the best
// kernels are AVX2's (direct_blocked_tag), reorder them to a blocked layout. The weights are
// "any", letting each primitive pick its blocked format. The bf16 plans of 2-D maps run the
// input gradient as forward convolutions, by phases of the input (make_phases). Calls come from
// a serial region (the kernel contract), so one stream serves them all; the cache has its own
// lock all the same.
#include "kernels/cpu/conv2d_dnnl.h"

#ifdef SPK_USE_DNNL
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/spk_assert.h"
#include "kernels/cpu/conv2d_dnnl_plan.h"
#include "kernels/cpu/dnnl_check.h"
#include "kernels/gemm.h"
#include "kernels/gemm_bf16.h"

#define ALIGN CONV2D_PLAN_ALIGN

// Training uses a few dozen shapes to a few hundred (CAM++ in bf16 in the invariant mode: 148,
// its dense layers' widths each in blocks and in single samples, which a cache of 128 evicted
// every step, 6% of the step remade); inference on utterances of many lengths makes one per
// length. A key's plan lives in one set of PLAN_WAYS, chosen by the key's hash, and the set's
// least recently used plan is evicted: a lookup compares at most PLAN_WAYS keys.
#define PLAN_SETS 128
#define PLAN_WAYS 8
static plan_t g_plans[PLAN_SETS * PLAN_WAYS];
static uint64_t g_clock;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static dnnl_engine_t g_engine;
static dnnl_stream_t g_stream;
int conv2d_dnnl_usable(conv2d_operands t) {
    return spk_gemm_get_backend() == SPK_GEMM_DNNL && (t == CONV2D_F32 || spk_gemm_bf16_native());
}

int conv2d_dnnl_avx512(void) { return spk_dnnl_isa_has(dnnl_cpu_isa_avx512_core); }

size_t plan_up(size_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

// The convolution's arguments but the operands (spk_conv_pd's).
typedef struct {
    dnnl_alg_kind_t alg;
    dnnl_dims_t strides, dil, pad, pad_r;
} conv_args_t;

// The convolution primitive descriptor of prop on src, w, bias, dst (user-provided scratchpad;
// sum: adding into dst), growing *scratch to its scratchpad; NULL where oneDNN has no
// implementation of it (a Winograd or blocked plan's shape it does not take), any other failure
// ends the job.
static dnnl_primitive_desc_t make_pd(dnnl_prop_kind_t prop, const conv_args_t *a, spk_cmd src, spk_cmd w, spk_cmd bias,
                                     spk_cmd dst, const_dnnl_primitive_desc_t hint, int sum, size_t *scratch) {
    dnnl_primitive_attr_t attr = spk_dnnl_attr(sum);
    dnnl_primitive_desc_t pd = NULL;
    const dnnl_status_t st =
        spk_conv_pd(&pd, g_engine, prop, a->alg, src, w, bias, dst, a->strides, a->dil, a->pad, a->pad_r, hint, attr);
    dnnlCheck(dnnl_primitive_attr_destroy(attr));
    if (st == dnnl_unimplemented) return NULL;
    dnnlCheck(st);
    const size_t s = dnnl_memory_desc_get_size(dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0));
    if (s > *scratch) *scratch = s;
    return pd;
}

static dnnl_primitive_t make_prim(dnnl_primitive_desc_t pd) {
    dnnl_primitive_t p;
    dnnlCheck(dnnl_primitive_create(&p, pd));
    dnnlCheck(dnnl_primitive_desc_destroy(pd));
    return p;
}

// A reorder from -> to (NULL when the two are the same layout), adding into `to` when sum is set.
static dnnl_primitive_desc_t make_reorder_pd(spk_cmd from, spk_cmd to, int sum, size_t *scratch) {
    if (!sum && dnnl_memory_desc_equal(from, to)) return NULL;
    dnnl_primitive_attr_t attr = spk_dnnl_attr(sum);
    dnnl_primitive_desc_t pd;
    dnnlCheck(dnnl_reorder_primitive_desc_create(&pd, from, g_engine, to, g_engine, attr));
    const size_t s = dnnl_memory_desc_get_size(dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0));
    if (s > *scratch) *scratch = s;
    dnnlCheck(dnnl_primitive_attr_destroy(attr));
    return pd;
}

static dnnl_primitive_t make_reorder(spk_cmd from, spk_cmd to, int sum, size_t *scratch) {
    dnnl_primitive_desc_t pd = make_reorder_pd(from, to, sum, scratch);
    return pd ? make_prim(pd) : NULL;
}

static void destroy_pds(dnnl_primitive_desc_t *pds, int n) {
    for (int i = 0; i < n; i++)
        if (pds[i]) dnnlCheck(dnnl_primitive_desc_destroy(pds[i]));
}

// Whether oneDNN would run pd by its reference loops (its "ref:" implementations: orders of
// magnitude slower than its jit kernels).
static int is_reference(const_dnnl_primitive_desc_t pd) {
    const char *impl;
    dnnlCheck(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl));
    return strncmp(impl, "ref", 3) == 0;
}

// The four primitives' descriptors of algorithm alg on the activations p->cx..cdy; 0 (nothing
// made) where oneDNN implements one of them not, or (no_ref) only by its reference loops.
static int make_convs(plan_t *p, const conv2d_shape_t *s, dnnl_alg_kind_t alg, dnnl_data_type_t dt, int no_ref,
                      size_t *scratch) {
    const int64_t OH = conv2d_out_h(s), OW = conv2d_out_w(s);
    const dnnl_dims_t wd = {s->Cout, s->Cin, s->KH, s->KW};
    // oneDNN's right padding: what makes the output size exact (it may be below PH when the
    // stride skips the last rows, as PyTorch does).
    const conv_args_t a = {alg,
                           {s->SH, s->SW},
                           {s->DH - 1, s->DW - 1},
                           {s->PH, s->PW},
                           {(OH - 1) * s->SH + (s->KH - 1) * s->DH + 1 - s->H - s->PH,
                            (OW - 1) * s->SW + (s->KW - 1) * s->DW + 1 - s->W - s->PW}};
    spk_md w_any = spk_md_tag(4, wd, dt, dnnl_format_tag_any),
           dw_any = spk_md_tag(4, wd, dnnl_f32, dnnl_format_tag_any);
    size_t need = *scratch;
    dnnl_primitive_desc_t pds[4] = {NULL, NULL, NULL, NULL};  // fwd, fwd_bias, bwd_data, bwd_weights
    pds[0] = make_pd(dnnl_forward_training, &a, p->cx, w_any, NULL, p->cy, NULL, 0, &need);
    if (pds[0]) pds[1] = make_pd(dnnl_forward_training, &a, p->cx, w_any, p->bias, p->cy, NULL, 0, &need);
    if (pds[1]) pds[2] = make_pd(dnnl_backward_data, &a, p->cdx, w_any, NULL, p->cdy, pds[0], 0, &need);
    if (pds[2]) pds[3] = make_pd(dnnl_backward_weights, &a, p->cx, dw_any, NULL, p->cdy, pds[0], 0, &need);
    spk_md_free(&w_any);
    spk_md_free(&dw_any);
    // both forwards must take the weights in one format (the one reorder serves both)
    int ref = 0;
    for (int i = 0; i < 4 && pds[3] && no_ref; i++) ref |= pds[i] && is_reference(pds[i]);
    if (!pds[3] || ref ||
        !dnnl_memory_desc_equal(dnnl_primitive_desc_query_md(pds[0], dnnl_query_weights_md, 0),
                                dnnl_primitive_desc_query_md(pds[1], dnnl_query_weights_md, 0))) {
        SPK_ASSERT(no_ref || alg != dnnl_convolution_direct || dnnl_memory_desc_equal(p->cx, p->x) == 0);
        destroy_pds(pds, 4);
        return 0;
    }
    *scratch = need;
    p->w_fwd = spk_md_clone(dnnl_primitive_desc_query_md(pds[0], dnnl_query_weights_md, 0));
    p->w_bwd = spk_md_clone(dnnl_primitive_desc_query_md(pds[2], dnnl_query_weights_md, 0));
    p->dw_prim = spk_md_clone(dnnl_primitive_desc_query_md(pds[3], dnnl_query_diff_weights_md, 0));
    p->fwd_pd = pds[0], p->fwd_bias_pd = pds[1];          // (plan_forward_ready)
    p->bwd_data_pd = pds[2], p->bwd_weights_pd = pds[3];  // (plan_backward_ready)
    return 1;
}

static void phase_free(plan_phase_t *q) {
    dnnl_primitive_t *prims[] = {&q->fwd, &q->add, &q->w_in};
    for (size_t i = 0; i < sizeof prims / sizeof prims[0]; i++)
        if (*prims[i]) dnnlCheck(dnnl_primitive_destroy(*prims[i]));
    destroy_pds((dnnl_primitive_desc_t[]){q->fwd_pd, q->add_pd, q->w_in_pd}, 3);
    spk_md_free(&q->turned);
    spk_md_free(&q->w);
    spk_md_free(&q->out);
    *q = (plan_phase_t){0};
}

// The forward convolution of phase ph over dy (src), writing outputs of type dxt, and (with_add)
// its twin adding into them; 0 (nothing made) where oneDNN has it only as reference loops.
static int make_phase(plan_phase_t *q, const conv2d_phase_t *ph, const conv2d_shape_t *s, spk_cmd src,
                      dnnl_data_type_t dxt, int with_add, size_t *scratch) {
    const conv_args_t a = {dnnl_convolution_direct,
                           {1, 1},
                           {ph->dil_h - 1, ph->dil_w - 1},
                           {ph->pad_t, ph->pad_l},
                           {ph->pad_b, ph->pad_r}};
    const dnnl_dims_t wd = {s->Cin, s->Cout, ph->taps_h, ph->taps_w}, od = {s->B, s->Cin, ph->out_h, ph->out_w};
    spk_md w_any = spk_md_tag(4, wd, dnnl_bf16, dnnl_format_tag_any);
    q->out = spk_md_tag(4, od, dxt, dnnl_nhwc);
    dnnl_primitive_desc_t pd = make_pd(dnnl_forward_inference, &a, src, w_any, NULL, q->out, NULL, 0, scratch);
    dnnl_primitive_desc_t add =
        pd && with_add ? make_pd(dnnl_forward_inference, &a, src, w_any, NULL, q->out, NULL, 1, scratch) : NULL;
    spk_md_free(&w_any);
    if (!pd || is_reference(pd) || (with_add && (!add || is_reference(add))) ||
        (add && !dnnl_memory_desc_equal(dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0),
                                        dnnl_primitive_desc_query_md(add, dnnl_query_weights_md, 0)))) {
        dnnl_primitive_desc_t pds[2] = {pd, add};
        destroy_pds(pds, 2);
        return 0;
    }
    q->w = spk_md_clone(dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0));
    q->turned = spk_md_tag(4, wd, dnnl_bf16, dnnl_iohw);
    q->fwd_pd = pd, q->add_pd = add;
    q->w_in_pd = make_reorder_pd(q->turned, q->w, 0, scratch);
    q->turned_bytes = conv2d_phase_turns(ph, s) ? plan_up(dnnl_memory_desc_get_size(q->turned)) : 0;
    q->w_bytes = q->w_in_pd ? plan_up(dnnl_memory_desc_get_size(q->w)) : 0;
    return 1;
}

// *prim made from *pd, where not yet made.
static void made_from(dnnl_primitive_t *prim, dnnl_primitive_desc_t *pd) {
    if (*pd) *prim = make_prim(*pd), *pd = NULL;
}

// The input gradient by phases (kernels/cpu/conv2d_phases.h) on oneDNN's forward kernels, which
// run it faster than oneDNN 2.6's own input gradients (bf16 on AMX, ResNet34 at batch 32 on 2
// threads: 4.8 -> 3.3 ms for the 128-channel 3x3 layer, 6.7 -> 5.1 for the 32-channel one), and
// where one phase covers dx (stride 1) a sum post-op adds into an input gradient being
// accumulated, where the backward-data primitive takes none (a pass over dx less). For bf16
// channels-last plans of 2-D maps, the invariant mode's too (a fixed plan's phases are made at
// its ICV of 1), where oneDNN has every phase's forward as other than its reference loops;
// p->phases stays 0 elsewhere. CAM++'s 1-D layers (H = 1) keep the backward-data primitive: one
// sample's 100 frames of 128 -> 992 channels ran 2-3x slower as a forward (invariant mode).
static void make_phases(plan_t *p, const conv2d_shape_t *s, conv2d_operands t, size_t *scratch) {
    conv2d_phase_t ph[CONV2D_MAX_PHASES];
    const int n = t == CONV2D_F32 || s->H == 1 ? 0 : conv2d_phases_of(ph, s);
    const dnnl_data_type_t dxt = t == CONV2D_BF16_OUT ? dnnl_bf16 : dnnl_f32;
    plan_phase_t q[CONV2D_MAX_PHASES] = {0};
    size_t need = *scratch, w_bytes = 0;
    int made = n > 0;
    for (int i = 0; i < n && made; i++) {
        if (!ph[i].taps_h) continue;
        made = make_phase(&q[i], &ph[i], s, p->cdy, dxt, n == 1 && dxt == dnnl_f32, &need);
        w_bytes += q[i].turned_bytes + q[i].w_bytes;
    }
    if (!made) {
        for (int i = 0; i < n; i++) phase_free(&q[i]);
        return;
    }
    *scratch = need;
    p->phases = n;
    memcpy(p->phase, ph, sizeof ph);
    memcpy(p->phase_convs, q, sizeof q);
    p->phase_w_bytes = w_bytes;
}

// The shapes Winograd is used for. oneDNN 2.6 also accepts channel counts it pads to sixteens,
// and its kernels then fault.
static int winograd_shape(const conv2d_shape_t *s) {
    return s->Cin % 16 == 0 && s->Cout % 16 == 0 && s->KH == 3 && s->KW == 3 && s->SH == 1 && s->SW == 1 &&
           s->DH == 1 && s->DW == 1 && s->PH == 1 && s->PW == 1;
}

// The algorithm a shape's plan runs: Winograd only where asked for and the shape fits, so every
// other shape has one direct plan whichever the process's choice.
conv2d_algorithm plan_algorithm(const conv2d_shape_t *s, conv2d_operands t, conv2d_algorithm a) {
    return a == CONV2D_ALGO_WINOGRAD && t == CONV2D_F32 && winograd_shape(s) ? a : CONV2D_ALGO_DIRECT;
}

// The blocked layout of a float32 direct plan's activations, or 0 for channels-last as they
// are: nChw8c where oneDNN's best kernels are AVX2's (no AVX-512, or ONEDNN_MAX_CPU_ISA below
// it), which ran ResNet34's 3x3 layers of 32-128 channels at batch 32 1.2-2.8x faster on it than
// on channels-last (the weight gradients most, reorders not counted), as PyTorch's channels-first
// models run them; its 256-channel layers ran 2-8% slower, so wider layers stay channels-last.
// Layers of 2-7 input channels too (padded to eight): there oneDNN 2.6's channels-last 1x1
// stride-2 weight gradient on AVX2 gave other bits on each of 39 repeats at 2 threads (a race:
// the face encoder's first shortcut at --face-channels 4), its blocked one the same bits.
static dnnl_format_tag_t direct_blocked_tag(const conv2d_shape_t *s, conv2d_operands t) {
    const int avx2_best = !conv2d_dnnl_avx512();
    const int eights = s->Cin % 8 == 0 && s->Cout % 8 == 0, few = s->Cin > 1 && s->Cin < 8;
    const int fits = (eights || few) && s->Cin <= 128 && s->Cout <= 128;
    return t == CONV2D_F32 && avx2_best && fits ? dnnl_nChw8c : 0;
}

static void free_activation_mds(plan_t *p) {
    spk_md *mds[] = {&p->cx, &p->cy, &p->cdx, &p->cdy};
    for (size_t i = 0; i < sizeof mds / sizeof mds[0]; i++) spk_md_free(mds[i]);
}

// The convolutions of algorithm alg on activations in layout tag, reordered to and from
// channels-last by the plan; 0 (nothing made) where oneDNN has them not, or only as reference
// loops (AVX2's dilated weight gradient in nChw8c: CAM++'s layers), checked before any is made.
static int make_blocked_convs(plan_t *p, const conv2d_shape_t *s, dnnl_alg_kind_t alg, dnnl_format_tag_t tag,
                              dnnl_data_type_t dt, size_t *scratch) {
    const dnnl_dims_t xd = {s->B, s->Cin, s->H, s->W}, yd = {s->B, s->Cout, conv2d_out_h(s), conv2d_out_w(s)};
    p->cx = spk_md_tag(4, xd, dnnl_f32, tag), p->cdx = spk_md_clone(p->cx);
    p->cy = spk_md_tag(4, yd, dnnl_f32, tag), p->cdy = spk_md_clone(p->cy);
    if (make_convs(p, s, alg, dt, 1, scratch)) return 1;
    free_activation_mds(p);
    return 0;
}

// The scratchpad's size, and its memory descriptor.
static void set_scratch(plan_t *p, size_t scratch) {
    p->scratch_bytes = plan_up(scratch);
    spk_md_free(&p->scratch);
    const dnnl_dims_t sd = {(int64_t)(scratch ? scratch : 1)};
    p->scratch = spk_md_tag(1, sd, dnnl_u8, dnnl_a);
}

// Winograd where asked for and oneDNN takes the shape (float32, 3x3, stride 1, channels in
// sixteens), on activations it reorders to nChw16c; else oneDNN's direct convolution, on
// direct_blocked_tag's layout where it has one and oneDNN takes it, else on channels-last.
static void plan_create(plan_t *p, const conv2d_shape_t *s, conv2d_operands t, conv2d_algorithm a, int fixed) {
    if (!g_engine) {
        dnnlCheck(dnnl_engine_create(&g_engine, dnnl_cpu, 0));
        dnnlCheck(dnnl_stream_create(&g_stream, g_engine, dnnl_stream_default_flags));
    }
    const dnnl_data_type_t dt = t == CONV2D_F32 ? dnnl_f32 : dnnl_bf16;
    const int64_t OH = conv2d_out_h(s), OW = conv2d_out_w(s);
    const dnnl_dims_t xd = {s->B, s->Cin, s->H, s->W}, yd = {s->B, s->Cout, OH, OW};
    const dnnl_dims_t wd = {s->Cout, s->Cin, s->KH, s->KW}, bd = {s->Cout};
    p->x = spk_md_tag(4, xd, dt, dnnl_nhwc);
    p->y = spk_md_tag(4, yd, t == CONV2D_BF16_OUT ? dnnl_bf16 : dnnl_f32, dnnl_nhwc);
    p->dx = spk_md_tag(4, xd, t == CONV2D_BF16_OUT ? dnnl_bf16 : dnnl_f32, dnnl_nhwc);
    p->dy = spk_md_tag(4, yd, dt, dnnl_nhwc);
    p->w_oihw = spk_md_tag(4, wd, dt, dnnl_oihw);
    p->dw_oihw = spk_md_tag(4, wd, dnnl_f32, dnnl_oihw);
    p->bias = spk_md_tag(1, bd, dnnl_f32, dnnl_a);

    size_t scratch = 0;
    p->dx_bytes = p->xb_bytes = p->yb_bytes = p->phase_w_bytes = 0;     // (the slot's last plan's are stale)
    int blocked = p->winograd = p->none = p->phases = p->complete = 0;  // (Winograd is float32 only)
    if (a == CONV2D_ALGO_WINOGRAD)
        blocked = p->winograd = make_blocked_convs(p, s, dnnl_convolution_winograd, dnnl_nChw16c, dt, &scratch);
    const dnnl_format_tag_t tag = fixed ? 0 : direct_blocked_tag(s, t);
    if (!blocked && tag) blocked = make_blocked_convs(p, s, dnnl_convolution_direct, tag, dt, &scratch);
    if (blocked) {
        p->x_in = make_reorder(p->x, p->cx, 0, &scratch);
        p->dy_in = make_reorder(p->dy, p->cdy, 0, &scratch);
        p->y_out = make_reorder(p->cy, p->y, 0, &scratch);
        p->dx_out = make_reorder(p->cdx, p->dx, 0, &scratch);
        p->dx_add = make_reorder(p->cdx, p->dx, 1, &scratch);
        p->xb_bytes = plan_up(dnnl_memory_desc_get_size(p->cx));
        p->yb_bytes = plan_up(dnnl_memory_desc_get_size(p->cy));
        p->dx_bytes = 0;
    } else {  // a fixed plan takes no reference loops: without them it is none
        p->cx = spk_md_clone(p->x), p->cy = spk_md_clone(p->y), p->cdx = spk_md_clone(p->dx);
        p->cdy = spk_md_clone(p->dy);
        p->none = !make_convs(p, s, dnnl_convolution_direct, dt, fixed, &scratch) && fixed;
        if (p->none) return;
        p->dx_bytes = plan_up(conv2d_x_size(s) * sizeof(float));  // the input gradient to be added
        p->xb_bytes = p->yb_bytes = 0;
    }
    p->w_to_fwd = make_reorder(p->w_oihw, p->w_fwd, 0, &scratch);
    p->w_to_bwd = make_reorder(p->w_oihw, p->w_bwd, 0, &scratch);
    p->dw_add = make_reorder(p->dw_prim, p->dw_oihw, 1, &scratch);
    if (fixed) p->dw_out = make_reorder(p->dw_prim, p->dw_oihw, 0, &scratch);
    p->w_fwd_bytes = plan_up(dnnl_memory_desc_get_size(p->w_fwd));
    p->w_bwd_bytes = plan_up(dnnl_memory_desc_get_size(p->w_bwd));
    p->dw_bytes = plan_up(dnnl_memory_desc_get_size(p->dw_prim));
    p->forward_scratch_bytes = plan_up(scratch);
    set_scratch(p, scratch);
    p->complete = blocked;  // (only channels-last plans take phases)
}

// The backward's own parts of a plan: a channels-last bf16 plan of a 2-D map takes the input
// gradient by phases where oneDNN has them (and drops the backward-data primitive, its weights
// and its buffer), growing the scratchpad as they need. Made when a backward's workspace is
// sized or a backward runs, not for a forward's: sizing inference's workspace for each utterance
// length made the phases' descriptors of each (0.85 s of ResNet34's bf16 embedding of 128
// utterances, 4.8 s). The forward's parts come first in the workspace and do not move.
static void plan_complete(plan_t *p, const conv2d_shape_t *s, conv2d_operands t) {
    if (p->complete || p->none) return;
    p->complete = 1;
    size_t scratch = p->scratch_bytes;
    make_phases(p, s, t, &scratch);
    if (!p->phases) return;
    destroy_pds(&p->bwd_data_pd, 1), p->bwd_data_pd = NULL;
    if (p->w_to_bwd) {
        dnnlCheck(dnnl_primitive_destroy(p->w_to_bwd));
        p->w_to_bwd = NULL;
    }
    spk_md_free(&p->w_bwd);
    p->w_bwd_bytes = 0;
    // the phases' outputs (one phase: none, it writes dx)
    p->dx_bytes = p->phases == 1 ? 0 : plan_up(conv2d_phases_size(p->phase, p->phases, s) * sizeof(float));
    set_scratch(p, scratch);
}

static void plan_destroy(plan_t *p) {
    dnnl_primitive_t *prims[] = {&p->fwd,      &p->fwd_bias, &p->bwd_data, &p->bwd_weights, &p->w_to_fwd,
                                 &p->w_to_bwd, &p->dw_add,   &p->dw_out,   &p->x_in,        &p->dy_in,
                                 &p->y_out,    &p->dx_out,   &p->dx_add};
    for (size_t i = 0; i < sizeof prims / sizeof prims[0]; i++)
        if (*prims[i]) {
            dnnlCheck(dnnl_primitive_destroy(*prims[i]));
            *prims[i] = NULL;
        }
    spk_md *mds[] = {&p->x,     &p->y,       &p->dx,      &p->dy,   &p->w_oihw, &p->w_fwd,
                     &p->w_bwd, &p->dw_prim, &p->dw_oihw, &p->bias, &p->scratch};
    for (size_t i = 0; i < sizeof mds / sizeof mds[0]; i++) spk_md_free(mds[i]);
    for (int i = 0; i < CONV2D_MAX_PHASES; i++) phase_free(&p->phase_convs[i]);
    destroy_pds((dnnl_primitive_desc_t[]){p->fwd_pd, p->fwd_bias_pd, p->bwd_data_pd, p->bwd_weights_pd}, 4);
    p->fwd_pd = p->fwd_bias_pd = p->bwd_data_pd = p->bwd_weights_pd = NULL;
    free_activation_mds(p);
}

// The set of a key: FNV-1a over its words, then mixed so that keys apart in one word spread.
static size_t key_set(const int *key, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint32_t)key[i]) * 16777619u;
    h ^= h >> 16, h *= 0x85ebca6bu, h ^= h >> 13;
    return h % PLAN_SETS;
}

// The plan of a shape: every call of a kernel contract comes from one serial region, so the plan
// stays valid until the next lookup.
const plan_t *plan_lookup(const conv2d_shape_t *s, conv2d_operands t, conv2d_algorithm asked, int fixed, int backward) {
    const conv2d_shape_t c = *s;
    const conv2d_algorithm a = plan_algorithm(s, t, asked);
    const int key[16] = {c.B, c.Cin, c.Cout, c.H, c.W, c.KH, c.KW, c.SH, c.SW, c.PH, c.PW, c.DH, c.DW, t, a, fixed};
    plan_t *set = &g_plans[key_set(key, sizeof key / sizeof key[0]) * PLAN_WAYS];
    pthread_mutex_lock(&g_lock);
    plan_t *p = NULL, *victim = &set[0];
    for (int i = 0; i < PLAN_WAYS && !p; i++) {
        plan_t *q = &set[i];
        if (q->last_used && memcmp(q->key, key, sizeof key) == 0)
            p = q;
        else if (!q->last_used || (victim->last_used && q->last_used < victim->last_used))
            victim = q;
    }
    if (!p) {
        plan_destroy(victim);
        plan_create(victim, s, t, a, fixed);
        memcpy(victim->key, key, sizeof key);
        p = victim;
    }
    if (backward || fixed) plan_complete(p, s, t);
    p->last_used = ++g_clock;
    pthread_mutex_unlock(&g_lock);
    return p;
}

static const plan_t *plan_of(const conv2d_shape_t *s, conv2d_operands t, conv2d_algorithm asked, int backward) {
    return plan_lookup(s, t, asked, 0, backward);
}

// Asked once (while oneDNN is the backend), of a shape test_conv2d runs as Winograd where oneDNN
// has it.
int conv2d_dnnl_winograd_available(void) {
    static int known = -1;
    if (spk_gemm_get_backend() != SPK_GEMM_DNNL) return 0;
    if (known < 0) {
        const conv2d_shape_t s = conv2d_square(2, 32, 32, 8, 10, 3, 1);
        known = plan_of(&s, CONV2D_F32, CONV2D_ALGO_WINOGRAD, 0)->winograd;
    }
    return known;
}

// The workspace's parts: the forward's [weights in the forward's format][blocked x or dx][blocked
// y or dy][scratchpad], then the backward's [weights in the backward-data primitive's format]
// [weight gradient][input gradient to be added (channels-last), or the phases' outputs][the
// phases' turned weights, and each as its convolution takes them], from the first 64-byte
// boundary: oneDNN's kernels store to its buffers with aligned writes. The forward's parts do
// not move when the backward's are made, and its primitives use no more of the scratchpad than
// the forward's sizing counted (plan_complete grows it for the phases alone).
typedef struct {
    char *w_fwd, *xb, *yb, *scratch, *w_bwd, *dw, *dx, *phase_w;
} parts_t;

static parts_t parts_of(const plan_t *p, void *workspace) {
    char *b = (char *)workspace + (ALIGN - (uintptr_t)workspace % ALIGN) % ALIGN;
    parts_t q;
    q.w_fwd = b, b += p->w_fwd_bytes;
    q.xb = b, b += p->xb_bytes;
    q.yb = b, b += p->yb_bytes;
    q.scratch = b, b += p->scratch_bytes;
    q.w_bwd = b, b += p->w_bwd_bytes;
    q.dw = b, b += p->dw_bytes;
    q.dx = b, b += p->dx_bytes;
    q.phase_w = b;
    return q;
}

static size_t forward_bytes(const plan_t *p) {
    return ALIGN + p->w_fwd_bytes + p->xb_bytes + p->yb_bytes + p->forward_scratch_bytes;
}

static size_t plan_bytes(const plan_t *p) {
    return ALIGN + p->w_fwd_bytes + p->xb_bytes + p->yb_bytes + p->scratch_bytes + p->w_bwd_bytes + p->dw_bytes +
           p->dx_bytes + p->phase_w_bytes;
}

// The larger of either algorithm's bytes: a workspace sized while one model's choice held stays
// enough when another model in the process has set the other.
static size_t either_algorithm(const conv2d_shape_t *s, conv2d_operands t, int backward) {
    size_t (*bytes)(const plan_t *) = backward ? plan_bytes : forward_bytes;
    const size_t direct = bytes(plan_of(s, t, CONV2D_ALGO_DIRECT, backward));
    if (plan_algorithm(s, t, CONV2D_ALGO_WINOGRAD) == CONV2D_ALGO_DIRECT) return direct;
    const size_t winograd = bytes(plan_of(s, t, CONV2D_ALGO_WINOGRAD, backward));
    return direct > winograd ? direct : winograd;
}

size_t conv2d_dnnl_workspace_bytes(const conv2d_shape_t *s, conv2d_operands t) { return either_algorithm(s, t, 1); }

size_t conv2d_dnnl_forward_workspace_bytes(const conv2d_shape_t *s, conv2d_operands t) {
    return either_algorithm(s, t, 0);
}

// Runs prim on stream st with up to 5 (argument, memory desc, pointer) triples and the scratchpad.
void plan_run_on(dnnl_stream_t st, dnnl_primitive_t prim, const plan_t *p, void *scratch, int n, const int *arg,
                 const spk_cmd *md, void *const *ptr) {
    dnnl_exec_arg_t args[6];
    for (int i = 0; i < n; i++) {
        args[i].arg = arg[i];
        dnnlCheck(dnnl_memory_create(&args[i].memory, md[i], g_engine, ptr[i]));
    }
    args[n].arg = DNNL_ARG_SCRATCHPAD;
    dnnlCheck(dnnl_memory_create(&args[n].memory, p->scratch, g_engine, scratch));
    dnnlCheck(dnnl_primitive_execute(prim, st, n + 1, args));
    dnnlCheck(dnnl_stream_wait(st));
    for (int i = 0; i <= n; i++) dnnlCheck(dnnl_memory_destroy(args[i].memory));
}

static void run(dnnl_primitive_t prim, const plan_t *p, void *scratch, int n, const int *arg, const spk_cmd *md,
                void *const *ptr) {
    plan_run_on(g_stream, prim, p, scratch, n, arg, md, ptr);
}

// from (desc fmd) reordered into to (desc tmd) by reorder on stream st; from itself when reorder
// is NULL.
const void *plan_reordered(dnnl_stream_t st, dnnl_primitive_t reorder, const plan_t *p, spk_cmd fmd, spk_cmd tmd,
                           const void *from, void *to, char *scratch) {
    if (!reorder) return from;
    plan_run_on(st ? st : g_stream, reorder, p, scratch, 2, (int[]){DNNL_ARG_FROM, DNNL_ARG_TO}, (spk_cmd[]){fmd, tmd},
                (void *[]){(void *)from, to});
    return to;
}

static const void *reordered(dnnl_primitive_t reorder, const plan_t *p, spk_cmd fmd, spk_cmd tmd, const void *from,
                             void *to, char *scratch) {
    return plan_reordered(g_stream, reorder, p, fmd, tmd, from, to, scratch);
}

static dnnl_stream_t *g_thread_streams;
static int g_thread_stream_count;

dnnl_stream_t *plan_thread_streams(int threads) {
    pthread_mutex_lock(&g_lock);
    if (threads > g_thread_stream_count) {
        dnnl_stream_t *grown = realloc(g_thread_streams, sizeof *grown * (size_t)threads);
        SPK_ASSERT(grown != NULL);
        for (int i = g_thread_stream_count; i < threads; i++)
            dnnlCheck(dnnl_stream_create(&grown[i], g_engine, dnnl_stream_default_flags));
        g_thread_streams = grown, g_thread_stream_count = threads;
    }
    pthread_mutex_unlock(&g_lock);
    return g_thread_streams;
}

void conv2d_dnnl_forward(void *y, const void *x, const void *w, const float *bias, const conv2d_shape_t *s,
                         conv2d_operands t, conv2d_algorithm a, void *workspace) {
    const plan_t *p = plan_of(s, t, a, 0);
    plan_forward_ready(p, bias != NULL);
    const parts_t q = parts_of(p, workspace);
    const void *wf = reordered(p->w_to_fwd, p, p->w_oihw, p->w_fwd, w, q.w_fwd, q.scratch);
    const void *cx = reordered(p->x_in, p, p->x, p->cx, x, q.xb, q.scratch);
    void *cy = p->y_out ? (void *)q.yb : y;
    if (bias)
        run(p->fwd_bias, p, q.scratch, 4, (int[]){DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_BIAS, DNNL_ARG_DST},
            (spk_cmd[]){p->cx, p->w_fwd, p->bias, p->cy}, (void *[]){(void *)cx, (void *)wf, (void *)bias, cy});
    else
        run(p->fwd, p, q.scratch, 3, (int[]){DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST},
            (spk_cmd[]){p->cx, p->w_fwd, p->cy}, (void *[]){(void *)cx, (void *)wf, cy});
    reordered(p->y_out, p, p->cy, p->y, cy, y, q.scratch);
}

void plan_forward_ready(const plan_t *p, int bias) {
    plan_t *m = (plan_t *)p;  // (the cache's own plan: calls come from one serial region)
    if (bias)
        made_from(&m->fwd_bias, &m->fwd_bias_pd);
    else
        made_from(&m->fwd, &m->fwd_pd);
}

void plan_backward_ready(const plan_t *p) {
    plan_t *m = (plan_t *)p;  // (the cache's own plan: calls come from one serial region)
    made_from(&m->bwd_data, &m->bwd_data_pd);
    made_from(&m->bwd_weights, &m->bwd_weights_pd);
    for (int i = 0; i < p->phases; i++) {
        plan_phase_t *c = &m->phase_convs[i];
        made_from(&c->fwd, &c->fwd_pd);
        made_from(&c->add, &c->add_pd);
        made_from(&c->w_in, &c->w_in_pd);
    }
}

void plan_phase_weights(const plan_t *p, const conv2d_shape_t *s, const void *w, char *buf, char *scratch,
                        const void **wc) {
    for (int i = 0; i < p->phases; i++) {
        const plan_phase_t *c = &p->phase_convs[i];
        wc[i] = NULL;
        if (!c->fwd) continue;
        const void *wt = w;
        if (c->turned_bytes) conv2d_phase_turn((spk_bf16 *)(wt = buf), w, s, &p->phase[i]);
        wc[i] = reordered(c->w_in, p, c->turned, c->w, wt, buf + c->turned_bytes, scratch);
        buf += c->turned_bytes + c->w_bytes;
    }
}

void plan_phases_run(dnnl_stream_t st, const plan_t *p, const conv2d_shape_t *s, void *dx, int accumulate,
                     const void *cdy, const void *const *wc, char *parts, char *scratch) {
    const size_t elem = dnnl_memory_desc_get_size(p->dx) / conv2d_x_size(s);
    for (int i = 0; i < p->phases; i++) {
        const plan_phase_t *c = &p->phase_convs[i];
        if (!c->fwd) continue;
        void *out = p->phases == 1 ? dx : parts + p->phase[i].offset * elem;
        plan_run_on(st ? st : g_stream, p->phases == 1 && accumulate ? c->add : c->fwd, p, scratch, 3,
                    (int[]){DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST}, (spk_cmd[]){p->cdy, c->w, c->out},
                    (void *[]){(void *)cdy, (void *)wc[i], out});
    }
    if (p->phases > 1) conv2d_phases_interleave(dx, accumulate, parts, p->phase, s, elem);
}

// dy is reordered once for both gradients; the weight gradient goes first, as the input
// gradient of a blocked plan then takes the blocked x's place.
void conv2d_dnnl_backward(void *dx, int accumulate, float *dw, const void *dy, const void *x, const void *w,
                          const conv2d_shape_t *s, conv2d_operands t, conv2d_algorithm a, void *workspace) {
    SPK_ASSERT(!accumulate || t != CONV2D_BF16_OUT);
    const plan_t *p = plan_of(s, t, a, 1);
    plan_backward_ready(p);
    const parts_t q = parts_of(p, workspace);
    const void *cdy = reordered(p->dy_in, p, p->dy, p->cdy, dy, q.yb, q.scratch);
    if (dw) {
        const void *cx = reordered(p->x_in, p, p->x, p->cx, x, q.xb, q.scratch);
        run(p->bwd_weights, p, q.scratch, 3, (int[]){DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS},
            (spk_cmd[]){p->cx, p->cdy, p->dw_prim}, (void *[]){(void *)cx, (void *)cdy, q.dw});
        run(p->dw_add, p, q.scratch, 2, (int[]){DNNL_ARG_FROM, DNNL_ARG_TO}, (spk_cmd[]){p->dw_prim, p->dw_oihw},
            (void *[]){q.dw, dw});
    }
    if (!dx) return;
    if (p->phases) {
        const void *wc[CONV2D_MAX_PHASES];
        plan_phase_weights(p, s, w, q.phase_w, q.scratch, wc);
        plan_phases_run(NULL, p, s, dx, accumulate, cdy, wc, q.dx, q.scratch);
        return;
    }
    const void *wb = reordered(p->w_to_bwd, p, p->w_oihw, p->w_bwd, w, q.w_bwd, q.scratch);
    const int blocked = p->dx_out != NULL;
    void *out = blocked ? (void *)q.xb : accumulate ? (void *)q.dx : dx;
    run(p->bwd_data, p, q.scratch, 3, (int[]){DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC},
        (spk_cmd[]){p->cdy, p->w_bwd, p->cdx}, (void *[]){(void *)cdy, (void *)wb, out});
    if (blocked) {
        reordered(accumulate ? p->dx_add : p->dx_out, p, p->cdx, p->dx, out, dx, q.scratch);
        return;
    }
    if (!accumulate) return;
    const size_t n = conv2d_x_size(s);
    float *acc = dx;
    const float *part = out;
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) acc[i] += part[i];
}

#else  // built without oneDNN: kernels/cpu/conv2d.c runs its own convolution

int conv2d_dnnl_usable(conv2d_operands t) { return (void)t, 0; }
size_t conv2d_dnnl_workspace_bytes(const conv2d_shape_t *s, conv2d_operands t) { return (void)s, (void)t, 0; }
size_t conv2d_dnnl_forward_workspace_bytes(const conv2d_shape_t *s, conv2d_operands t) { return (void)s, (void)t, 0; }
void conv2d_dnnl_forward(void *y, const void *x, const void *w, const float *bias, const conv2d_shape_t *s,
                         conv2d_operands t, conv2d_algorithm a, void *workspace) {
    (void)y, (void)x, (void)w, (void)bias, (void)s, (void)t, (void)a, (void)workspace;
}
void conv2d_dnnl_backward(void *dx, int accumulate, float *dw, const void *dy, const void *x, const void *w,
                          const conv2d_shape_t *s, conv2d_operands t, conv2d_algorithm a, void *workspace) {
    (void)dx, (void)accumulate, (void)dw, (void)dy, (void)x, (void)w, (void)s, (void)t, (void)a, (void)workspace;
}
int conv2d_dnnl_winograd_available(void) { return 0; }
int conv2d_dnnl_avx512(void) { return 0; }
#endif
