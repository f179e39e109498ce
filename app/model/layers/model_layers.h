// The layers every family shares whose calls differ in the world-size-invariant mode
// (app/model/layers/model_layers.c): parameter gradients and BatchNorm in training.
// Parameters are named by their offsets in the table (b < 0: no bias). By default these are
// the kernels' own calls, gradients accumulating in m->grads and BatchNorm using this rank's
// batch (PyTorch DDP); in the invariant mode every sample's contribution goes to the exact sums
// m->xgrads (m->grads serving as scratch) and BatchNorm normalises over the global batch.
#pragma once
#include "app/model/core/model_core.h"
#include "kernels/conv2d.h"

#include <stdint.h>

// Conv1d y = conv(x, W at w) + bias at b (b < 0: none); bf16 models round x into xh first (or
// read it rounded already, x NULL), in model_conv1d_group's layout. In the invariant mode's
// training the samples go in groups of m->group (conv1d_forward_grouped and its bf16 twin: bf16
// layers and large float32 ones fold each group's samples), else through the backend's forward
// (the invariant twin's: sample by sample, for any B).
void model_conv1d_forward(model_t *m, float *y, spk_bf16 *xh, const float *x, int64_t w, int64_t b, int B, int Cin,
                          int Cout, int T, int K, int dilation, int train, float *work);
// The layout of the bf16 operands of a 1-D convolution's forward (train or not) and backward
// (kernels/conv1d_bf16.h): 0, folded over the batch (Cin, B*T); in the invariant mode groups of
// this many samples one after another, each folded (Cin, group*T): in training the model's
// groups, else samples one by one ((B, Cin, T)).
int model_conv1d_group(const model_t *m, int train);
// Rounds c channels of x, a (B, ldx, T) tensor (plus add, (B, c, T), or NULL), into channels
// [d0, d0 + c) of xh, a bf16 operand of Cin channels in the layout of `group`
// (model_conv1d_group's). A split's chunks and a concatenation's parts go so into their
// convolutions with no float copy.
void model_round_conv1d_input(const model_t *m, int group, spk_bf16 *xh, int Cin, int d0, const float *x, int ldx,
                              const float *add, int B, int c, int T);
// Conv1d weight and bias gradients (b < 0: none) and dx += (dx_accumulate) or = : bf16 models on
// the forward's rounded input xh (x unused), the invariant mode as exact sums, else
// conv1d_backward. The output gradient is dy, or in bf16 models dyh, rounded already in the
// layout of xh (then with no bias, b < 0: its sums come from the pass that rounded it).
void model_conv1d_backward(model_t *m, float *dx, int dx_accumulate, int64_t w, int64_t b, const float *dy,
                           const spk_bf16 *dyh, const float *x, const spk_bf16 *xh, int B, int Cin, int Cout, int T,
                           int K, int dilation, float *work);
// Dense layer y = x W^T + b: W (Out, In) at w, over B rows of a row a sample; _rows: of B samples
// of `per` contiguous rows each (CAM++'s segments), its exact sums a term a group of samples.
void model_linear_backward(model_t *m, float *dx, int64_t w, int64_t b, const float *dy, const float *x, int B, int In,
                           int Out);
void model_linear_backward_rows(model_t *m, float *dx, int64_t w, int64_t b, const float *dy, const float *x, int B,
                                int per, int In, int Out);
// (The BatchNorms below save their mean and rstd in model_bn_stats_floats each: bn_sets.h.)
// BatchNorm1d: w, b < 0 for one without affine parameters.
void model_batchnorm_train(model_t *m, float *y, float *mean, float *rstd, int64_t running_mean, int64_t running_var,
                           const float *x, int64_t w, int64_t b, int B, int C, int T, float eps, float momentum);
// The same over relu(x), x the ReLU's input: by default read through the ReLU (x unchanged), in the
// invariant mode replaced by relu(x) first; model_batchnorm_relu_backward takes x either way.
void model_batchnorm_relu_train(model_t *m, float *y, float *mean, float *rstd, int64_t running_mean,
                                int64_t running_var, float *x, int64_t w, int64_t b, int B, int C, int T, float eps,
                                float momentum);
void model_batchnorm_backward(model_t *m, float *dx, int64_t w, int64_t b, const float *dy, const float *x,
                              const float *mean, const float *rstd, int B, int C, int T);
// The same when x is a ReLU's output or input: dx (overwritten) the gradient at the ReLU's input.
void model_batchnorm_relu_backward(model_t *m, float *dx, int64_t w, int64_t b, const float *dy, const float *x,
                                   const float *mean, const float *rstd, int B, int C, int T);
// The backward of a convolution followed by a ReLU and a BatchNorm (a TDNN block), from the
// BatchNorm's output gradient dy into g (B, Cout, T), the gradient at the convolution's output:
// the BatchNorm's parameter gradients, the convolution's (w, b) and dx (+= with dx_accumulate,
// or =). a is the BatchNorm's input, x (xh) the convolution's. In float32 outside the invariant
// mode the BatchNorm's pass adds the convolution's bias gradient too (one pass over g fewer).
void model_bn_relu_conv1d_backward(model_t *m, float *dx, int dx_accumulate, int64_t w, int64_t b, int64_t bn_w,
                                   int64_t bn_b, const float *dy, const float *a, const float *mean, const float *rstd,
                                   const float *x, const spk_bf16 *xh, int B, int Cin, int Cout, int T, int K,
                                   int dilation, float *g, float *work);
// The backward of a bf16 convolution followed by a ReLU and a BatchNorm (a TDNN block), from the
// BatchNorm's output gradient dy: the BatchNorm's parameter gradients, the convolution's (w, b)
// and dx (+= with dx_accumulate, or =). a is the BatchNorm's input, xh the convolution's rounded
// input. The gradient between them exists only rounded (batchnorm1d_relu_backward_bf16, in the
// layout of xh) in g's storage. Only where model_writes_bf16(m).
void model_bn_relu_conv1d_bf16_backward(model_t *m, float *dx, int dx_accumulate, int64_t w, int64_t b, int64_t bn_w,
                                        int64_t bn_b, const float *dy, const float *a, const float *mean,
                                        const float *rstd, const spk_bf16 *xh, int B, int Cin, int Cout, int T, int K,
                                        int dilation, float *g, float *work);
// Invariant mode only: the gradient at c (row stride ldc) += sum_i op(A_i) op(B_i)
// (spk_sgemm_batched_exact; the bf16 one: spk_gemm_bf16_batched_exact), and the gradient at c
// (n) += the sum of the rows of x (rows, n).
void model_gemm_grad_exact(model_t *m, char transa, char transb, int M, int N, int K, const float *A, int lda,
                           int64_t strideA, const float *Bm, int ldb, int64_t strideB, int64_t c, int ldc, int batch);
void model_gemm_bf16_grad_exact(model_t *m, char transa, char transb, int M, int N, int K, const spk_bf16 *A, int lda,
                                int64_t strideA, const spk_bf16 *Bm, int ldb, int64_t strideB, int64_t c, int ldc,
                                int batch);
void model_rows_grad_exact(model_t *m, int64_t c, const float *x, int rows, int64_t n);

// The workspace of a 2-D convolution of the model's precision: of its forward alone while embed
// runs (m->embedding: no backward, and a new shape for each utterance length, whose backward's
// parts the CPU's oneDNN plans would otherwise make), else of all its passes.
size_t model_conv2d_work_floats(const model_t *m, const conv2d_shape_t *s);

// The 2-D layers of app/model/layers/conv2d_bn.h: a convolution's weight gradient and input
// gradient (dx overwritten or added, dx_accumulate) by precision and mode, its output gradient as
// dy or, in bf16 models, rounded as dyh; BatchNorm2d over B samples of HW rows with the
// residual-ReLU epilogue (kernels/batchnorm2d.h; the backward writes dx and dres), over the rank's
// batch or, in the invariant mode, the global one (or each group of samples: --invariant-bn
// group; work then holds a group's shift). The training forward writes yh = bf16(y) too where yh
// is given and the mode has that fused pass (the plain mode's, and groups' on the default
// kernels: model_writes_bf16), and says whether it did; its input is x or there its bf16 copy
// xh (and the residual so: residual_h). In the invariant mode's bf16 training the BatchNorm's input
// gradient may come as its bf16 rounding alone (dxh instead of dx), and the convolution's output
// gradient so (dyh instead of dy): the one reader of the one is the other.
void model_conv2d_backward(model_t *m, float *dx, int dx_accumulate, int64_t w, const float *dy, const spk_bf16 *dyh,
                           const float *x, const spk_bf16 *xh, const conv2d_shape_t *s, float *work);
// bf16 training's rounded units (model_writes_bf16): the input gradient written in bf16 alone
// (dxh), for a BatchNorm2d that reads it so.
void model_conv2d_backward_rounded(model_t *m, spk_bf16 *dxh, int64_t w, const spk_bf16 *dyh, const spk_bf16 *xh,
                                   const conv2d_shape_t *s, float *work);
int model_batchnorm2d_train(model_t *m, float *y, spk_bf16 *yh, float *mean, float *rstd, int64_t running_mean,
                            int64_t running_var, const float *x, const spk_bf16 *xh, int64_t w, int64_t b,
                            const float *residual, const spk_bf16 *residual_h, int relu, int B, int HW, int C,
                            float eps, float momentum, float *work);
void model_batchnorm2d_backward(model_t *m, float *dx, spk_bf16 *dxh, float *dres, int64_t w, int64_t b,
                                const float *dy, const float *y, const float *x, const float *mean, const float *rstd,
                                int relu, int B, int HW, int C, float *work);
// The backward's inputs where bf16 training kept them in bf16: each of the output gradient, the
// output (the ReLU's mask) and the input in float32 or bf16 (the other NULL; x unused in bf16).
typedef struct {
    const float *dy, *y, *x;
    const spk_bf16 *dyh, *yh, *xh;
} model_bn2d_in_t;
// bf16 training's rounded units (model_writes_bf16): dxh = the convolution's output gradient,
// rounded, written in the BatchNorm's pass.
void model_batchnorm2d_backward_rounded(model_t *m, spk_bf16 *dxh, float *dres, int64_t w, int64_t b,
                                        const model_bn2d_in_t *in, const float *mean, const float *rstd, int relu,
                                        int B, int HW, int C, float *work);
