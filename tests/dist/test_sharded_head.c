// The classifier sharded across ranks (--head sharded) against the replicated one, under
// mpiexec -n 1..4: on every rank an ECAPA-TDNN with the whole head and one with this rank's
// slice of it (app/dist/head_comm.h), the same weights, each rank its own batch. For 20 steps
// the sharded model is given the replicated one's weights, both train a step (gradients averaged
// by grad_sync, the slice's left as it is), and the losses, hits and gradients must agree up to
// rounding: the encoder's and each slice's rows of the head's within 1e-6 (normalised error),
// the hits exactly; then the replicated model takes an SGD step. A forward-only pass with
// empty batches on every rank but 0 (evaluation) must give rank 0's loss. The slices gathered
// and scattered (app/train/sharded_head.h) must come back unchanged. On host memory and
// through cpu-staged copies.
#include "app/dist/grad_sync.h"
#include "app/dist/head_comm.h"
#include "app/model/model.h"
#include "app/train/sharded_head.h"
#include "kernels/base/rng.h"
#include "tests/dist/mpi_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define B       5   // samples per rank
#define T       40  // frames
#define F       16  // features
#define CLASSES 13
#define STEPS   20

static model_t *build(const spk_backend_t *be, const comm_t *c, int sharded) {
    model_config_t mc = model_config_defaults("ecapa");
    mc.channels = 32;
    mc.emb_dim = 12;
    mc.att_channels = 16;
    mc.se_channels = 16;
    mc.scale = 4.0;  // every class's probability well above rounding, so each row of the head's gradient counts
    int64_t first = 0, rows = 0;
    if (sharded) head_shard_slice(CLASSES, c->size, c->rank, &first, &rows);
    const model_data_t md = {.feature_dim = F, .num_classes = CLASSES, .class_first = first, .class_rows = rows};
    return model_create(&mc, &md, be);
}

static batch_t make_batch(int n, uint64_t key) {
    batch_t b = {.n = n, .feature_dim = F};
    b.frame_off = calloc((size_t)n + 1, sizeof(int64_t));
    b.labels = calloc((size_t)n + 1, sizeof(int32_t));
    b.x = calloc((size_t)n * T * F + 1, sizeof(float));
    rng_t r = rng_init(7, RNG_PURPOSE_SYNTH, key, 0);
    for (int i = 0; i <= n; i++) b.frame_off[i] = (int64_t)i * T;
    for (int i = 0; i < n; i++) b.labels[i] = (int32_t)rng_below(&r, CLASSES);
    for (int64_t i = 0; i < (int64_t)n * T * F; i++) b.x[i] = (float)rng_normal(&r);
    return b;
}

static void free_batch(batch_t *b) {
    free(b->frame_off);
    free(b->labels);
    free(b->x);
}

// ||got - want|| / ||want||
static double norm_err(const float *got, const float *want, int64_t n) {
    double d = 0, w = 0;
    for (int64_t i = 0; i < n; i++) {
        d += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
        w += (double)want[i] * want[i];
    }
    return w > 0 ? sqrt(d / w) : sqrt(d);
}

// The replicated model's weights into the sharded one (its slice of the head, and the rest) and
// its BatchNorm statistics.
static void copy_weights(model_t *sh, model_t *rep, int64_t first_float) {
    model_download(rep);
    memcpy(sh->host_state, rep->host_state, (size_t)rep->state_table.total * sizeof(float));
    const int64_t own = sh->table.t[0].numel, head = rep->table.t[0].numel;
    memcpy(sh->host_params, rep->host_params + first_float, (size_t)own * sizeof(float));
    memcpy(sh->host_params + own, rep->host_params + head, (size_t)(rep->table.total - head) * sizeof(float));
    model_upload(sh);
}

static void step(const comm_t *c, model_t *m, grad_sync_t *g, const batch_t *b, step_stats_t *st) {
    model_zero_grads(m);
    grad_sync_begin(g, m);
    m->ops->train_step(m, b);
    grad_sync_finish(g);
    grad_sync_wait(g);
    model_read_stats(m, st);
    double v[2] = {st->loss_sum, (double)st->correct};
    comm_allreduce_sum_f64(c, v, 2);
    st->loss_sum = v[0];
    st->correct = (int64_t)v[1];
}

static void check_backend(const comm_t *c, const spk_backend_t *be) {
    model_t *rep = build(be, c, 0), *sh = build(be, c, 1);
    head_comm_impl_t hc;
    head_comm_init(&hc, c);
    sh->head_comm = &hc.ops;
    int64_t first, rows;
    head_shard_slice(CLASSES, c->size, c->rank, &first, &rows);
    const int64_t E = rep->table.t[0].shape[1], own = rows * E, head = CLASSES * E, rest = rep->table.total - head;
    EXPECT(sh->table.t[0].shape[0] == rows && sh->table.total == rest + own, "the sharded model holds its %lld rows",
           (long long)rows);
    // A fresh sharded model draws the replicated one's rows.
    model_download(sh);
    EXPECT(memcmp(sh->host_params, rep->host_params + first * E, (size_t)own * sizeof(float)) == 0,
           "[%s] rank %d's slice of a fresh head is the whole head's rows", be->name, c->rank);
    grad_sync_t gr, gs;
    grad_sync_init(&gr, c, be, rep->table.total, 0, 0, 0);
    grad_sync_init(&gs, c, be, sh->table.total, c->size > 1 ? own : 0, 0, 0);
    float *hr = malloc(sizeof(float) * (size_t)rep->table.total), *hs = malloc(sizeof(float) * (size_t)sh->table.total);
    double worst_enc = 0, worst_head = 0, worst_loss = 0;
    int hits_differ = 0;
    for (int s = 0; s < STEPS; s++) {
        batch_t b = make_batch(B, (uint64_t)(s * 64 + c->rank));
        copy_weights(sh, rep, first * E);
        step_stats_t a = {0}, z = {0};
        step(c, rep, &gr, &b, &a);
        step(c, sh, &gs, &b, &z);
        be->download(hr, rep->grads, sizeof(float) * (size_t)rep->table.total);
        be->download(hs, sh->grads, sizeof(float) * (size_t)sh->table.total);
        double e[3] = {norm_err(hs + own, hr + head, rest), norm_err(hs, hr + first * E, own),
                       fabs(z.loss_sum - a.loss_sum) / fabs(a.loss_sum)};
        comm_allreduce_max_f64(c, e, 3);
        worst_enc = fmax(worst_enc, e[0]);
        worst_head = fmax(worst_head, e[1]);
        worst_loss = fmax(worst_loss, e[2]);
        hits_differ += z.correct != a.correct;
        model_download(rep);  // an SGD step of the replicated model: the next step's weights
        for (int64_t i = 0; i < rep->table.total; i++) rep->host_params[i] -= 0.05f * hr[i];
        model_upload(rep);
        free_batch(&b);
    }
    EXPECT(worst_enc <= 1e-6, "[%s] %d ranks: encoder gradients of the sharded head within %.1e (want <= 1e-6)",
           be->name, c->size, worst_enc);
    EXPECT(worst_head <= 1e-6, "[%s] %d ranks: the head's gradient rows within %.1e (want <= 1e-6)", be->name, c->size,
           worst_head);
    EXPECT(worst_loss <= 1e-6, "[%s] %d ranks: losses within %.1e (want <= 1e-6)", be->name, c->size, worst_loss);
    EXPECT(hits_differ == 0, "[%s] %d ranks: the same hits in every step (%d differ)", be->name, c->size, hits_differ);
    if (c->rank == 0)
        printf("[%s] %d ranks, %d steps: worst normalised error encoder %.2e, head %.2e, loss %.2e\n", be->name,
               c->size, STEPS, worst_enc, worst_head, worst_loss);

    // Evaluation: only rank 0 has samples.
    batch_t b = make_batch(c->rank == 0 ? B : 0, 999);
    copy_weights(sh, rep, first * E);
    step_stats_t a = {0}, z = {0};
    if (c->rank == 0) rep->ops->eval_step(rep, &b, &a);
    sh->ops->eval_step(sh, &b, &z);
    double v[4] = {a.loss_sum, z.loss_sum, (double)a.correct, (double)z.correct};
    comm_allreduce_sum_f64(c, v, 4);
    EXPECT(fabs(v[1] - v[0]) <= 1e-6 * fabs(v[0]) && v[2] == v[3],
           "[%s] evaluation with empty ranks: loss %.9g vs %.9g, hits %.0f vs %.0f", be->name, v[1], v[0], v[3], v[2]);
    free_batch(&b);

    // The slices gathered whole on rank 0 and scattered back.
    if (c->size > 1) {
        sharded_head_t w;
        sharded_head_init(&w, c, sh);
        model_download(sh);
        float *full = calloc((size_t)w.n_full, sizeof(float)), *back = calloc((size_t)w.n_local, sizeof(float));
        sharded_head_gather(&w, sh->host_params, 1, full);
        if (c->rank == 0)
            EXPECT(memcmp(full, rep->host_params, sizeof(float) * (size_t)w.n_full) == 0,
                   "[%s] the gathered head is the replicated model's", be->name);
        sharded_head_scatter(&w, full, 1, back);
        EXPECT(memcmp(back, sh->host_params, sizeof(float) * (size_t)w.n_local) == 0,
               "[%s] rank %d: scattered back unchanged", be->name, c->rank);
        free(full);
        free(back);
        sharded_head_free(&w);
    }
    free(hr);
    free(hs);
    grad_sync_free(&gr);
    grad_sync_free(&gs);
    model_free(rep);
    model_free(sh);
}

int main(int argc, char **argv) { return mpi_test_main(argc, argv, "test_sharded_head", check_backend); }
