// ECAPA-TDNN (SpeechBrain's ECAPA_TDNN topology) built from kernels/: layer structs hold
// parameter offsets (into model->params / model->grads), state offsets (BatchNorm running
// statistics in model->state) and pointers to their activations, which are allocated once
// per (batch, frames) shape and reused every step. Every buffer lives on the model's backend
// (m->be) and every op goes through it, so the same code trains on the CPU and on a GPU.
// Parameter names follow SpeechBrain's state_dict, so its checkpoints map one to one.
#pragma once
#include "app/model/model_impl.h"

#include <stddef.h>
#include <stdint.h>

#define ECAPA_SCALE 8  // Res2Net scale

typedef struct {
    int64_t feat;       // F
    int64_t channels;   // C
    int64_t att;        // attention channels (128)
    int64_t se;         // SE bottleneck (128)
    int64_t emb;        // embedding size (192)
    int64_t classes;    // S, AAM-softmax classes
    int64_t vfeat;      // visual stream: Fv features per frame (0: audio only)
    int64_t vchannels;  // visual TDNN channels Cv
    int64_t vratio;     // audio frames per visual frame
} ecapa_dims_t;

// Conv1d -> ReLU -> BatchNorm1d
typedef struct {
    int cin, cout, k, dil;
    int64_t w, b, bn_w,
        bn_b;  // params: conv.conv.weight (cout, cin, k), conv.conv.bias (cout), norm.norm.weight/bias (cout)
    int64_t run_mean, run_var;  // state: norm.norm.running_mean/var (cout)
    spk_bf16 *xh;               // (cin, B*T) the conv input rounded to bf16, batch folded into time (bf16 models)
    float *a;                   // (B, cout, T) relu(conv(x))
    float *y;                   // (B, cout, T) output
    float *mean, *rstd;         // (cout) batch statistics for backward
} tdnn_t;

// TDNN 1x1 -> Res2Net (scale 8) -> TDNN 1x1 -> squeeze-excitation -> + residual
typedef struct {
    tdnn_t tdnn1, tdnn2;
    tdnn_t res[ECAPA_SCALE - 1];     // res2net_block.blocks.i
    int64_t se1_w, se1_b;            // se_block.conv1.conv.weight (se, C), bias (se)
    int64_t se2_w, se2_b;            // se_block.conv2.conv.weight (C, se), bias (C)
    float *res_in[ECAPA_SCALE - 1];  // (B, C/8, T) input of res[i]
    float *res_out;                  // (B, C, T) concatenated Res2Net output
    float *s0;                       // (B, C) time mean
    float *s1;                       // (B, se) relu(conv1)
    float *s;                        // (B, C) sigmoid(conv2)
    float *out;                      // (B, C, T) block output
} seres_t;

// Attentive statistics pooling with global context over (B, cin, T) -> [mean | std].
// The TDNN over [h, mean, std] never builds that (B, 3 cin, T) tensor: mean and std are
// constant in time, so their part of the 1x1 convolution is a per-sample bias.
typedef struct {
    int cin, att;
    tdnn_t tdnn;             // <prefix>.tdnn: TDNN(3 cin -> att, k=1) over [h, mean, std]
    int64_t conv_w, conv_b;  // <prefix>.conv.conv.weight (cin, att, 1), bias (cin)
    spk_bf16 *hh;            // (cin, B*T) h rounded to bf16, batch folded into time (bf16 models)
    spk_bf16 *attn_th;       // (att, B*T) attn_t rounded to bf16 (bf16 models)
    spk_bf16 *gh;            // (att, B*T) backward: the TDNN output gradient in bf16 (bf16 models)
    float *gstats;           // (B, 2 cin) uniform-weight [mean | std]
    float *ctx;              // (B, att) the statistics' part of the TDNN's convolution, with its bias
    float *attn_t;           // (B, att, T) tanh
    float *attn_w;           // (B, cin, T) softmax over time
    float *g_w, *g_logit;    // (B, cin, T) backward scratch
    float *g_t, *g_a;        // (B, att, T)
    float *g_ctx;            // (B, att)
    float *g_gstats;         // (B, 2 cin)
} asp_t;

// ecapa-av's visual branch: two TDNN blocks and its own attentive statistics pooling.
typedef struct {
    tdnn_t blocks[2];            // visual.blocks.0 (Fv -> Cv, k=3, d=1), visual.blocks.1 (Cv -> Cv, k=3, d=2)
    asp_t asp;                   // visual.asp
    float *x;                    // (B, Fv, Tv) transposed visual frames
    float *g_h, *g_mid, *g_tmp;  // (B, Cv, Tv) backward scratch
} visual_t;

typedef struct {
    ecapa_dims_t d;
    int64_t pooled_dim;  // 6C, plus 2Cv with the visual branch
    tdnn_t block0;
    seres_t blocks[3];
    tdnn_t mfa;
    asp_t asp;
    int has_visual;
    visual_t vis;
    int64_t asp_bn_w, asp_bn_b;       // asp_bn.norm.weight/bias (P)
    int64_t asp_bn_mean, asp_bn_var;  // state (P)
    int64_t fc_w, fc_b;               // fc.conv.weight (E, P, 1), fc.conv.bias (E)
    int64_t cls_w;                    // classifier.weight (S, E)
    float margin, scale;              // AAM-softmax (margin follows the schedule)
    float margin_max;
    int64_t margin_start, margin_end;  // epochs of the margin ramp
    // activations for the current shape
    int cap_b;                 // activations hold up to cap_b samples
    size_t cap_bt;             // and up to cap_bt sample-frames (B * T)
    float *x;                  // (B, F, T) transposed input
    float *cat;                // (B, 3C, T) blocks 1..3 concatenated (MFA input)
    float *pooled;             // (B, P) [mean | std] of the audio (and visual) stream
    float *pooled_bn;          // (B, P)
    float *bn_mean, *bn_rstd;  // (P)
    float *emb;                // (B, E)
    float *aam_cache;          // (aam_softmax_cache_floats)
    // gradient scratch, reused by every step
    float *g3[2];    // (B, 3C, T): MFA output and input gradients
    float *gblk[4];  // (B, C, T) gradients of the outputs of blocks 0..3
    float *gvec[2];  // (B, P)
    float *g_emb;    // (B, E)
    float *work;     // conv / AAM workspace
    size_t work_floats;
    float *scalars;   // [loss, correct (an int)] of the last forward
    float *row_loss;  // (B) invariant mode: each sample's loss of the last forward
} ecapa_t;

// Makes room for B samples of T frames (grows the buffers when needed, never shrinks).
void ecapa_reserve(ecapa_t *e, const model_t *m, int B, int T);

// Encoder forward on frames (B, T, F) time-major (and, for ecapa-av, visual frames
// (B, T / vratio, Fv)), both in backend memory: fills e->emb. train = 1 uses batch statistics and updates running
// statistics; train = 0 uses running statistics.
void ecapa_forward(ecapa_t *e, model_t *m, const float *frames, const float *vframes, int B, int T, int train);
// Backward from g_emb (B, E) through the encoder; accumulates parameter gradients into
// m->grads and, when dframes is not NULL, the audio input gradient (B, T, F).
void ecapa_backward(ecapa_t *e, model_t *m, const float *g_emb, float *dframes, int B, int T);

// Blocks (app/ecapa_blocks.c, app/ecapa_asp.c)
void tdnn_register(tdnn_t *l, model_t *m, const char *prefix, int cin, int cout, int k, int dil);
void tdnn_alloc(tdnn_t *l, const model_t *m, size_t bt);       // activations for bt = B * T sample-frames
void tdnn_alloc_post(tdnn_t *l, const model_t *m, size_t bt);  // the same but for the conv input
void tdnn_free(tdnn_t *l, const model_t *m);
void tdnn_forward(tdnn_t *l, model_t *m, const float *x, int B, int T, int train, float *work);
// dx += d(loss)/dx (dx may be NULL); dy is not modified. g: scratch of (B, cout, T).
void tdnn_backward(tdnn_t *l, model_t *m, float *dx, const float *dy, const float *x, int B, int T, float *g,
                   float *work);
size_t tdnn_work_floats(const tdnn_t *l, const model_t *m, int B, int T);
// End of the block's parameters (it registers norm weight/bias, then conv weight/bias, last).
static inline int64_t tdnn_end(const tdnn_t *l) { return l->b + l->cout; }
// The block without its convolution: ReLU and BatchNorm of l->a (the conv output, filled by
// the caller), and their backward into g (B, cout, T), the gradient at the conv output. Such a
// block takes tdnn_alloc_post.
void tdnn_post_forward(tdnn_t *l, model_t *m, int B, int T, int train);
void tdnn_post_backward(tdnn_t *l, model_t *m, const float *dy, float *g, int B, int T);

void seres_register(seres_t *s, model_t *m, const char *prefix, int C, int se, int k, int dil);
void seres_alloc(seres_t *s, const model_t *m, int C, int se, int B, size_t bt);
void seres_free(seres_t *s, const model_t *m);
void seres_forward(seres_t *s, model_t *m, const float *x, int C, int se, int B, int T, int train, float *work);
// dx += gradient; dout is the gradient of the block output. g[0..3]: scratch of (B, C, T) each.
void seres_backward(seres_t *s, model_t *m, float *dx, const float *dout, const float *x, int C, int se, int B, int T,
                    float *const g[4], float *work);

void asp_register(asp_t *a, model_t *m, const char *prefix, int cin, int att);
void asp_alloc(asp_t *a, const model_t *m, int B, size_t bt);
void asp_free(asp_t *a, const model_t *m);
size_t asp_work_floats(const asp_t *a, const model_t *m, int B, int T);
// pooled[b * ld + c] = mean, pooled[b * ld + cin + c] = std of h (B, cin, T).
void asp_forward(asp_t *a, model_t *m, const float *h, float *pooled, int ld, int B, int T, int train, float *work);
// dh += gradient through the pooling; dpooled has the same layout as pooled.
void asp_backward(asp_t *a, model_t *m, float *dh, const float *dpooled, const float *h, const float *pooled, int ld,
                  int B, int T, float *work);
