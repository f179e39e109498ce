// An epoch's end (app/train/trainer_epoch.h).
#include "app/train/trainer_epoch.h"

#include "app/dist/exact_reduce.h"
#include "app/eval/embedder.h"
#include "app/train/memory_peaks.h"
#include "io/common/metrics.h"
#include "kernels/base/check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double trainer_global_loss(const trainer_t *t, step_stats_t *st) {
    const xsum_t s = xsum_cell(&st->loss_exact);
    exact_allreduce_host(t->comm, s, 1);
    return xsum_value_of(s, 0);
}

// Loss and accuracy over the whole held-out set, sharded without duplicates.
static void evaluate(trainer_t *t, double *loss, double *acc) {
    sampler_t s;
    sampler_init(&s, t->val.num_utts, t->comm->size, t->comm->rank, 0, 0, 0);
    sampler_set_epoch(&s, 0);
    int64_t B = t->cfg->batch, steps = sampler_steps(&s, B);
    step_stats_t st = {0};
    for (int64_t k = 0; k < steps; k++) {
        int n = 0;
        for (int64_t j = k * B; j < (k + 1) * B && j < s.per_rank; j++) {
            int64_t pos = t->comm->rank + (int64_t)t->comm->size * j;
            if (pos < s.num_samples) t->idx[n++] = s.order[pos];  // padding duplicates are skipped
        }
        const batch_t *b = loader_load(&t->val_loader, 0, t->idx, n);  // collective: every rank met
        trainer_met();
        if (n > 0 || t->model->head_comm) t->model->ops->eval_step(t->model, b, &st);  // (the sharded head needs all)
    }
    sampler_free(&s);
    double v[3] = {st.loss_sum, (double)st.correct, (double)st.count};
    comm_allreduce_sum_f64(t->comm, v, 3);
    if (t->model->invariant) v[0] = trainer_global_loss(t, &st);
    *loss = v[0] / v[2];
    *acc = v[1] / v[2];
}

// EER, minDCF(0.01), minDCF(0.05) of the held-out trials: every rank embeds its block of
// utterances, rank 0 scores.
static void verify(trainer_t *t, double out[3]) {
    model_t *m = t->model;
    float *emb = embed_dataset(t->comm, m, &t->val, t->cfg->batch, trainer_met);
    if (t->comm->rank == 0) {
        score_l2_normalise(emb, t->val.num_utts, m->emb_dim);
        float *s = mallocCheck((size_t)t->trials.n * sizeof(float));
        trials_score(&t->trials, emb, m->emb_dim, s);
        out[0] = score_eer(s, t->trials.target, t->trials.n);
        out[1] = score_min_dcf(s, t->trials.target, t->trials.n, 0.01);
        out[2] = score_min_dcf(s, t->trials.target, t->trials.n, 0.05);
        free(s);
    }
    comm_bcast(t->comm, out, 3, MPI_DOUBLE, 0);
    free(emb);
}

// A finite loss does not prove finite parameters (the last update may overflow), and NaN
// parameters would otherwise surface as "replicas diverged". Needs host_params downloaded.
static void check_finite(trainer_t *t) {
    const model_t *m = t->model;
    double bad = 0;
    for (int64_t i = 0; i < m->table.total; i++) bad += !isfinite(m->host_params[i]);
    comm_allreduce_max_f64(t->comm, &bad, 1);
    if (bad > 0)
        spk_fail_all(SPK_EXIT_NUMERIC, "%.0f parameters are NaN or infinite after epoch %lld; " NONFINITE_ADVICE, bad,
                     (long long)t->epoch + 1, t->cfg->data);
}

// An epoch's figures, global and the same on every rank.
typedef struct {
    double loss, acc, samples_per_s, divergence;
    double grad_norm, grad_norm_max;  // over the epoch's applied updates, before clipping
    double rss_mib, device_mib;       // memory peaks (app/train/memory_peaks.h)
    double val_loss, val_acc;         // held-out set of the training speakers (NAN: none)
    double ver[3];                    // held-out trials: EER, minDCF(0.01), minDCF(0.05) (NAN: none)
} epoch_summary_t;

double trainer_replica_divergence(trainer_t *t) {
    const model_t *m = t->model;
    const int64_t own = t->sliced ? t->shard.own : 0;  // a slice of the head is each rank's own
    double d = comm_divergence(t->comm, m->host_params + own, m->table.total - own, t->scratch);
    if (model_state_shared(m)) {
        const double ds = comm_divergence(t->comm, m->host_state, m->state_table.total, t->scratch);
        if (!(ds <= d)) d = ds;
    }
    return d;
}

// Needs host_params downloaded.
static epoch_summary_t summarise_epoch(trainer_t *t) {
    model_t *m = t->model;
    epoch_summary_t s = {.loss = t->ep_loss_sum / (double)t->ep_count,
                         .acc = (double)t->ep_correct / (double)t->ep_count,
                         .samples_per_s = (double)t->ep_count / t->ep_seconds,
                         .grad_norm = step_controls_epoch_norm(&t->controls, t->steps),
                         .grad_norm_max = t->controls.ep_norm_max,
                         .val_loss = NAN,
                         .val_acc = NAN,
                         .ver = {NAN, NAN, NAN}};
    memory_peaks(t->comm, t->be, &s.rss_mib, &s.device_mib);
    s.divergence = trainer_replica_divergence(t);
    if (t->has_val) {
        if (!model_state_shared(m)) {  // rank 0's running stats rule
            comm_bcast(t->comm, m->host_state, m->state_table.total, MPI_FLOAT, 0);
            model_upload(m);
        }
        if (t->trials.n)
            verify(t, s.ver);
        else
            evaluate(t, &s.val_loss, &s.val_acc);
    }
    return s;
}

static void print_epoch(const trainer_t *t, const epoch_summary_t *s) {
    printf0("epoch %lld/%lld  step %lld  loss %.6f  acc %.4f", (long long)t->epoch + 1, (long long)t->cfg->epochs,
            (long long)t->global_step, s->loss, s->acc);
    if (t->has_val && !t->trials.n) printf0("  val_loss %.6f  val_acc %.4f", s->val_loss, s->val_acc);
    if (t->trials.n) printf0("  val_eer %.2f%%  minDCF(0.01) %.4f", 100.0 * s->ver[0], s->ver[1]);
    printf0("  lr %.6g", t->lr);
    if (!isnan(s->grad_norm)) printf0("  grad norm %.4g", s->grad_norm);
    if (t->controls.ep_skipped) printf0("  %lld skipped", (long long)t->controls.ep_skipped);
    printf0("  %.1f samples/s  %.2f s  data wait %.3f s  peak RSS %.0f MiB  divergence %g\n", s->samples_per_s,
            t->ep_seconds, t->ep_data_wait, s->rss_mib, s->divergence);
}

// One JSON line per epoch in --metrics (rank 0).
static void append_metrics(const trainer_t *t, const epoch_summary_t *s) {
    json_line_t j;
    json_begin(&j);
    json_int(&j, "epoch", t->epoch + 1);
    json_int(&j, "global_step", t->global_step);
    json_num(&j, "loss", s->loss);
    json_num(&j, "accuracy", s->acc);
    if (t->has_val && !t->trials.n) {
        json_num(&j, "val_loss", s->val_loss);
        json_num(&j, "val_accuracy", s->val_acc);
    }
    if (t->trials.n) {
        json_num(&j, "val_eer", s->ver[0]);
        json_num(&j, "val_mindcf_0.01", s->ver[1]);
        json_num(&j, "val_mindcf_0.05", s->ver[2]);
    }
    json_num(&j, "lr", t->lr);
    if (!isnan(s->grad_norm)) {
        json_num(&j, "grad_norm", s->grad_norm);
        json_num(&j, "grad_norm_max", s->grad_norm_max);
    }
    json_int(&j, "skipped_steps", t->controls.ep_skipped);
    json_num(&j, "samples_per_s", s->samples_per_s);
    json_num(&j, "epoch_seconds", t->ep_seconds);
    json_num(&j, "data_wait_s", t->ep_data_wait);
    json_num(&j, "peak_rss_mib", s->rss_mib);
    if (!isnan(s->device_mib)) json_num(&j, "device_mem_mib", s->device_mib);
    json_num(&j, "divergence", s->divergence);
    json_int(&j, "world_size", t->comm->size);
    json_int(&j, "invariant", t->model->invariant);  // (which mode ran: the same run on any world size, or not)
    if (t->model->invariant) json_int(&j, "invariant_group", t->model->group);
    json_end(&j);
    metrics_append(t->cfg->metrics, &j);
}

void trainer_end_epoch(trainer_t *t) {
    model_download(t->model);
    check_finite(t);
    const epoch_summary_t s = summarise_epoch(t);
    trainer_met();
    print_epoch(t, &s);
    if (t->cfg->metrics[0] && t->comm->rank == 0) append_metrics(t, &s);
    if (s.divergence != 0.0)
        spk_fail_all(SPK_EXIT_NUMERIC, "replicas diverged: max |theta_r - theta_0| = %g after epoch %lld", s.divergence,
                     (long long)t->epoch + 1);
    t->epoch++;
    t->samples_in_epoch = t->step_in_epoch = t->prefetched = 0;
    t->ep_loss_sum = t->ep_seconds = t->ep_data_wait = 0.0;
    t->ep_correct = t->ep_count = 0;
    step_controls_new_epoch(&t->controls);
}
