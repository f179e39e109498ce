// The operand types of oneDNN's convolution plans (kernels/cpu/conv2d_dnnl.h): CONV2D_F32 takes
// float32 x, w and dy; CONV2D_BF16 takes them in bf16 (x and dy rounded by the caller, w the bf16
// copy). Outputs (y, dx, dw) are float32 either way, but for CONV2D_BF16_OUT: CONV2D_BF16's
// operands with y and dx written in bf16 (oneDNN rounds its float32 sums; dx overwritten, not
// added to).
#pragma once

typedef enum { CONV2D_F32 = 0, CONV2D_BF16 = 1, CONV2D_BF16_OUT = 2 } conv2d_operands;
