// The audio encoders beside the face encoder (resnet34-av, campplus-av; ecapa-av is in
// test_ecapa_model): gradients by finite differences (tests/model/gradcheck.h), with some samples
// going without one stream (modality dropout).
#include "app/model/layers/aam_encoder.h"
#include "app/model/model.h"
#include "kernels/aam_softmax.h"
#include "tests/model/gradcheck.h"
#include "tests/test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

// Every tensor, or (only != NULL) those whose names contain one of only[] (NULL-terminated; a
// leading '^' matches at the start of the name only).
static int wanted(const char *tensor, const char *const *only) {
    for (int k = 0; only && only[k]; k++) {
        const char *o = only[k];
        if (o[0] == '^' ? strncmp(tensor, o + 1, strlen(o + 1)) == 0 : strstr(tensor, o) != NULL) return 1;
    }
    return only == NULL;
}

static void av_gradcheck(const char *name, int64_t channels, const char *const *only) {
    enum { B = 8, T = 24, F = 16, R = 4, S = 18, FV = 3 * S * S };
    model_config_t mc = model_config_defaults(name);
    mc.channels = channels, mc.emb_dim = 6, mc.face_channels = 4, mc.margin = 0.2, mc.scale = 4;
    mc.growth_rate = 8, mc.bn_size = 2;  // (CAM++: a small dense block)
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
    int count = 0;
    for (int i = 0; i < m->table.count; i++) {
        const param_tensor_t *pt = &m->table.t[i];
        if (wanted(pt->name, only))
            t[count++] = (gc_tensor_t){pt->name, m->params + pt->offset, m->grads + pt->offset, pt->numel};
    }
    const double worst = gradcheck_tensors(t, count, av_loss, &ctx, base, 1e-4, &r);
    printf("%s gradient check (face encoder, modality dropout): %d tensors, worst median error %.2f of the tolerance\n",
           name, count, worst);
    free(t);
    model_free(m);
}

// test_av_models [resnet34-av|campplus-av]: one encoder (ctest runs them side by side), or both.
int main(int argc, char **argv) {
    const char *which = argc > 1 ? argv[1] : NULL;
    if (which && strcmp(which, "resnet34-av") != 0 && strcmp(which, "campplus-av") != 0) {
        fprintf(stderr, "test_av_models: unknown encoder %s (resnet34-av, campplus-av)\n", which);
        return 2;
    }
    // The encoders' own gradients are checked against their toolkits (test_resnet_golden,
    // test_campplus_golden): here the face encoder, the layers the two streams meet in, the last
    // audio block, and the stem (the audio's gradient through the join all the way down).
    static const char *const resnet[] = {"visual.", "seg_1.", "layer4.2.", "^conv1.", "^bn1.", NULL};
    static const char *const campp[] = {"visual.", "xvector.dense.", "out_nonlinear", "transit3", "head.conv1", NULL};
    if (!which || strcmp(which, "resnet34-av") == 0) av_gradcheck("resnet34-av", 8, resnet);
    if (!which || strcmp(which, "campplus-av") == 0) av_gradcheck("campplus-av", 16, campp);
    return test_report("test_av_models");
}
