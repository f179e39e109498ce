// ECAPA-TDNN model checks: encoder parameter counts of the published configurations, and a
// finite-difference check of the whole network (encoder + AAM head) at a tiny size:
// directional derivatives of the loss along random directions, one per parameter tensor
// and one for the input, against the analytic gradient. ReLU kinks and float32 rounding
// limit this check to about 1% (tolerance 2%); test_ecapa_golden is the precise one (float64
// PyTorch reference, 5e-5). ecapa-av is checked on feature vectors and on pictures (its face
// encoder's every tensor, with some samples going without one stream: modality dropout).
#include "app/model/ecapa/ecapa.h"
#include "app/model/model.h"
#include "kernels/aam_softmax.h"
#include "kernels/base/rng.h"
#include "tests/model/gradcheck.h"
#include "tests/test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t encoder_params(int64_t C) {
    model_config_t mc = model_config_defaults("ecapa");
    mc.channels = C;
    model_t *m = model_create(&mc, &(model_data_t){.feature_dim = 80, .num_classes = 1000}, &spk_backend_cpu);
    int64_t n = m->table.total;
    for (int i = 0; i < m->table.count; i++)
        if (strcmp(m->table.t[i].name, "classifier.weight") == 0) n -= m->table.t[i].numel;
    model_free(m);
    return n;
}

typedef struct {
    model_t *m;
    const float *x, *v;
    const int32_t *y;
    int B, T;
} gc_ctx_t;

static double loss_at(model_t *m, const float *x, const float *v, const int32_t *y, int B, int T);
static double loss_of(void *ctx) {
    const gc_ctx_t *c = ctx;
    return loss_at(c->m, c->x, c->v, c->y, c->B, c->T);
}

// Loss of one training-mode forward (BatchNorm with batch statistics). Running statistics
// change with every call but do not enter the training-mode loss.
static double loss_at(model_t *m, const float *x, const float *v, const int32_t *y, int B, int T) {
    ecapa_t *e = m->impl;
    ecapa_forward(e, m, x, v, B, T, 1);
    float loss = 0;
    int correct = 0;
    aam_softmax_forward(&loss, &correct, e->head.aam_cache, e->emb, m->params + e->head.cls_w, y, B, (int)e->d.emb,
                        (int)e->d.classes, e->head.margin, e->head.scale, e->head.work);
    return loss;
}

// face: ecapa-av on 18 x 18 RGB pictures through a face encoder of width 4.
static void gradcheck(const char *model, int face) {
    // Tiny network in double-checkable territory: a small scale keeps the loss smooth.
    enum { B = 8, T = 24, F = 5, S = 3, R = 4 };
    const int FV = face ? 3 * 18 * 18 : 4;
    model_config_t mc = model_config_defaults(model);
    mc.channels = 32, mc.att_channels = 8, mc.se_channels = 8, mc.emb_dim = 6, mc.visual_channels = 8;
    mc.face_channels = face ? 4 : 0;
    mc.margin = 0.2, mc.scale = 4;
    int av = strcmp(model, "ecapa-av") == 0;
    model_t *m = model_create(&mc,
                              &(model_data_t){.feature_dim = F,
                                              .num_classes = S,
                                              .visual_dim = av ? FV : 0,
                                              .visual_ratio = R,
                                              .visual_kind = face ? VISUAL_PICTURES : 0},
                              &spk_backend_cpu);
    ecapa_t *e = m->impl;
    aam_encoder_reserve(m, B, T);
    static const int8_t keep[B] = {MODALITY_BOTH, MODALITY_AUDIO, MODALITY_VISUAL, MODALITY_BOTH,
                                   MODALITY_BOTH, MODALITY_AUDIO, MODALITY_BOTH,   MODALITY_VISUAL};
    if (face) m->modality = keep;  // modality dropout's zeroed statistics and gradients, too
    rng_t r = rng_init(5, 99, 0, 0);
    float x[B * T * F], dx[B * T * F];
    int32_t y[B] = {0, 2, 1, 2, 0, 1, 1, 2};
    for (int i = 0; i < B * T * F; i++) x[i] = (float)rng_normal(&r) + 0.3f;
    float vx[B * (T / R) * FV];
    for (int i = 0; i < B * (T / R) * FV; i++) vx[i] = (float)rng_normal(&r) - 0.2f;
    const float *vis = av ? vx : NULL;

    // Analytic gradient.
    double base = loss_at(m, x, vis, y, B, T);
    memset(m->grads, 0, (size_t)m->table.total * sizeof(float));
    memset(e->head.g_emb, 0, sizeof(float) * B * (size_t)e->d.emb);
    aam_softmax_backward(e->head.g_emb, m->grads + e->head.cls_w, 1.0f, e->head.aam_cache, e->emb,
                         m->params + e->head.cls_w, y, B, (int)e->d.emb, S, e->head.margin, e->head.scale,
                         e->head.work);
    ecapa_backward(e, m, e->head.g_emb, dx, B, T);
    EXPECT(isfinite(base), "loss %g", base);

    // Every tensor but the attention's conv bias (softmax shift invariance: its gradient is 0),
    // and the input.
    gc_tensor_t *t = malloc((size_t)(m->table.count + 1) * sizeof *t);
    int count = 0;
    for (int ti = 0; ti < m->table.count; ti++) {
        const param_tensor_t *pt = &m->table.t[ti];
        if (strcmp(pt->name, "asp.conv.conv.bias") == 0) continue;
        t[count++] = (gc_tensor_t){pt->name, m->params + pt->offset, m->grads + pt->offset, pt->numel};
    }
    t[count++] = (gc_tensor_t){"input", x, dx, B * T * F};
    // (the face encoder's stem is the most curved: its step is halved; at 2e-4 its worst direction
    // reaches about the tolerance, at 1e-4 a quarter of it)
    gc_ctx_t ctx = {m, x, vis, y, B, T};
    const double worst = gradcheck_tensors(t, count, loss_of, &ctx, base, face ? 1e-4 : 2e-4, &r);
    const int checked = count;
    free(t);
    printf("%s%s gradient check: %d tensors + input, worst median error %.2f of the tolerance\n", model,
           face ? " (face encoder, modality dropout)" : "", checked - 1, worst);
    model_free(m);
}

// Inference takes a long utterance's pictures in pieces (embed); the pieces give what all the
// pictures at once give (the running statistics make each picture independent).
static void face_pieces(void) {
    enum { N = 30, S = 18 };
    model_config_t mc = model_config_defaults("ecapa-av");
    mc.channels = 32, mc.att_channels = 8, mc.se_channels = 8, mc.emb_dim = 6, mc.visual_channels = 8;
    mc.face_channels = 4;
    model_t *m = model_create(&mc,
                              &(model_data_t){.feature_dim = 5,
                                              .num_classes = 3,
                                              .visual_dim = 3 * S * S,
                                              .visual_ratio = 4,
                                              .visual_kind = VISUAL_PICTURES},
                              &spk_backend_cpu);
    ecapa_t *e = m->impl;
    aam_encoder_reserve(m, 1, 4 * N);  // N pictures at once
    face_encoder_t *f = &e->vis.face;
    static float pics[N * S * S * 3], whole[N * 64], pieces[N * 64];
    rng_t r = rng_init(9, 99, 0, 0);
    for (int i = 0; i < N * S * S * 3; i++) pics[i] = (float)rng_normal(&r);
    const int64_t D = face_encoder_dim(f);
    EXPECT(D <= 64, "face encoder output %lld", (long long)D);
    face_encoder_forward(f, m, pics, whole, 1, N, 0, e->work);
    const int cap = f->cap_n;
    f->cap_n = 7;  // (the reservation is the piece size)
    face_encoder_forward(f, m, pics, pieces, 1, N, 0, e->work);
    f->cap_n = cap;
    double worst = 0;
    for (int64_t i = 0; i < N * D; i++) worst = fmax(worst, fabs(whole[i] - pieces[i]) / (fabs(whole[i]) + 1e-3));
    EXPECT(worst < 1e-5, "face encoder inference in pieces of 7 differs from all %d at once by %g", N, worst);
    printf("face encoder inference: %d pictures in pieces of 7 == all at once (worst relative %.1e)\n", N, worst);
    model_free(m);
}

// test_ecapa_model [ecapa|ecapa-av|ecapa-av-faces]: one part (ctest runs them side by side), or all.
int main(int argc, char **argv) {
    const char *part = argc > 1 ? argv[1] : "all";
    const int all = strcmp(part, "all") == 0;
    if (!all && strcmp(part, "ecapa") != 0 && strcmp(part, "ecapa-av") != 0 && strcmp(part, "ecapa-av-faces") != 0) {
        fprintf(stderr, "test_ecapa_model: unknown part %s (ecapa, ecapa-av, ecapa-av-faces)\n", part);
        return 2;
    }
    if (all || strcmp(part, "ecapa") == 0) {
        int64_t n512 = encoder_params(512), n1024 = encoder_params(1024);
        EXPECT(n512 == 6194048, "C=512 encoder has %lld parameters, want 6,194,048", (long long)n512);
        EXPECT(n1024 == 20767552, "C=1024 encoder has %lld parameters, want 20,767,552", (long long)n1024);
        printf("encoder parameters: C=512 %lld, C=1024 %lld\n", (long long)n512, (long long)n1024);
        gradcheck("ecapa", 0);
    }
    if (all || strcmp(part, "ecapa-av") == 0) gradcheck("ecapa-av", 0);
    if (all || strcmp(part, "ecapa-av-faces") == 0) {
        gradcheck("ecapa-av", 1);
        face_pieces();
    }
    return test_report("test_ecapa_model");
}
