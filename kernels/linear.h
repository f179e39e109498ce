// Dense layer y = x W^T + b over rows (also a 1x1 conv on length-1 inputs, e.g. the SE block).
// Backward ACCUMULATES into dx, dw, db (each may be NULL). Call from a serial region.
#pragma once

void linear_forward(float *y,        // (B, Out)
                    const float *x,  // (B, In)
                    const float *w,  // (Out, In)
                    const float *b,  // (Out) or NULL
                    int B, int In, int Out);

void linear_backward(float *dx,        // (B, In) +=
                     float *dw,        // (Out, In) +=
                     float *db,        // (Out) +=
                     const float *dy,  // (B, Out)
                     const float *x,   // (B, In)
                     const float *w,   // (Out, In)
                     int B, int In, int Out);

// The world-size-invariant mode's forward: every row by its own GEMM (kernels/gemm.h,
// spk_sgemm_rows), so a sample's output depends neither on B nor on the thread count. (Its
// backward is the GEMMs of kernels/gemm.h and exact sums: app/model/layers/model_layers.c.)
void linear_forward_rows(float *y, const float *x, const float *w, const float *b, int B, int In, int Out);
