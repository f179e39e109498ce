// Attentive statistics pooling with global context (SpeechBrain AttentiveStatisticsPooling):
//   [h, mean(h), std(h)] -> TDNN -> tanh -> 1x1 conv -> softmax over time = attention
//   pooled = [attention-weighted mean | attention-weighted std]
// The TDNN's 1x1 convolution over the (3 cin)-channel concatenation is split by columns of
// its weight W = [W_h | W_m | W_s]: W_h h is a convolution over cin channels, and
// W_m mean + W_s std + bias is one vector per sample (the statistics do not change in time).
// That is a third of the FLOPs and no (B, 3 cin, T) tensor, forward or backward.
// bf16 models run W_h h, its two gradients and the attention convolution on bf16 operands
// (h, tanh output and the TDNN gradient rounded once each); the statistics, the small
// per-sample GEMMs of the statistics part and the softmax stay float32.
#include "app/model/ecapa/ecapa_asp.h"

#include "app/model/layers/model_layers.h"

#include <stdio.h>
#include <string.h>

#define STATS_EPS 1e-12f

void asp_register(asp_t *a, model_t *m, const char *prefix, int cin, int att) {
    char name[PARAM_NAME_MAX];
    memset(a, 0, sizeof *a);
    a->cin = cin, a->att = att;
    snprintf(name, sizeof name, "%s.conv.conv.weight", prefix);
    a->conv_w = param_table_add(&m->table, name, 3, (int64_t[]){cin, att, 1});
    snprintf(name, sizeof name, "%s.conv.conv.bias", prefix);
    a->conv_b = param_table_add(&m->table, name, 1, (int64_t[]){cin});
    snprintf(name, sizeof name, "%s.tdnn", prefix);
    tdnn_register(&a->tdnn, m, name, 3 * cin, att, 1, 1);
}

void asp_alloc(asp_t *a, const model_t *m, int B, size_t bt) {
    const size_t c = (size_t)a->cin, at = (size_t)a->att;
    tdnn_alloc_post(&a->tdnn, m, B, bt);
    if (m->bf16) {
        a->hh = model_buf_bf16(m, bt * c);
        a->attn_th = model_buf_bf16(m, bt * at);
        a->gh = model_buf_bf16(m, bt * at);
    }
    a->gstats = model_buf(m, (size_t)B * 2 * c);
    a->ctx = model_buf(m, (size_t)B * at);
    a->attn_t = model_buf(m, bt * at);
    a->attn_w = model_buf(m, bt * c);
    a->g_logit = model_buf(m, bt * c);
    a->g_t = model_buf(m, bt * at);
    a->g_a = model_buf(m, bt * at);
    a->g_ctx = model_buf(m, (size_t)B * at);
    a->g_gstats = model_buf(m, (size_t)B * 2 * c);
}

void asp_free(asp_t *a, const model_t *m) {
    tdnn_free(&a->tdnn, m);
    model_buf_bf16_free(m, &a->hh);
    model_buf_bf16_free(m, &a->attn_th);
    model_buf_bf16_free(m, &a->gh);
    float **bufs[] = {&a->gstats, &a->ctx, &a->attn_t, &a->attn_w,  &a->g_logit,
                      &a->g_t,    &a->g_a, &a->g_ctx,  &a->g_gstats};
    model_bufs_free(m, bufs, sizeof bufs / sizeof bufs[0]);
}

// Where sample b of a rounded (B, rows, T) operand lies: by default folded, (rows, B*T), so the
// weight gradient is one GEMM over the batch; in the invariant mode (B, rows, T), so a sample's
// GEMMs read it with one sample's strides whatever B is (model_round_conv1d_input's layout of
// groups of one sample).
typedef struct {
    int ld;          // row stride
    int64_t stride;  // from one sample to the next
} bf16_layout_t;

static bf16_layout_t bf16_layout(const model_t *m, int B, int rows, int T) {
    if (m->invariant) return (bf16_layout_t){T, (int64_t)rows * T};
    return (bf16_layout_t){B * T, T};
}

// The convolution's workspace; in float32 also W^T (3C, A), for the backward's input gradient.
size_t asp_work_floats(const asp_t *a, const model_t *m, int B, int T) {
    if (m->bf16) return m->be->conv1d_bf16_workspace_floats(B, a->att, a->cin, T, 1, 1);
    const size_t conv = m->be->conv1d_workspace_floats(B, a->att, a->cin, T, 1, 1), wt = (size_t)3 * a->cin * a->att;
    return conv > wt ? conv : wt;
}

void asp_forward(asp_t *a, model_t *m, const float *h, float *pooled, int ld, int B, int T, int train, float *work) {
    const spk_backend_t *K = m->be;
    const int C = a->cin, A = a->att;
    const float *p = m->params, *W = p + a->tdnn.w, *bias = p + a->tdnn.b;  // W (A, 3C)
    K->weighted_stats_forward(a->gstats, a->gstats + C, h, NULL, B, C, T, 2 * C, STATS_EPS);
    // ctx (B, A) = bias + [mean | std] [W_m | W_s]^T
    K->time_repeat_forward(a->ctx, A, bias, 0, B, A, 1);
    K->spk_sgemm('N', 'T', B, A, 2 * C, 1.0f, a->gstats, 2 * C, W + C, 3 * C, 1.0f, a->ctx, A);
    // conv (B, A, T): ctx_b repeated over time, + W_h h_b
    K->time_repeat_forward(a->tdnn.a, A, a->ctx, A, B, A, T);
    if (m->bf16) {
        const spk_bf16 *Wh = m->params_bf16 + a->tdnn.w;
        const bf16_layout_t l = bf16_layout(m, B, C, T);
        model_round_conv1d_input(m, m->invariant, a->hh, C, 0, h, C, NULL, B, C, T);
        K->spk_gemm_bf16_batched('N', 'N', A, T, C, Wh, 3 * C, 0, a->hh, l.ld, l.stride, 1.0f, a->tdnn.a, T,
                                 (int64_t)A * T, B);
    } else {
        K->spk_sgemm_batched('N', 'N', A, T, C, 1.0f, W, 3 * C, 0, h, T, (int64_t)C * T, 1.0f, a->tdnn.a, T,
                             (int64_t)A * T, B);
    }
    tdnn_post_forward(&a->tdnn, m, B, T, train);
    K->tanh_forward(a->attn_t, a->tdnn.y, (size_t)B * T * A);
    model_conv1d_forward(m, a->attn_w, a->attn_th, a->attn_t, a->conv_w, a->conv_b, B, A, C, T, 1, 1, train, work);
    K->attentive_stats_forward(a->attn_w, pooled, pooled + C, a->attn_w, h, B, C, T, ld, STATS_EPS);
}

void asp_backward(asp_t *a, model_t *m, float *dh, const float *dpooled, const float *h, const float *pooled, int ld,
                  int B, int T, float *work) {
    const spk_backend_t *K = m->be;
    const int C = a->cin, A = a->att;
    const float *p = m->params, *W = p + a->tdnn.w;
    float *gr = m->grads, *dW = gr + a->tdnn.w, *dbias = gr + a->tdnn.b;
    const size_t ba = (size_t)B * A * T;
    // dh's first gradient is written, not added to zeros
    K->attentive_stats_backward(dh, a->g_logit, dpooled, dpooled + C, h, a->attn_w, pooled, pooled + C, B, C, T, ld,
                                STATS_EPS, 0);
    model_conv1d_backward(m, a->g_t, 0, a->conv_w, a->conv_b, a->g_logit, NULL, a->attn_t, a->attn_th, B, A, C, T, 1, 1,
                          work);
    K->vec_zero(a->g_a, ba);
    K->tanh_backward(a->g_a, a->g_t, a->attn_t, ba);
    float *g = a->g_t;  // (B, A, T) gradient at the TDNN's convolution output
    tdnn_post_backward(&a->tdnn, m, a->g_a, g, B, T);
    // The h part: dW_h += sum_b g_b h_b^T (bf16: one GEMM over the folded batch; fp32: a batch
    // summed into one output), dh_b += W_h^T g_b (a batch). The statistics part through ctx.
    // (The invariant mode adds each sample's terms exactly.)
    if (m->bf16) {
        const spk_bf16 *Wh = m->params_bf16 + a->tdnn.w;
        const bf16_layout_t lg = bf16_layout(m, B, A, T), lh = bf16_layout(m, B, C, T);
        model_round_conv1d_input(m, m->invariant, a->gh, A, 0, g, A, NULL, B, A, T);
        if (m->invariant)
            model_gemm_bf16_grad_exact(m, 'N', 'T', A, C, T, a->gh, lg.ld, lg.stride, a->hh, lh.ld, lh.stride,
                                       a->tdnn.w, 3 * C, B);
        else  // one GEMM over the folded batch
            K->spk_gemm_bf16('N', 'T', A, C, B * T, a->gh, B * T, a->hh, B * T, 1.0f, dW, 3 * C);
        K->spk_gemm_bf16_batched('T', 'N', C, T, A, Wh, 3 * C, 0, a->gh, lg.ld, lg.stride, 1.0f, dh, T, (int64_t)C * T,
                                 B);
    } else {
        if (m->invariant)
            model_gemm_grad_exact(m, 'N', 'T', A, C, T, g, T, (int64_t)A * T, h, T, (int64_t)C * T, a->tdnn.w, 3 * C,
                                  B);
        else
            K->spk_sgemm_batched('N', 'T', A, C, T, 1.0f, g, T, (int64_t)A * T, h, T, (int64_t)C * T, 1.0f, dW, 3 * C,
                                 0, B);
        // dh_b += W_h^T g_b on a transposed copy of W (A, 3C) in the workspace, whose first C rows
        // are W_h^T: GEMMs reading their shared A transposed repack it per sample, with oneDNN's
        // AVX2 sgemm 64 -> 85 GFLOP/s on one thread for this shape (docs/kernels.md)
        K->batch_transpose(work, W, 1, A, 3 * C);
        K->spk_sgemm_batched('N', 'N', C, T, A, 1.0f, work, A, 0, g, T, (int64_t)A * T, 1.0f, dh, T, (int64_t)C * T, B);
    }
    K->vec_zero(a->g_ctx, (size_t)B * A);
    K->time_repeat_backward(a->g_ctx, A, g, A, B, A, T);  // g_ctx[b] = sum_t g_b
    if (m->invariant) {  // dbias += sum_b g_ctx[b], dW_stats += sum_b g_ctx[b]^T gstats[b]
        model_rows_grad_exact(m, a->tdnn.b, a->g_ctx, B, A);
        model_gemm_grad_exact(m, 'T', 'N', A, 2 * C, 1, a->g_ctx, A, A, a->gstats, 2 * C, 2 * C, a->tdnn.w + C, 3 * C,
                              B);
    } else {
        K->linear_backward(NULL, NULL, dbias, a->g_ctx, NULL, NULL, B, 1, A);
        K->spk_sgemm('T', 'N', A, 2 * C, B, 1.0f, a->g_ctx, A, a->gstats, 2 * C, 1.0f, dW + C, 3 * C);
    }
    K->spk_sgemm('N', 'N', B, 2 * C, A, 1.0f, a->g_ctx, A, W + C, 3 * C, 0.0f, a->g_gstats, 2 * C);
    K->weighted_stats_backward(dh, NULL, a->g_gstats, a->g_gstats + C, h, NULL, a->gstats, a->gstats + C, B, C, T,
                               2 * C, STATS_EPS);
}
