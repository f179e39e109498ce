// A convolution's input gradient as forward convolutions of its output gradient, one per phase.
// With stride S, the input rows i = S m + r of one phase r (0 <= r < S) take the output
// gradient through the kernel rows k with (r + P - D k) divisible by S, row m + (r + P - D k) / S
// of dy each: a stride-1 convolution of dy by those rows of the weights transposed (Cin outputs
// from Cout inputs) and in reverse order, padded to reach them. Stride 1 is one phase, the whole
// kernel flipped in both directions. kernels/cpu/conv2d_dnnl.c runs the phases on oneDNN's
// forward kernels, faster than its own input gradients on AMX, and lays the phases' outputs
// into dx here.
#pragma once
#include <stddef.h>

#include "kernels/bf16.h"
#include "kernels/conv2d_types.h"

#define CONV2D_MAX_PHASES 4  // strides of up to 2 x 2

// Phase n = r_h SW + r_w covers dx's rows r_h + SH m and columns r_w + SW l.
typedef struct {
    int out_h, out_w;                  // how many (its forward convolution's output)
    int taps_h, taps_w;                // the turned kernel (0: no tap reaches the phase: its dx is 0)
    int top_h, top_w, step_h, step_w;  // turned tap j is the kernel's row (column) top - step j
    int pad_t, pad_l, pad_b, pad_r;    // the forward convolution over dy: its paddings,
    int dil_h, dil_w;                  // and dilations
    size_t offset;                     // elements of the phases' buffer before its output (32s)
} conv2d_phase_t;

// The phases of s's input gradient into ph (CONV2D_MAX_PHASES): their count SH SW, or 0 where
// they do not apply (strides past 2, a stride with a dilation, padding past the kernel's reach).
int conv2d_phases_of(conv2d_phase_t *ph, const conv2d_shape_t *s);

// Elements of the phases' buffer (count > 1): their outputs, channels-last, each at its offset.
size_t conv2d_phases_size(const conv2d_phase_t *ph, int count, const conv2d_shape_t *s);

// wt = the phase's taps of w (Cout, Cin, KH, KW), in turned order: (Cout, Cin, taps_h, taps_w),
// which as (Cin, Cout, taps_h, taps_w) weights is oneDNN's "iohw" (its reorder transposes).
void conv2d_phase_turn(spk_bf16 *wt, const spk_bf16 *w, const conv2d_shape_t *s, const conv2d_phase_t *ph);

// Whether the phase's taps need conv2d_phase_turn: not for a 1x1 kernel's one tap (w as it is).
int conv2d_phase_turns(const conv2d_phase_t *ph, const conv2d_shape_t *s);

// dx = or (accumulate) += the phases' outputs, channels-last each at its offset in parts,
// zero for a phase without taps; float32 elements (elem 4), or bf16 ones (elem 2) written alone.
void conv2d_phases_interleave(void *dx, int accumulate, const void *parts, const conv2d_phase_t *ph,
                              const conv2d_shape_t *s, size_t elem);
