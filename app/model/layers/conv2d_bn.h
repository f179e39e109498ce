// The unit 2-D encoders are made of (ResNets, CAM++'s front end): a 2-D convolution without bias
// and the BatchNorm2d after it, with a residual block's epilogue (the addition of a residual and
// a ReLU) fused into the normalisation. Activations are channels-last (B, H, W, C), as
// kernels/conv2d.h takes them; bf16 models give the convolution bf16 operands (the rounded input
// is kept for the backward). Parameters are named as PyTorch's nn.Conv2d and nn.BatchNorm2d.
#pragma once
#include "app/model/core/model_core.h"
#include "kernels/conv2d.h"

#include <stddef.h>
#include <stdint.h>

#define CONV2D_BN_EPS      1e-5f
#define CONV2D_BN_MOMENTUM 0.1f

// A convolution's geometry (kernel, stride, zero padding, dilation; height then width). conv1d:
// an nn.Conv1d over maps one row high (its weight (cout, cin, kw), the same floats).
typedef struct {
    int kh, kw, sh, sw, ph, pw, dh, dw;
    int conv1d;
} conv2d_geom_t;

// A square kernel k, the same stride both ways, padding k / 2 (the ResNets' convolutions).
static inline conv2d_geom_t conv2d_geom_square(int k, int stride) {
    return (conv2d_geom_t){k, k, stride, stride, k / 2, k / 2, 1, 1, 0};
}
// An nn.Conv1d of kernel k along the width (time), with stride, dilation and zero padding.
static inline conv2d_geom_t conv2d_geom_1d(int k, int stride, int pad, int dilation) {
    return (conv2d_geom_t){1, k, 1, stride, 0, pad, 1, dilation, 1};
}
// The convolution of geometry g over B inputs of H x W, cin -> cout channels.
static inline conv2d_shape_t conv2d_geom_shape(conv2d_geom_t g, int B, int cin, int cout, int H, int W) {
    return (conv2d_shape_t){B, cin, cout, H, W, g.kh, g.kw, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw};
}
// Rows left of h after `times` 3x3 stride-2 (padding 1) halvings: (h + 1) / 2 each. The 2-D
// encoders' toolkits size their flattening for h / 8 rows after three.
static inline int64_t conv2d_halved_rows(int64_t h, int times) {
    for (int i = 0; i < times; i++) h = (h + 1) / 2;
    return h;
}
// Ends the run unless F features leave F / 8 rows after three halvings, which `toolkit`'s class
// of `model` needs to load the export: a dataset's (exit 3, naming it) or bench's --feat (exit 2).
void conv2d_check_front_rows(const char *model, const char *toolkit, const model_data_t *data, int64_t F);

typedef struct conv2d_bn {
    int cin, cout;
    conv2d_geom_t g;
    int64_t w;                            // <conv>.weight (cout, cin, k, k)
    int64_t bn_w, bn_b, bn_mean, bn_var;  // <bn>.weight, .bias; .running_mean, .running_var (state)
    conv2d_shape_t s;                     // the convolution at the current batch and input size
    float *a;                             // (B, OH, OW, cout) the convolution's output (bf16 training: its
                                          // bf16 rounding, in the same storage)
    float *y;                             // (B, OH, OW, cout) act(bn(a) + residual) (out_bf16: see below)
    float *mean, *rstd;                   // (cout) the batch statistics of the last training forward
    spk_bf16 *xh;                         // bf16 models: the rounded input (B, H, W, cin)
    size_t cap, cap_x;                    // a and y hold cap floats, xh cap_x values
    size_t cap_stats;                     // mean and rstd hold cap_stats floats
    int per_sample;  // inputs a sample has (a video's frames; 0 or 1: one): the BatchNorm normalises over
                     // samples of per_sample maps each, as the invariant mode counts the global batch
    // bf16 training: the unit whose input is this one's output y (its first reader), whose xh
    // this unit's BatchNorm writes in the pass that writes y (NULL: none, or not a conv2d_bn);
    // on that unit, whether its xh holds the rounding of this step's input already; and on this
    // one, whether the last forward wrote next's xh (its backward then reads the ReLU's mask
    // there, half the bytes of y), and whether next's xh is the one reader of y (a residual
    // block's inner unit; a stem or block output whose next block takes its residual from there
    // too), whose float32 output bf16 training then does not write.
    struct conv2d_bn *next;
    int xh_ready, wrote_next, only_next;
    // bf16 models: the unit whose rounded input is this one's too (a block's shortcut reads the
    // block's input as its first unit does), or NULL: its own. bf16 training: out_bf16 keeps
    // the output in bf16 alone, in y's storage (a shortcut's, added as a bf16 residual).
    struct conv2d_bn *xh_of;
    int out_bf16;
    // bf16 training: the output's gradient comes in bf16 (dy_bf16: its one reader was the next
    // unit's convolution, whose input gradient is stored so), the input's goes in bf16 (dx_bf16:
    // to the BatchNorm of the unit before alone), each in the storage of the float buffer passed.
    int dy_bf16, dx_bf16;
} conv2d_bn_t;

// Registers a BatchNorm: <bn>.weight and .bias (c each) as parameters, .running_mean and
// .running_var as state; their offsets into w, b, mean, var.
void bn_register(model_t *m, const char *bn, int64_t c, int64_t *w, int64_t *b, int64_t *mean, int64_t *var);
// Registers <bn> (weight, bias, running statistics) then <conv>.weight: reverse execution order.
void conv2d_bn_register(conv2d_bn_t *u, model_t *m, const char *conv, const char *bn, int cin, int cout,
                        conv2d_geom_t g);
// Sets the unit's shape for B inputs of H x W (returns its output height and width in oh, ow).
void conv2d_bn_shape(conv2d_bn_t *u, int B, int H, int W, int *oh, int *ow);
// Scratch the unit's convolution and normalisation need at its current shape.
size_t conv2d_bn_work_floats(const conv2d_bn_t *u, const model_t *m);
// Makes the activations hold the current shape (grows, never shrinks); release frees them.
void conv2d_bn_alloc(conv2d_bn_t *u, const model_t *m);
void conv2d_bn_release(conv2d_bn_t *u, const model_t *m);
// Output elements at the current shape.
size_t conv2d_bn_out_size(const conv2d_bn_t *u);

// y = act(bn(conv(x)) + residual) (residual NULL: none; residual_h: it in bf16, bf16 training
// only); train: batch statistics (updating the running ones), else the running statistics.
void conv2d_bn_forward(conv2d_bn_t *u, model_t *m, const float *x, const float *residual, const spk_bf16 *residual_h,
                       int relu, int train, float *work);
// The unit's rounded input (bf16 models): its own, or xh_of's.
static inline spk_bf16 *conv2d_bn_xh(const conv2d_bn_t *u) { return u->xh_of ? u->xh_of->xh : u->xh; }
// From dy, the gradient of y: the parameter gradients (accumulated), the residual's gradient into
// dres (overwritten; NULL: not needed) and the input's into dx (overwritten, or added with
// dx_accumulate; NULL: not needed). ga: scratch of the unit's output size. x: the forward's input
// (unused by bf16 models, which read xh). bf16 training: dy and dx hold bf16 values where
// dy_bf16 and dx_bf16 say so.
void conv2d_bn_backward(conv2d_bn_t *u, model_t *m, float *dx, int dx_accumulate, float *dres, const float *dy,
                        const float *x, int relu, float *ga, float *work);
// The offset just past the unit's parameters (its gradients are final once its backward ran).
int64_t conv2d_bn_end(const conv2d_bn_t *u);
