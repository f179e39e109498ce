// WeSpeaker's ResNets in spkddp: the encoder parameter count of every depth at WeSpeaker's
// defaults (F 80, m 32, embedding 256: ResNet34 6,634,336, as PyTorch counts it in
// tests/golden/make_resnet_golden.py), embeddings of utterances of several lengths the same
// alone as in a batch (inference uses the running statistics), and a training step on the
// cpu-staged backend (the GPU path's data movement) bitwise the cpu backend's; resnet34-av's
// gradients by finite differences.
#include "app/model/model.h"
#include "app/model/resnet/resnet.h"
#include "kernels/aam_softmax.h"
#include "kernels/base/rng.h"
#include "tests/model/gradcheck.h"
#include "tests/test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int64_t encoder_params(const char *depth) {
    model_config_t mc = model_config_defaults(depth);
    model_t *m = model_create(&mc, &(model_data_t){.feature_dim = 80, .num_classes = 10}, &spk_backend_cpu);
    int64_t n = m->table.total;
    for (int i = 0; i < m->table.count; i++)
        if (strcmp(m->table.t[i].name, "classifier.weight") == 0) n -= m->table.t[i].numel;
    EXPECT(m->emb_dim == 256, "%s: embedding %lld, want WeSpeaker's 256", depth, (long long)m->emb_dim);
    model_free(m);
    return n;
}

static model_t *small(const char *depth, const spk_backend_t *be) {
    model_config_t mc = model_config_defaults(depth);
    mc.channels = 4, mc.emb_dim = 8, mc.scale = 8;
    return model_create(&mc, &(model_data_t){.feature_dim = 16, .num_classes = 5}, be);
}

// A batch of n utterances whose lengths are len[i], random frames.
static batch_t batch_of(int n, const int *len, int F, rng_t *r) {
    batch_t b = {.n = n, .feature_dim = F};
    b.frame_off = calloc((size_t)n + 1, sizeof(int64_t));
    for (int i = 0; i < n; i++) b.frame_off[i + 1] = b.frame_off[i] + len[i];
    b.x = malloc((size_t)b.frame_off[n] * F * sizeof(float));
    for (int64_t i = 0; i < b.frame_off[n] * F; i++) b.x[i] = (float)rng_normal(r);
    b.labels = calloc((size_t)n, sizeof(int32_t));
    for (int i = 0; i < n; i++) b.labels[i] = i % 5;
    return b;
}

static void batch_free(batch_t *b) {
    free(b->frame_off);
    free(b->x);
    free(b->labels);
}

// Embeddings of a batch of mixed lengths, then of each utterance alone: the same values.
static void embed_lengths(const char *depth) {
    model_t *m = small(depth, &spk_backend_cpu);
    rng_t r = rng_init(3, 77, 0, 0);
    const int len[5] = {40, 40, 23, 9, 61};
    batch_t b = batch_of(5, len, 16, &r);
    const int E = (int)m->emb_dim;
    float all[5 * 8], one[8];
    m->ops->embed(m, &b, all);
    for (int i = 0; i < 5; i++) {
        batch_t s = {.n = 1, .feature_dim = 16, .frame_off = (int64_t[]){0, len[i]}, .x = b.x + b.frame_off[i] * 16};
        m->ops->embed(m, &s, one);
        double d = 0;
        for (int k = 0; k < E; k++) d = fmax(d, fabs(one[k] - all[i * E + k]));
        EXPECT(d <= 1e-5, "%s: utterance %d (%d frames) alone differs from the batch by %g", depth, i, len[i], d);
    }
    batch_free(&b);
    model_free(m);
}

// One training step on cpu and on cpu-staged: the same gradients and running statistics.
static void staged_step(const char *depth) {
    model_t *a = small(depth, &spk_backend_cpu), *s = small(depth, &spk_backend_cpu_staged);
    rng_t r = rng_init(4, 78, 0, 0);
    const int len[4] = {24, 24, 24, 24};
    batch_t b = batch_of(4, len, 16, &r);
    model_t *ms[2] = {a, s};
    for (int k = 0; k < 2; k++) {
        model_zero_grads(ms[k]);
        ms[k]->ops->train_step(ms[k], &b);
        step_stats_t st = {0};
        while (model_read_stats(ms[k], &st)) {}
        model_download(ms[k]);
    }
    float *ga = malloc((size_t)a->table.total * sizeof(float)), *gs = malloc((size_t)s->table.total * sizeof(float));
    s->be->download(gs, s->grads, (size_t)s->table.total * sizeof(float));
    memcpy(ga, a->grads, (size_t)a->table.total * sizeof(float));
    EXPECT(memcmp(ga, gs, (size_t)a->table.total * sizeof(float)) == 0, "%s: cpu-staged gradients differ", depth);
    EXPECT(memcmp(a->host_state, s->host_state, (size_t)a->state_table.total * sizeof(float)) == 0,
           "%s: cpu-staged running statistics differ", depth);
    free(ga);
    free(gs);
    batch_free(&b);
    model_free(a);
    model_free(s);
}

// resnet34-av: ResNet34 beside the face encoder, with some samples going without one stream
// (modality dropout), checked by finite differences (tests/model/gradcheck.h).
typedef struct {
    model_t *m;
    const float *x, *v;
    const int32_t *y;
    int B, T;
    const float *emb;  // of the last forward
} av_ctx_t;

static double av_loss(void *ctx) {
    av_ctx_t *c = ctx;
    aam_encoder_t *h = c->m->impl;
    const float *emb = c->emb = h->enc->forward(c->m, c->x, c->v, c->B, c->T, 1);
    float loss = 0;
    int correct = 0;
    aam_softmax_forward(&loss, &correct, h->aam_cache, emb, c->m->params + h->cls_w, c->y, c->B, (int)h->emb,
                        (int)c->m->head_rows, h->margin, h->scale, h->work);
    return loss;
}

static void av_gradcheck(void) {
    enum { B = 8, T = 24, F = 16, R = 4, S = 18, FV = 3 * S * S };
    model_config_t mc = model_config_defaults("resnet34-av");
    mc.channels = 8, mc.emb_dim = 6, mc.face_channels = 4, mc.margin = 0.2, mc.scale = 4;
    model_t *m = model_create(
        &mc,
        &(model_data_t){
            .feature_dim = F, .num_classes = 3, .visual_dim = FV, .visual_ratio = R, .visual_kind = VISUAL_PICTURES},
        &spk_backend_cpu);
    aam_encoder_t *h = m->impl;
    aam_encoder_reserve(m, B, T);
    static const int8_t keep[B] = {MODALITY_BOTH, MODALITY_AUDIO, MODALITY_VISUAL, MODALITY_BOTH,
                                   MODALITY_BOTH, MODALITY_AUDIO, MODALITY_BOTH,   MODALITY_VISUAL};
    m->modality = keep;
    rng_t r = rng_init(6, 99, 0, 0);
    static float x[B * T * F], v[B * (T / R) * FV];
    for (int i = 0; i < B * T * F; i++) x[i] = (float)rng_normal(&r) + 0.3f;
    for (int i = 0; i < B * (T / R) * FV; i++) v[i] = (float)rng_normal(&r) - 0.2f;
    const int32_t y[B] = {0, 2, 1, 2, 0, 1, 1, 2};
    av_ctx_t ctx = {m, x, v, y, B, T, NULL};
    const double base = av_loss(&ctx);
    memset(m->grads, 0, (size_t)m->table.total * sizeof(float));
    memset(h->g_emb, 0, sizeof(float) * B * (size_t)h->emb);
    aam_softmax_backward(h->g_emb, m->grads + h->cls_w, 1.0f, h->aam_cache, ctx.emb, m->params + h->cls_w, y, B,
                         (int)h->emb, (int)m->head_rows, h->margin, h->scale, h->work);
    h->enc->backward(m, h->g_emb, B, T);
    EXPECT(isfinite(base), "loss %g", base);
    gc_tensor_t *t = malloc((size_t)m->table.count * sizeof *t);
    for (int i = 0; i < m->table.count; i++) {
        const param_tensor_t *pt = &m->table.t[i];
        t[i] = (gc_tensor_t){pt->name, m->params + pt->offset, m->grads + pt->offset, pt->numel};
    }
    const double worst = gradcheck_tensors(t, m->table.count, av_loss, &ctx, base, 1e-4, &r);
    printf(
        "resnet34-av gradient check (face encoder, modality dropout): %d tensors, worst median error %.2f of the "
        "tolerance\n",
        m->table.count, worst);
    free(t);
    model_free(m);
}

int main(void) {
    // WeSpeaker's depths at its defaults (PyTorch's counts, tests/golden/make_resnet_golden.py)
    const char *depth[7] = {"resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "resnet221", "resnet293"};
    const int64_t want[7] = {4105440, 6634336, 11131360, 15892448, 19814880, 23792224, 28626016};
    for (int i = 0; i < 7; i++) {
        const int64_t n = encoder_params(depth[i]);
        EXPECT(n == want[i], "%s encoder has %lld parameters, want %lld", depth[i], (long long)n, (long long)want[i]);
        printf("%s: %lld encoder parameters\n", depth[i], (long long)n);
    }
    embed_lengths("resnet34");
    embed_lengths("resnet50");
    staged_step("resnet34");
    staged_step("resnet50");
    av_gradcheck();
    return test_report("test_resnet_model");
}
