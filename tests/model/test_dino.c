// DINO (app/model/layers/dino.h) on a small ECAPA-TDNN: the student's gradients by finite
// differences through the whole step (the projection head with its BatchNorms, the weight-
// normalised prototypes, the multi-crop loss, the global crops' pass and the local crops'
// pass made again), with the teacher and the centre held where the step found them; the step
// leaves the running statistics as one pass over each crop leaves them; the centre moves
// towards the teacher outputs' mean; the teacher's EMA; model_use_teacher.
#include "app/model/layers/aam_encoder.h"
#include "app/model/model.h"
#include "tests/model/gradcheck.h"
#include "tests/test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { U = 3, V = 4, VG = 2, T = 24, TL = 16, F = 12 };

typedef struct {
    model_t *m;
    batch_t *b;
    float *state0;  // the state before the step: the teacher, the centre, the running statistics
} dino_ctx_t;

static double dino_loss(void *p) {
    dino_ctx_t *c = p;
    model_t *m = c->m;
    memcpy(m->state, c->state0, (size_t)m->state_table.total * sizeof(float));
    m->ops->train_step(m, c->b);
    step_stats_t st = {0};
    model_read_stats(m, &st);
    return st.loss_sum / (double)st.count;
}

static int64_t state_of(const model_t *m, const char *name) {
    for (int i = 0; i < m->state_table.count; i++)
        if (strcmp(m->state_table.t[i].name, name) == 0) return m->state_table.t[i].offset;
    EXPECT(0, "no state tensor %s", name);
    return 0;
}

int main(void) {
    model_config_t mc = model_config_defaults("ecapa");
    mc.channels = 16, mc.att_channels = 8, mc.se_channels = 8, mc.emb_dim = 8;
    snprintf(mc.loss, sizeof mc.loss, "dino");
    mc.views = V, mc.global_views = VG;
    mc.dino_hidden = 12, mc.dino_bottleneck = 6, mc.dino_out = 20;
    mc.teacher_temp = 0.5, mc.teacher_temp_start = 0.5, mc.student_temp = 0.7, mc.freeze_last_layer = 0;
    model_t *m = model_create(&mc, &(model_data_t){.feature_dim = F, .num_classes = 5}, &spk_backend_cpu);
    EXPECT(m->teacher, "--loss dino gives the model a teacher");

    // U utterances, V views each: VG of T frames, then V - VG of TL.
    int64_t off[U * V + 1];
    off[0] = 0;
    for (int i = 0; i < U * V; i++) off[i + 1] = off[i] + (i % V < VG ? T : TL);
    float *x = malloc((size_t)off[U * V] * F * sizeof(float));
    rng_t r = rng_init(3, 99, 0, 0);
    for (int64_t i = 0; i < off[U * V] * F; i++) x[i] = (float)rng_normal(&r);
    int32_t labels[U * V] = {0};
    int64_t index[U * V];
    for (int i = 0; i < U * V; i++) index[i] = i / V;
    batch_t b = {.n = U * V, .feature_dim = F, .frame_off = off, .x = x, .labels = labels, .index = index};

    // A first step makes the teacher (the student's copy); a few updates then move the student
    // away from it, so the teacher is not the student in the check.
    const size_t ns = (size_t)m->state_table.total, np = (size_t)m->table.total;
    dino_ctx_t c = {m, &b, malloc(ns * sizeof(float))};
    memcpy(c.state0, m->state, ns * sizeof(float));
    for (int k = 0; k < 3; k++) {
        model_zero_grads(m);
        dino_loss(&c);
        m->ops->after_averaging(m);
        memcpy(c.state0, m->state, ns * sizeof(float));
        for (size_t i = 0; i < np; i++) m->params[i] -= 0.05f * m->grads[i];
    }
    const float *teacher = m->state + m->teacher_params;
    double moved = 0;
    for (size_t i = 0; i < np; i++) moved += fabs((double)teacher[i] - m->params[i]);
    EXPECT(moved > 0, "the student moved away from the teacher");

    // The centre moved by (1 - 0.9) of the teacher outputs' mean at each step: not zero.
    const int64_t centre = state_of(m, "dino.centre");
    double cn = 0;
    for (int k = 0; k < mc.dino_out; k++) cn += fabs(m->state[centre + k]);
    EXPECT(cn > 0 && isfinite(cn), "the centre moved (|c|_1 = %g)", cn);

    // Running statistics: a step leaves those one pass over each crop group leaves.
    const int64_t rm = state_of(m, "blocks.0.norm.norm.running_mean");
    memcpy(m->state, c.state0, ns * sizeof(float));
    const float before = m->state[rm];
    model_zero_grads(m);
    const double base = dino_loss(&c);
    m->ops->after_averaging(m);  // (the prototypes' normalisation, once the gradient is final)
    const float after = m->state[rm];
    EXPECT(isfinite(base) && base > 0, "loss %g", base);
    EXPECT(after != before, "the running mean moved");

    float *g = malloc(np * sizeof(float));
    memcpy(g, m->grads, np * sizeof(float));
    gc_tensor_t *t = malloc((size_t)m->table.count * sizeof *t);
    int count = 0;
    for (int i = 1; i < m->table.count; i++) {  // (the classifier is not trained by DINO)
        const param_tensor_t *pt = &m->table.t[i];
        t[count++] = (gc_tensor_t){pt->name, m->params + pt->offset, g + pt->offset, pt->numel};
    }
    const double worst = gradcheck_tensors(t, count, dino_loss, &c, base, 1e-3, &r);
    printf(
        "dino gradient check: %d tensors (head, prototypes, encoder through both crop lengths), worst median "
        "error %.2f of the tolerance\n",
        count, worst);
    double gv = 0;
    for (int64_t i = 0; i < m->table.t[0].numel; i++) gv += fabs(g[m->table.t[0].offset + i]);
    EXPECT(gv == 0, "the classifier has no gradient (%g)", gv);

    // The EMA at step 1 of 3: momentum 0.996; at the last: 1 (the teacher stays).
    memcpy(m->state, c.state0, ns * sizeof(float));
    float *t0 = malloc(np * sizeof(float));
    memcpy(t0, teacher, np * sizeof(float));
    m->ops->after_update(m, 1, 3);
    double worst_ema = 0;
    for (size_t i = 0; i < np; i++) {
        const double want = 0.996 * t0[i] + (1 - 0.996) * m->params[i];
        worst_ema = fmax(worst_ema, fabs(teacher[i] - want) / (fabs(want) + 1e-6));
    }
    EXPECT(worst_ema < 1e-5, "EMA at momentum 0.996: worst relative error %g", worst_ema);
    memcpy(t0, teacher, np * sizeof(float));
    m->ops->after_update(m, 3, 3);
    EXPECT(memcmp(t0, teacher, np * sizeof(float)) == 0, "at the last update the momentum is 1");
    // model_use_teacher: the teacher's parameters and state become the model's.
    memcpy(t0, teacher, np * sizeof(float));
    model_use_teacher(m);
    EXPECT(memcmp(m->params, t0, np * sizeof(float)) == 0, "model_use_teacher takes the teacher's parameters");
    EXPECT(m->state[rm] == m->state[m->teacher_state + rm], "and its running statistics");

    // Frozen prototypes (--freeze-last-layer): no gradient, and the optimizer's update (weight
    // decay included) undone.
    model_free(m);
    mc.freeze_last_layer = 1;
    m = model_create(&mc, &(model_data_t){.feature_dim = F, .num_classes = 5}, &spk_backend_cpu);
    int64_t vo = -1, vn = 0;
    for (int i = 0; i < m->table.count; i++)
        if (strcmp(m->table.t[i].name, "dino_head.last_layer.weight_v") == 0)
            vo = m->table.t[i].offset, vn = m->table.t[i].numel;
    EXPECT(vo >= 0, "the prototypes are in the table");
    c.m = m;
    c.state0 = realloc(c.state0, (size_t)m->state_table.total * sizeof(float));
    memcpy(c.state0, m->state, (size_t)m->state_table.total * sizeof(float));
    model_zero_grads(m);
    dino_loss(&c);
    m->ops->after_averaging(m);
    double gsum = 0;
    for (int64_t i = 0; i < vn; i++) gsum += fabs(m->grads[vo + i]);
    EXPECT(gsum == 0, "frozen prototypes have no gradient (%g)", gsum);
    float *v0 = malloc((size_t)vn * sizeof(float));
    memcpy(v0, m->params + vo, (size_t)vn * sizeof(float));
    for (int64_t i = 0; i < vn; i++) m->params[vo + i] *= 0.9f;  // what weight decay would do
    m->ops->after_update(m, 1, 3);
    EXPECT(memcmp(v0, m->params + vo, (size_t)vn * sizeof(float)) == 0, "frozen prototypes take no update");
    free(v0);
    free(t);
    free(g);
    free(t0);
    free(c.state0);
    free(x);
    model_free(m);
    return test_report("test_dino");
}
