// The plans of kernels/cpu/conv2d_dnnl.c as its two users see them: that file's default passes
// and the invariant mode's plans of blocks of samples (kernels/cpu/conv2d_dnnl_fixed.c). A plan
// holds the primitives and reorders of a shape, an operand type, an algorithm and whether it is
// a fixed one (made by the caller at the OpenMP ICV of 1, channels-last or Winograd, none where
// oneDNN has only its reference loops); conv2d_dnnl.c makes them on first use and caches them.
#pragma once
#ifdef SPK_USE_DNNL
#include <stddef.h>
#include <stdint.h>

#include "kernels/conv2d_types.h"
#include "kernels/cpu/conv2d_operands.h"
#include "kernels/cpu/conv2d_phases.h"
#include "kernels/cpu/dnnl_check.h"

#define CONV2D_PLAN_ALIGN 64  // oneDNN's kernels store to its buffers with aligned writes

// A phase's forward convolution of dy (none for a phase no tap reaches). One phase writes dx
// itself, (add) adding into a float32 one; more write the phases' buffer. Made as descriptors
// with the backward's parts (plan_complete), as primitives on the first backward
// (plan_backward_ready).
typedef struct {
    dnnl_primitive_desc_t fwd_pd, add_pd, w_in_pd;
    dnnl_primitive_t fwd, add, w_in;  // w_in: the turned weights (iohw) to fwd's format (NULL: the same)
    spk_md turned, w, out;
    size_t turned_bytes, w_bytes;
} plan_phase_t;

typedef struct {
    int key[16];  // the shape's 13 sizes, the operand type, the algorithm, fixed (the invariant mode's)
    dnnl_primitive_t fwd, fwd_bias, bwd_data, bwd_weights;  // fwd_bias: the forward adding a bias
    // Their descriptors, each made into its primitive when first run (plan_forward_ready,
    // plan_backward_ready): generating a primitive's code costs more than most of its runs, a
    // layer uses one of the two forwards, and inference makes a plan for each utterance length
    // (ResNet34's bf16 embedding spent 7.1 s of 10.9 generating forwards it never ran).
    dnnl_primitive_desc_t fwd_pd, fwd_bias_pd, bwd_data_pd, bwd_weights_pd;
    dnnl_primitive_t w_to_fwd, w_to_bwd;  // oihw -> each primitive's weights (NULL: already oihw)
    dnnl_primitive_t dw_add;              // the primitive's weight gradient, added into oihw
    dnnl_primitive_t dw_out;              // ... written into oihw (fixed plans; NULL: it is oihw)
    // Blocked plans reorder the activations to and from channels-last with these.
    dnnl_primitive_t x_in, dy_in, y_out, dx_out, dx_add;  // NULL on channels-last activations
    spk_md x, y, dx, dy, w_oihw, w_fwd, w_bwd, dw_prim, dw_oihw, bias, scratch;
    spk_md cx, cy, cdx, cdy;  // the activations as the primitives take them
    int winograd;             // the convolutions are Winograd's
    // phases > 0: the input gradient as forward convolutions of dy, one per phase
    // (kernels/cpu/conv2d_phases.h), where bwd_data is not used
    int phases;
    conv2d_phase_t phase[CONV2D_MAX_PHASES];
    plan_phase_t phase_convs[CONV2D_MAX_PHASES];
    size_t w_fwd_bytes, w_bwd_bytes, dw_bytes, scratch_bytes, dx_bytes, xb_bytes, yb_bytes, phase_w_bytes;
    size_t forward_scratch_bytes;  // the scratchpad before the backward's parts were made
    int complete;                  // the backward's parts are made (the phases: plan_complete)
    int none;                      // a fixed plan oneDNN has only as reference loops: not used
    uint64_t last_used;            // 0: a free slot
} plan_t;

size_t plan_up(size_t n);  // n rounded up to CONV2D_PLAN_ALIGN
// The algorithm a shape's plan runs: Winograd only where asked for and the shape fits.
conv2d_algorithm plan_algorithm(const conv2d_shape_t *s, conv2d_operands t, conv2d_algorithm asked);
// The plan of a shape (made on first use): valid until the next lookup, which may evict it.
// backward: with the backward's parts made too (fixed plans always are).
const plan_t *plan_lookup(const conv2d_shape_t *s, conv2d_operands t, conv2d_algorithm asked, int fixed, int backward);
// A stream for each of `threads` threads (called from a serial region, before they run).
dnnl_stream_t *plan_thread_streams(int threads);
// Runs prim on stream st with up to 5 (argument, memory desc, pointer) triples and the scratchpad.
void plan_run_on(dnnl_stream_t st, dnnl_primitive_t prim, const plan_t *p, void *scratch, int n, const int *arg,
                 const spk_cmd *md, void *const *ptr);
// Makes the forward's primitive (with a bias or without) from its descriptor where not yet made
// (from a serial region, before a plan's forward runs).
void plan_forward_ready(const plan_t *p, int bias);
// Makes the backward's primitives from their descriptors where not yet made (from a serial
// region, before a plan's backward runs).
void plan_backward_ready(const plan_t *p);
// A phased plan's input gradient (p->phases > 0), in two parts: the phases' weights, turned from
// w and reordered for their convolutions into buf (p->phase_w_bytes), wc[i] phase i's (from a
// serial region); then dx = or += the phases' convolutions of cdy on stream st (NULL: the
// default stream), with parts (p->dx_bytes) for their outputs where there are more than one.
void plan_phase_weights(const plan_t *p, const conv2d_shape_t *s, const void *w, char *buf, char *scratch,
                        const void **wc);
void plan_phases_run(dnnl_stream_t st, const plan_t *p, const conv2d_shape_t *s, void *dx, int accumulate,
                     const void *cdy, const void *const *wc, char *parts, char *scratch);
// from (desc fmd) reordered into to (desc tmd) by reorder on stream st (NULL: the default
// stream); from itself when reorder is NULL.
const void *plan_reordered(dnnl_stream_t st, dnnl_primitive_t reorder, const plan_t *p, spk_cmd fmd, spk_cmd tmd,
                           const void *from, void *to, char *scratch);
#endif
