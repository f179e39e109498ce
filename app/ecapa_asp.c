// Attentive statistics pooling with global context (SpeechBrain AttentiveStatisticsPooling):
//   [h, mean(h), std(h)] -> TDNN -> tanh -> 1x1 conv -> softmax over time = attention
//   pooled = [attention-weighted mean | attention-weighted std]
#include "app/check.h"
#include "app/ecapa.h"
#include "kernels/activation.h"
#include "kernels/conv1d.h"
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
    a->attn_in = alloc_f(bt * 3 * c);
    a->attn_t = alloc_f(bt * at);
    a->attn_w = alloc_f(bt * c);
    a->g_in = alloc_f(bt * 3 * c);
    a->g_w = alloc_f(bt * c);
    a->g_logit = alloc_f(bt * c);
    a->g_t = alloc_f(bt * at);
    a->g_a = alloc_f(bt * at);
    a->g_gstats = alloc_f((size_t)B * 2 * c);
}

void asp_free(asp_t *a) {
    tdnn_free(&a->tdnn);
    float **bufs[] = {&a->gstats, &a->attn_in, &a->attn_t, &a->attn_w, &a->g_in,
                      &a->g_w,    &a->g_logit, &a->g_t,    &a->g_a,    &a->g_gstats};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        free(*bufs[i]);
        *bufs[i] = NULL;
    }
}

size_t asp_work_floats(const asp_t *a, int B, int T) {
    size_t w = tdnn_work_floats(&a->tdnn, B, T), c = conv1d_workspace_floats(B, a->att, a->cin, T, 1, 1);
    return w > c ? w : c;
}

void asp_forward(asp_t *a, model_t *m, const float *h, float *pooled, int ld, int B, int T, int train, float *work) {
    const int C = a->cin, A = a->att;
    const float *p = m->params;
    weighted_stats_forward(a->gstats, a->gstats + C, h, NULL, B, C, T, 2 * C, STATS_EPS);
    channel_slice_copy(a->attn_in, 3 * C, h, C, B, C, T);
    time_repeat_forward(a->attn_in + (size_t)C * T, 3 * C, a->gstats, 2 * C, B, C, T);
    time_repeat_forward(a->attn_in + (size_t)2 * C * T, 3 * C, a->gstats + C, 2 * C, B, C, T);
    tdnn_forward(&a->tdnn, m, a->attn_in, B, T, train, work);
    tanh_forward(a->attn_t, a->tdnn.y, (size_t)B * T * A);
    conv1d_forward(a->attn_w, a->attn_t, p + a->conv_w, p + a->conv_b, B, A, C, T, 1, 1, work);
    softmax_time_forward(a->attn_w, a->attn_w, B, C, T);
    weighted_stats_forward(pooled, pooled + C, h, a->attn_w, B, C, T, ld, STATS_EPS);
}

void asp_backward(asp_t *a, model_t *m, float *dh, const float *dpooled, const float *h, const float *pooled, int ld, int B,
                  int T, float *work) {
    const int C = a->cin, A = a->att;
    const float *p = m->params;
    float *gr = m->grads;
    const size_t bc = (size_t)B * C * T, ba = (size_t)B * A * T;
    memset(a->g_w, 0, bc * sizeof(float));
    weighted_stats_backward(dh, a->g_w, dpooled, dpooled + C, h, a->attn_w, pooled, pooled + C, B, C, T, ld, STATS_EPS);
    memset(a->g_logit, 0, bc * sizeof(float));
    softmax_time_backward(a->g_logit, a->g_w, a->attn_w, B, C, T);
    memset(a->g_t, 0, ba * sizeof(float));
    conv1d_backward(a->g_t, gr + a->conv_w, gr + a->conv_b, a->g_logit, a->attn_t, p + a->conv_w, B, A, C, T, 1, 1, work);
    memset(a->g_a, 0, ba * sizeof(float));
    tanh_backward(a->g_a, a->g_t, a->attn_t, ba);
    memset(a->g_in, 0, 3 * bc * sizeof(float));
    tdnn_backward(&a->tdnn, m, a->g_in, a->g_a, a->attn_in, B, T, a->g_t, work);
    // Split the gradient of [h, mean, std]: h directly, the statistics through their sums.
    channel_slice_add(dh, C, a->g_in, 3 * C, B, C, T);
    memset(a->g_gstats, 0, (size_t)B * 2 * C * sizeof(float));
    time_repeat_backward(a->g_gstats, 2 * C, a->g_in + (size_t)C * T, 3 * C, B, C, T);
    time_repeat_backward(a->g_gstats + C, 2 * C, a->g_in + (size_t)2 * C * T, 3 * C, B, C, T);
    weighted_stats_backward(dh, NULL, a->g_gstats, a->g_gstats + C, h, NULL, a->gstats, a->gstats + C, B, C, T, 2 * C,
                            STATS_EPS);
}
