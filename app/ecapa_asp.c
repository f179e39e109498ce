// Attentive statistics pooling with global context (SpeechBrain AttentiveStatisticsPooling):
//   [h, mean(h), std(h)] -> TDNN -> tanh -> 1x1 conv -> softmax over time = attention
//   pooled = [attention-weighted mean | attention-weighted std]
// The TDNN's 1x1 convolution over the (3 cin)-channel concatenation is split by columns of
// its weight W = [W_h | W_m | W_s]: W_h h is a convolution over cin channels, and
// W_m mean + W_s std + bias is one vector per sample (the statistics do not change in time).
// That is a third of the FLOPs and no (B, 3 cin, T) tensor, forward or backward.
#include "app/check.h"
#include "app/ecapa.h"
#include "kernels/activation.h"
#include "kernels/conv1d.h"
#include "kernels/gemm.h"
#include "kernels/pooling.h"
#include "kernels/tensor_ops.h"

#include <stdlib.h>
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

static float *alloc_f(size_t n) { return mallocCheck((n ? n : 1) * sizeof(float)); }

void asp_alloc(asp_t *a, int B, size_t bt) {
    const size_t c = (size_t)a->cin, at = (size_t)a->att;
    tdnn_alloc(&a->tdnn, bt);
    a->gstats = alloc_f((size_t)B * 2 * c);
    a->ctx = alloc_f((size_t)B * at);
    a->attn_t = alloc_f(bt * at);
    a->attn_w = alloc_f(bt * c);
    a->g_w = alloc_f(bt * c);
    a->g_logit = alloc_f(bt * c);
    a->g_t = alloc_f(bt * at);
    a->g_a = alloc_f(bt * at);
    a->g_ctx = alloc_f((size_t)B * at);
    a->g_gstats = alloc_f((size_t)B * 2 * c);
}

void asp_free(asp_t *a) {
    tdnn_free(&a->tdnn);
    float **bufs[] = {&a->gstats, &a->ctx, &a->attn_t, &a->attn_w, &a->g_w,
                      &a->g_logit, &a->g_t, &a->g_a,   &a->g_ctx,  &a->g_gstats};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        free(*bufs[i]);
        *bufs[i] = NULL;
    }
}

size_t asp_work_floats(const asp_t *a, int B, int T) { return conv1d_workspace_floats(B, a->att, a->cin, T, 1, 1); }

void asp_forward(asp_t *a, model_t *m, const float *h, float *pooled, int ld, int B, int T, int train, float *work) {
    const int C = a->cin, A = a->att;
    const float *p = m->params, *W = p + a->tdnn.w, *bias = p + a->tdnn.b;  // W (A, 3C)
    weighted_stats_forward(a->gstats, a->gstats + C, h, NULL, B, C, T, 2 * C, STATS_EPS);
    // ctx (B, A) = [mean | std] [W_m | W_s]^T + bias
    spk_sgemm('N', 'T', B, A, 2 * C, 1.0f, a->gstats, 2 * C, W + C, 3 * C, 0.0f, a->ctx, A);
    for (int b = 0; b < B; b++) vec_acc(a->ctx + (size_t)b * A, bias, (size_t)A);
    // conv (B, A, T): W_h h_b, then + ctx_b over time
    for (int b = 0; b < B; b++) {
        float *y = a->tdnn.a + (size_t)b * A * T;
        spk_sgemm('N', 'N', A, T, C, 1.0f, W, 3 * C, h + (size_t)b * C * T, T, 0.0f, y, T);
        for (int i = 0; i < A; i++) {
            const float c = a->ctx[(size_t)b * A + i];
            for (int t = 0; t < T; t++) y[(size_t)i * T + t] += c;
        }
    }
    tdnn_post_forward(&a->tdnn, m, B, T, train);
    tanh_forward(a->attn_t, a->tdnn.y, (size_t)B * T * A);
    conv1d_forward(a->attn_w, a->attn_t, p + a->conv_w, p + a->conv_b, B, A, C, T, 1, 1, work);
    softmax_time_forward(a->attn_w, a->attn_w, B, C, T);
    weighted_stats_forward(pooled, pooled + C, h, a->attn_w, B, C, T, ld, STATS_EPS);
}

void asp_backward(asp_t *a, model_t *m, float *dh, const float *dpooled, const float *h, const float *pooled, int ld, int B,
                  int T, float *work) {
    const int C = a->cin, A = a->att;
    const float *p = m->params, *W = p + a->tdnn.w;
    float *gr = m->grads, *dW = gr + a->tdnn.w, *dbias = gr + a->tdnn.b;
    const size_t bc = (size_t)B * C * T, ba = (size_t)B * A * T;
    memset(a->g_w, 0, bc * sizeof(float));
    weighted_stats_backward(dh, a->g_w, dpooled, dpooled + C, h, a->attn_w, pooled, pooled + C, B, C, T, ld, STATS_EPS);
    memset(a->g_logit, 0, bc * sizeof(float));
    softmax_time_backward(a->g_logit, a->g_w, a->attn_w, B, C, T);
    memset(a->g_t, 0, ba * sizeof(float));
    conv1d_backward(a->g_t, gr + a->conv_w, gr + a->conv_b, a->g_logit, a->attn_t, p + a->conv_w, B, A, C, T, 1, 1, work);
    memset(a->g_a, 0, ba * sizeof(float));
    tanh_backward(a->g_a, a->g_t, a->attn_t, ba);
    float *g = a->g_t;  // (B, A, T) gradient at the TDNN's convolution output
    tdnn_post_backward(&a->tdnn, m, a->g_a, g, B, T);
    // The h part: dW_h += g_b h_b^T, dh_b += W_h^T g_b. The statistics part through ctx.
    for (int b = 0; b < B; b++) {
        const float *gb = g + (size_t)b * A * T, *hb = h + (size_t)b * C * T;
        spk_sgemm('N', 'T', A, C, T, 1.0f, gb, T, hb, T, 1.0f, dW, 3 * C);
        spk_sgemm('T', 'N', C, T, A, 1.0f, W, 3 * C, gb, T, 1.0f, dh + (size_t)b * C * T, T);
        for (int i = 0; i < A; i++) {
            double s = 0.0;
            for (int t = 0; t < T; t++) s += gb[(size_t)i * T + t];
            a->g_ctx[(size_t)b * A + i] = (float)s;
        }
    }
    for (int b = 0; b < B; b++) vec_acc(dbias, a->g_ctx + (size_t)b * A, (size_t)A);
    spk_sgemm('T', 'N', A, 2 * C, B, 1.0f, a->g_ctx, A, a->gstats, 2 * C, 1.0f, dW + C, 3 * C);
    spk_sgemm('N', 'N', B, 2 * C, A, 1.0f, a->g_ctx, A, W + C, 3 * C, 0.0f, a->g_gstats, 2 * C);
    weighted_stats_backward(dh, NULL, a->g_gstats, a->g_gstats + C, h, NULL, a->gstats, a->gstats + C, B, C, T, 2 * C,
                            STATS_EPS);
}
