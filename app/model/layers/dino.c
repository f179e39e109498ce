// DINO self-distillation (app/model/layers/dino.h).
#include "app/model/layers/dino.h"

#include "app/model/core/model_stats.h"
#include "kernels/base/check.h"
#include "kernels/base/spk_assert.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct dino {
    dino_head_t head;
    int V, Vg;                // views per utterance, the global ones first
    int K;                    // prototypes
    int64_t centre, started;  // state offsets: the centre (K), whether the teacher was made (1)
    int teacher_made;         // host: the teacher exists (read from `started` once)
    double tau_s, tau_t, tau_t0, ema0, centre_m;
    int64_t tau_epochs, freeze_epochs, epoch;
    uint64_t seed;                // the head's initialisation
    int cap_b;                    // utterances the buffers hold
    float *hx_g, *hx_l;           // host: the global and local crops, each group contiguous
    size_t cap_hg, cap_hl;        //
    float *emb, *g_emb;           // (B V, E) the student's embeddings in utterance-major order, their gradient
    float *g_g, *g_l;             // (B Vg, E), (B L, E): the gradient of each group's encoder pass
    float *s_logits, *t_logits;   // (B V, K), (B Vg, K)
    float *ds, *row_loss, *work;  // the loss's gradient, per-utterance losses, its workspace
    float *csum;                  // (K) the teacher outputs' global sum
    float *state_keep;            // the student's state before the local crops' second pass
    float *v_keep;                // (K, D) frozen prototypes, over the optimizer's update
    spk_bf16 *teacher_bf16;       // bf16 models: the teacher's rounded weights
    float *student_params, *student_state;  // while the teacher runs: the student's buffers
    spk_bf16 *student_bf16;                 //
    xsum_t cells, loss_cell;                // (K) the centre's exact sums, (1) the loss's
};

dino_t *dino_create(model_t *m, const model_config_t *cfg, int64_t emb_dim) {
    if (strcmp(cfg->loss, "dino") != 0) return NULL;
    dino_t *d = callocCheck(1, sizeof *d);
    d->V = (int)cfg->views, d->Vg = (int)cfg->global_views, d->K = (int)cfg->dino_out;
    d->tau_s = cfg->student_temp, d->tau_t = cfg->teacher_temp, d->tau_t0 = cfg->teacher_temp_start;
    d->tau_epochs = cfg->teacher_temp_epochs, d->freeze_epochs = cfg->freeze_last_layer;
    d->ema0 = cfg->ema_start, d->centre_m = cfg->centre_momentum;
    d->seed = cfg->seed;
    dino_head_register(&d->head, m, cfg, emb_dim);
    d->centre = param_table_add(&m->state_table, "dino.centre", 1, (int64_t[]){d->K});
    d->started = param_table_add(&m->state_table, "dino.teacher_made", 1, (int64_t[]){1});
    m->teacher = 1;
    return d;
}

void dino_finish(dino_t *d, model_t *m) { dino_head_init(&d->head, m, d->seed); }

void dino_set_epoch(dino_t *d, int64_t epoch) { d->epoch = epoch; }

// The teacher's temperature at the current epoch: linear warmup, then constant.
static double teacher_temp(const dino_t *d) {
    if (d->epoch >= d->tau_epochs) return d->tau_t;
    return d->tau_t0 + (d->tau_t - d->tau_t0) * (double)d->epoch / (double)d->tau_epochs;
}

static void reserve(dino_t *d, model_t *m, int B, size_t host_g, size_t host_l) {
    if (host_g > d->cap_hg) {
        free(d->hx_g);
        d->hx_g = mallocCheck((d->cap_hg = host_g) * sizeof(float));
    }
    if (host_l > d->cap_hl) {
        free(d->hx_l);
        d->hx_l = mallocCheck((d->cap_hl = host_l) * sizeof(float));
    }
    if (!d->csum) {
        d->csum = model_buf(m, (size_t)d->K);
        d->cells = model_xsum(m, d->K);
        d->loss_cell = model_xsum(m, 1);
        d->state_keep = model_buf(m, (size_t)m->teacher_state_n);
        if (m->bf16) d->teacher_bf16 = model_buf_bf16(m, (size_t)m->table.total);
    }
    if (B <= d->cap_b) return;
    float **const bufs[] = {&d->emb,      &d->g_emb, &d->g_g,      &d->g_l, &d->s_logits,
                            &d->t_logits, &d->ds,    &d->row_loss, &d->work};
    model_bufs_free(m, bufs, sizeof bufs / sizeof bufs[0]);
    const size_t E = (size_t)d->head.E, K = (size_t)d->K, V = (size_t)d->V, Vg = (size_t)d->Vg;
    d->emb = model_buf(m, B * V * E), d->g_emb = model_buf(m, B * V * E);
    d->g_g = model_buf(m, B * Vg * E), d->g_l = model_buf(m, B * (V - Vg) * E + 1);
    d->s_logits = model_buf(m, B * V * K), d->t_logits = model_buf(m, B * Vg * K), d->ds = model_buf(m, B * V * K);
    d->row_loss = model_buf(m, (size_t)B);
    d->work = model_buf(m, m->be->dino_xent_workspace_floats(B, d->V, d->Vg, d->K));
    d->cap_b = B;
}

// The teacher's parameters and state in place of the student's (state's MODEL_TEACHER copies).
static void use_teacher(dino_t *d, model_t *m) {
    d->student_params = m->params, d->student_state = m->state, d->student_bf16 = m->params_bf16;
    m->params = m->state + m->teacher_params;
    m->state = m->state + m->teacher_state;
    m->params_bf16 = d->teacher_bf16;
    model_round_params(m);
}

static void use_student(dino_t *d, model_t *m) {
    m->params = d->student_params, m->state = d->student_state, m->params_bf16 = d->student_bf16;
    model_round_params(m);
}

// The first update of a run that did not start from a teacher: the teacher is the student.
static void make_teacher(dino_t *d, model_t *m) {
    if (d->teacher_made) return;
    const spk_backend_t *K = m->be;
    float made;
    K->download(&made, m->state + d->started, sizeof made);
    if (made == 0.0f) {
        K->vec_copy(m->state + m->teacher_params, m->params, (size_t)m->table.total);
        K->vec_copy(m->state + m->teacher_state, m->state, (size_t)m->teacher_state_n);
        const float one = 1.0f;
        K->upload(m->state + d->started, &one, sizeof one);
    }
    d->teacher_made = 1;
}

// Sample i of the batch (its frames) into the host copy of its group, each group's samples in
// order: the encoder takes a group as one (n, T, F) tensor.
static void split_views(dino_t *d, const batch_t *b, int B, int64_t T, int64_t Tl) {
    const int64_t F = b->feature_dim;
    const int L = d->V - d->Vg;
    for (int u = 0; u < B; u++)
        for (int v = 0; v < d->V; v++) {
            const int i = u * d->V + v;
            const int64_t len = b->frame_off[i + 1] - b->frame_off[i];
            SPK_ASSERT(len == (v < d->Vg ? T : Tl));
            float *dst = v < d->Vg ? d->hx_g + ((int64_t)u * d->Vg + v) * T * F
                                   : d->hx_l + ((int64_t)u * L + v - d->Vg) * Tl * F;
            memcpy(dst, b->x + b->frame_off[i] * F, (size_t)(len * F) * sizeof(float));
        }
}

// Rows of a group's embeddings (n_views per utterance) to or from their place among the V views
// of each utterance (to_all: group -> all).
static void place_rows(const dino_t *d, const model_t *m, float *all, float *group, int B, int first, int n_views,
                       int to_all) {
    const size_t E = (size_t)d->head.E, n = (size_t)n_views * E;
    for (int u = 0; u < B; u++) {
        float *a = all + ((size_t)u * d->V + first) * E, *g = group + (size_t)u * n;
        if (to_all)
            m->be->vec_copy(a, g, n);
        else
            m->be->vec_copy(g, a, n);
    }
}

// The centre: c <- m c + (1 - m) (the teacher outputs' sum over the global batch) / their count.
static void update_centre(dino_t *d, model_t *m, int rows, int64_t rows_global) {
    const spk_backend_t *K = m->be;
    K->xsum_zero(d->cells, d->K);
    K->xsum_add(d->cells, d->t_logits, rows, d->K, 1);
    model_exact_allreduce(m, d->cells, d->K);
    K->xsum_to_float(d->csum, d->cells, d->K);
    K->vec_scale(m->state + d->centre, (float)d->centre_m, (size_t)d->K);
    K->vec_scale(d->csum, (float)((1.0 - d->centre_m) / (double)rows_global), (size_t)d->K);
    K->vec_acc(m->state + d->centre, d->csum, (size_t)d->K);
}

void dino_train_step(dino_t *d, model_t *m, const aam_encoder_ops_t *enc, const batch_t *b, float *scalars) {
    const spk_backend_t *K = m->be;
    SPK_ASSERT(b->n % d->V == 0 && b->n > 0);
    const int B = b->n / d->V, Vg = d->Vg, L = d->V - Vg, E = d->head.E;
    const int ranks = m->batch_comm ? m->batch_comm->size : 1;
    const int64_t F = m->feature_dim, T = b->frame_off[1] - b->frame_off[0];
    const int64_t Tl = L ? b->frame_off[Vg + 1] - b->frame_off[Vg] : 0;
    // The loss is the mean over the global batch's utterances: each rank's own in the plain mode
    // (the averaging over the ranks makes it global), the global batch's in the invariant mode
    // (whose exact sums add the ranks' parts).
    const int64_t U = m->invariant ? model_begin_step(m, b->n) / d->V  // the global batch's utterances
                                   : (int64_t)B * ranks;               // (equal on every rank)
    reserve(d, m, B, (size_t)(B * Vg * T * F), (size_t)(B * L * Tl * F) + 1);
    enc->reserve(m, B * Vg, (int)T);
    if (L) enc->reserve(m, B * L, (int)Tl);
    make_teacher(d, m);
    split_views(d, b, B, T, Tl);
    const size_t gb = (size_t)(B * Vg * T * F) * sizeof(float), lb = (size_t)(B * L * Tl * F) * sizeof(float);
    model_stage_begin(m, gb + lb);
    const float *xg = model_stage(m, d->hx_g, gb);
    const float *xl = L ? model_stage(m, d->hx_l, lb) : NULL;
    model_stage_ready(m);
    m->modality = NULL;

    // The teacher on the global crops.
    use_teacher(d, m);
    m->global_batch = U * Vg;  // (the invariant mode's BatchNorms normalise over the pass's global samples)
    dino_head_forward(&d->head, m, enc->forward(m, xg, NULL, B * Vg, (int)T, 1), B * Vg, U * Vg, d->t_logits);
    use_student(d, m);
    // The student on every crop; the global crops' pass last, so its activations stay for the backward.
    if (L) {
        m->global_batch = U * L;
        place_rows(d, m, d->emb, (float *)enc->forward(m, xl, NULL, B * L, (int)Tl, 1), B, Vg, L, 1);
    }
    m->global_batch = U * Vg;
    place_rows(d, m, d->emb, (float *)enc->forward(m, xg, NULL, B * Vg, (int)T, 1), B, 0, Vg, 1);
    dino_head_forward(&d->head, m, d->emb, B * d->V, U * d->V, d->s_logits);
    K->dino_xent(d->row_loss, d->ds, d->s_logits, d->t_logits, m->state + d->centre, B, d->V, Vg, d->K,
                 (float)(1.0 / d->tau_s), (float)(1.0 / teacher_temp(d)), 1.0f / (float)(m->invariant ? U : B),
                 d->work);
    update_centre(d, m, B * Vg, U * Vg);
    // The statistics: the mean of this rank's utterances' losses, or in the invariant mode the
    // exact sum of their losses times V (the trainer divides by the samples).
    if (m->invariant) {
        K->vec_scale(d->row_loss, (float)d->V, (size_t)B);
        model_sum_losses(m, d->row_loss, B, 1);
    } else {
        K->xsum_zero(d->loss_cell, 1);
        K->xsum_add(d->loss_cell, d->row_loss, B, 1, 1);
        K->xsum_to_float(scalars, d->loss_cell, 1);
        K->vec_scale(scalars, 1.0f / (float)B, 1);
    }
    K->vec_zero(scalars + 1, 1);
    model_stats_fetch(m, scalars, b->n);

    // Backward: the head, then the encoder's global pass, then the local crops' pass made again.
    K->vec_zero(d->g_emb, (size_t)b->n * E);
    dino_head_backward(&d->head, m, d->ds, d->g_emb, B * d->V, U * d->V, d->epoch < d->freeze_epochs);
    model_grads_ready(m, dino_head_end(&d->head));
    place_rows(d, m, d->g_emb, d->g_g, B, 0, Vg, 0);
    if (!L) {
        enc->backward(m, d->g_g, B * Vg, (int)T);
        return;
    }
    void (*ready)(void *, int64_t) = m->grads_ready;
    m->grads_ready = NULL;  // the local pass adds to every encoder gradient yet
    enc->backward(m, d->g_g, B * Vg, (int)T);
    m->grads_ready = ready;
    place_rows(d, m, d->g_emb, d->g_l, B, Vg, L, 0);
    const size_t n_state = (size_t)m->teacher_state_n;  // the student's running statistics (and the centre)
    K->vec_copy(d->state_keep, m->state, n_state);
    m->global_batch = U * L;
    enc->forward(m, xl, NULL, B * L, (int)Tl, 1);
    K->vec_copy(m->state, d->state_keep, n_state);  // as the first local pass left them
    enc->backward(m, d->g_l, B * L, (int)Tl);
}

// The teacher <- m teacher + (1 - m) student, m cosine from ema0 at the first update to 1 at the
// last; the gradients, spent by the optimizer, hold (1 - m) student.
void dino_after_update(dino_t *d, model_t *m, int64_t step, int64_t total) {
    const spk_backend_t *K = m->be;
    if (d->head.frozen && d->v_keep) K->vec_copy(m->params + d->head.v, d->v_keep, (size_t)d->K * d->head.D);
    const double pi = 3.14159265358979323846;
    const double f = total > 1 ? (double)(step - 1) / (double)(total - 1) : 1.0;
    const double mom = 1.0 - (1.0 - d->ema0) * (cos(pi * f) + 1.0) / 2.0;
    const size_t n = (size_t)m->table.total;
    float *teacher = m->state + m->teacher_params;
    K->vec_copy(m->grads, m->params, n);
    K->vec_scale(m->grads, (float)(1.0 - mom), n);
    K->vec_scale(teacher, (float)mom, n);
    K->vec_acc(teacher, m->grads, n);
}

// Frozen prototypes take no update at all, weight decay included, as the toolkits' (whose
// gradient is None then): kept here, put back by dino_after_update.
void dino_after_averaging(dino_t *d, model_t *m) {
    dino_head_after_averaging(&d->head, m);
    if (!d->head.frozen) return;
    const size_t n = (size_t)d->K * d->head.D;
    if (!d->v_keep) d->v_keep = model_buf(m, n);
    m->be->vec_copy(d->v_keep, m->params + d->head.v, n);
}

void dino_free(dino_t *d, const model_t *m) {
    if (!d) return;
    dino_head_release(&d->head, m);
    float **const bufs[] = {&d->emb, &d->g_emb,    &d->g_g,  &d->g_l,  &d->s_logits,   &d->t_logits,
                            &d->ds,  &d->row_loss, &d->work, &d->csum, &d->state_keep, &d->v_keep};
    model_bufs_free(m, bufs, sizeof bufs / sizeof bufs[0]);
    model_buf_bf16_free(m, &d->teacher_bf16);
    model_xsum_free(m, &d->cells);
    model_xsum_free(m, &d->loss_cell);
    free(d->hx_g);
    free(d->hx_l);
    free(d);
}
