// The training loop, read from the bottom: trainer_run = trainer_setup (device, data, model,
// optimizer, sampler and schedule, resume) -> run_epochs (steps, checkpoints, signals) ->
// finish (last replica check, FINISHED marker, exit code) -> trainer_free.
#include "app/train/trainer.h"

#include "app/dist/device_select.h"
#include "app/dist/exact_reduce.h"
#include "app/dist/grad_sync.h"
#include "app/dist/head_comm.h"
#include "app/eval/embedder.h"
#include "app/eval/scoring.h"
#include "app/model/model.h"
#include "app/train/ckpt_policy.h"
#include "app/train/init_from.h"
#include "app/train/lr_schedule.h"
#include "app/train/memory_peaks.h"
#include "app/train/optimizer.h"
#include "app/train/progress.h"
#include "app/train/resume.h"
#include "app/train/sharded_head.h"
#include "app/train/step_controls.h"
#include "app/train/step_watchdog.h"
#include "io/ckpt/checkpoint.h"
#include "io/ckpt/ckpt_dir.h"
#include "io/common/config_yaml.h"
#include "io/common/h5util.h"
#include "io/common/metrics.h"
#include "io/dataset/dataset.h"
#include "io/loader/loader.h"
#include "io/loader/sampler.h"
#include "kernels/aam_shard.h"
#include "kernels/base/check.h"
#include "kernels/base/clock.h"
#include "kernels/base/spk_assert.h"
#include "kernels/base/stop_signals.h"
#include "kernels/exact_sum_math.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const comm_t *comm;
    const train_config_t *cfg;
    const char *config_text;  // the flags as key=value lines, stored in checkpoints
    const char *config_yaml;  // the same as YAML for ckpt_dir/config.yaml (NULL: written, or none)
    const spk_backend_t *be;  // where the model computes (--device)
    dataset_t data, val;
    uint64_t data_fingerprint;  // of the training data (checkpoints record it)
    int has_val;                // held-out set: loss/accuracy (same speakers) or verification (trials)
    trials_t trials;            // verification trials over the held-out utterances (n = 0: none)
    sampler_t sampler;
    loader_t loader, val_loader;
    augment_t *aug;  // training samples' augmentation (NULL: none)
    model_t *model;
    optimizer_t opt;
    head_comm_impl_t head_comm;  // collectives over the global batch: a sharded head's, contrastive losses'
    int sliced;                  // ... over more than one rank: checkpoints gather it (shard)
    sharded_head_t shard;
    grad_sync_t grad_sync;
    lr_schedule_t sched;
    step_controls_t controls;  // gradient norm, clipping, skips, step log
    int64_t *idx;              // (batch,) a micro-batch's sample indices
    int64_t steps;             // optimizer updates per epoch
    int64_t micro_steps;       // micro-batches per epoch (steps x --grad-accum, the last update may have fewer)
    int64_t prefetched;        // micro-batches of this epoch handed to the loader
    int64_t unaccounted;       // updates queued whose statistics were not accounted for yet
    step_stats_t partial;      // this rank's statistics of the oldest such update's micro-batches read so far
    double last_update[3];     // the last accounted update's global loss sum, correct and count
    float *scratch;            // (max(num_params, num_state),) divergence check
    // position
    int64_t epoch;             // epoch in progress
    int64_t samples_in_epoch;  // global samples done in it
    int64_t step_in_epoch;
    int64_t global_step;
    // metrics of the epoch in progress (global, identical on every rank)
    double ep_loss_sum, ep_seconds;
    double ep_data_wait;  // seconds this rank waited for batches (timing; not in checkpoints)
    int64_t ep_correct, ep_count;
    double lr;
    int stop_signal;  // a signal every rank agreed to stop on (0: none)
    int started;      // a step was taken (a stop before the first one has nothing new to save)
    progress_t progress;
    ckpt_policy_t ckpt;  // what this run may write and delete in --ckpt-dir
} trainer_t;

// The ranks have just met (an allreduce, a collective read, a barrier): a stop in progress
// gets a fresh grace period, the watchdog's clock starts again.
static void met(void) {
    stop_signals_progress();
    step_watchdog_met();
}

// ---- checkpoints --------------------------------------------------------------------------

static ckpt_tensors_t tensors_of(trainer_t *t) {
    return (ckpt_tensors_t){&t->model->table,     t->model->host_params, &t->model->state_table,
                            t->model->host_state, t->opt.slots,          t->opt.host_state};
}

// The checkpoint's header: what was trained on what, and where the run stands.
static void fill_meta(const trainer_t *t, ckpt_meta_t *m) {
    snprintf(m->model, sizeof m->model, "%.63s", t->cfg->model.name);
    snprintf(m->optimizer, sizeof m->optimizer, "%.31s", t->cfg->optimizer);
    m->epoch = t->epoch;
    m->samples_in_epoch = t->samples_in_epoch;
    m->step_in_epoch = t->step_in_epoch;
    m->global_step = t->global_step;
    m->opt_step = t->opt.step;
    m->world_size = t->comm->size;
    m->seed = t->cfg->seed;
    m->feature_dim = t->model->feature_dim;
    m->num_classes = t->model->num_classes;
    m->visual_dim = t->model->visual_dim;
    m->visual_ratio = t->model->visual_ratio;
    m->ep_loss_sum = t->ep_loss_sum;
    m->ep_correct = t->ep_correct;
    m->ep_count = t->ep_count;
    m->ep_seconds = t->ep_seconds;
    step_controls_save(&t->controls, m);
    m->global_batch = t->cfg->global_batch;
    m->data_fingerprint = t->data_fingerprint;
    snprintf(m->config, sizeof m->config, "%s", t->config_text);
}

// Where a resumed run continues: the checkpoint's position and the metrics of its epoch.
static void restore_position(trainer_t *t, const ckpt_meta_t *m) {
    t->epoch = m->epoch;
    t->samples_in_epoch = m->samples_in_epoch;
    t->step_in_epoch = m->samples_in_epoch / t->cfg->global_batch;
    t->global_step = m->global_step;
    t->opt.step = m->opt_step;
    t->ep_loss_sum = m->ep_loss_sum;
    t->ep_correct = m->ep_correct;
    t->ep_count = m->ep_count;
    t->ep_seconds = m->ep_seconds;
    step_controls_restore(&t->controls, m);
}

// ckpt_dir/config.yaml: this run's flags and --config file merged, to read or rerun (each
// checkpoint keeps the same config). Written with the run's first checkpoint, so a run that
// fails before it leaves the directory as it was; a failure costs only this copy: a warning.
static void save_effective_config(trainer_t *t) {
    char err[4400];
    if (t->config_yaml && config_yaml_save(t->cfg->ckpt_dir, "config.yaml", t->config_yaml, err, sizeof err) != 0)
        spk_warn("%s", err);
    t->config_yaml = NULL;  // once
}

// The whole head of a sliced run on rank 0, in the replicated layout (app/train/sharded_head.h):
// parameters and optimizer slots. Collective; the buffers are rank 0's (NULL elsewhere).
typedef struct {
    float *params, *opt;
} whole_t;

static whole_t whole_alloc(const trainer_t *t) {
    whole_t w = {0};
    if (t->comm->rank != 0) return w;
    w.params = callocCheck((size_t)t->shard.n_full + 1, sizeof(float));
    w.opt = callocCheck((size_t)t->shard.n_full * (size_t)t->opt.slots + 1, sizeof(float));
    return w;
}

static void whole_free(whole_t *w) {
    free(w->params);
    free(w->opt);
}

// What rank 0 writes or reads: the model's buffers, or for a sliced head the whole one's.
static ckpt_tensors_t tensors_whole(trainer_t *t, const whole_t *w) {
    ckpt_tensors_t ts = tensors_of(t);
    if (t->sliced) {
        ts.params = &t->shard.full;
        ts.param_data = w->params;
        ts.opt_data = w->opt;
    }
    return ts;
}

static void save_checkpoint(trainer_t *t) {
    if (!t->cfg->ckpt_dir[0]) return;
    if (t->sliced || t->comm->rank == 0) {  // (a sliced head: every rank's slice goes to rank 0)
        model_download(t->model);
        optimizer_download(&t->opt);
    }
    whole_t w = {0};
    if (t->sliced) {
        w = whole_alloc(t);
        sharded_head_gather(&t->shard, t->model->host_params, 1, w.params);
        sharded_head_gather(&t->shard, t->opt.host_state, t->opt.slots, w.opt);
    }
    if (t->comm->rank == 0) {
        ckpt_meta_t *m = callocCheck(1, sizeof *m);
        fill_meta(t, m);
        ckpt_tensors_t ts = tensors_whole(t, &w);
        char path[CKPT_PATH_MAX];
        ckpt_policy_save(&t->ckpt, m, &ts, path, sizeof path);
        save_effective_config(t);
        if (t->samples_in_epoch == 0)
            printf0("checkpoint %s (after epoch %lld, global step %lld)\n", path, (long long)t->epoch,
                    (long long)t->global_step);
        else
            printf0("checkpoint %s (epoch %lld, step %lld of the epoch, global step %lld)\n", path,
                    (long long)t->epoch + 1, (long long)t->step_in_epoch, (long long)t->global_step);
        free(m);
    }
    whole_free(&w);
    comm_barrier(t->comm);  // nobody runs ahead while the file is not yet in place
    met();
}

// What rank 0 found at --resume, for every rank.
typedef struct {
    int code, found;
    int keep_optimizer;  // the checkpoint's optimizer state carries over
    char path[CKPT_PATH_MAX];
    char err[1536];
    char note[512];  // changes --resume-allow let through
} resume_t;

// The checkpoint's classifier has another number of classes: other speed factors (each
// factor's copies are new speakers) or other data (another number of speakers).
static void explain_classes(const trainer_t *t, const ckpt_meta_t *m, resume_t *r) {
    const train_config_t *c = t->cfg;
    char was[256] = "";
    ckpt_config_value(m->config, "speed-perturb", was, sizeof was);
    int k_was = 1;
    for (const char *p = was; *p; p++) k_was += *p == ',';
    const int k_now = augment_classes_per_speaker(&c->aug);
    if (k_was != k_now)
        snprintf(r->err, sizeof r->err,
                 "%.700s: trained for %lld classes, this run has %lld (%lld speakers x %d speed factors of "
                 "--speed-perturb '%s'); resume with the checkpoint's --speed-perturb '%.100s'",
                 r->path, (long long)m->num_classes, (long long)t->model->num_classes, (long long)t->data.num_speakers,
                 k_now, c->aug.speed, was[0] ? was : "1.0");
    else
        snprintf(r->err, sizeof r->err,
                 "%.700s: trained for %lld classes (%lld speakers x %d speed factor%s), this run's %.700s has %lld "
                 "speakers; resume on the data the checkpoint was trained on",
                 r->path, (long long)m->num_classes, (long long)m->num_classes / k_now, k_now, k_now > 1 ? "s" : "",
                 c->data, (long long)t->data.num_speakers);
}

// Rank 0: the checkpoint into the model (and the optimizer, when its state carries over),
// then checked against this run (app/train/resume.h).
static void load_resume_point(trainer_t *t, resume_t *r, ckpt_meta_t *m, const whole_t *w) {
    const train_config_t *c = t->cfg;
    param_table_t params, state;
    int slots = 0;
    if ((r->code = ckpt_peek(r->path, m, &params, &state, &slots, r->err, sizeof r->err)) != 0) return;
    param_table_free(&params);
    param_table_free(&state);
    r->keep_optimizer = resume_keeps_optimizer(m, slots, c, t->opt.slots);
    ckpt_tensors_t ts = tensors_whole(t, w);
    if (!r->keep_optimizer) ts.opt_slots = 0, ts.opt_data = NULL;
    r->code = ckpt_load(r->path, c->model.name, m, &ts, r->err, sizeof r->err);
    if (r->code && m->num_classes > 0 && m->num_classes != t->model->num_classes)  // say why the layout differs
        explain_classes(t, m, r);
    if (!r->code)
        r->code = resume_check(m, r->path, c, t->config_text, t->data_fingerprint, r->err, sizeof r->err, r->note,
                               sizeof r->note);
}

// Loads --resume into every rank (rank 0 reads, everyone receives). Returns 1 and the
// checkpoint's header in m if resumed.
static int resume(trainer_t *t, ckpt_meta_t *m) {
    const train_config_t *c = t->cfg;
    if (!c->resume[0]) return 0;
    resume_t *r = callocCheck(1, sizeof *r);
    whole_t w = t->sliced ? whole_alloc(t) : (whole_t){0};
    if (t->comm->rank == 0) {
        if (strcmp(c->resume, "auto") == 0)
            r->found = ckpt_find_latest(c->ckpt_dir, r->path, sizeof r->path);
        else {
            r->found = 1;
            snprintf(r->path, sizeof r->path, "%s", c->resume);
        }
        if (r->found) load_resume_point(t, r, m, &w);
    }
    comm_bcast(t->comm, r, sizeof *r, MPI_BYTE, 0);
    if (r->code) spk_fail_all(r->code, "%s", r->err);
    if (!r->found) {
        printf0("resume: no checkpoint in %s yet, starting from scratch\n", c->ckpt_dir);
        whole_free(&w);
        free(r);
        return 0;
    }
    comm_bcast(t->comm, m, sizeof *m, MPI_BYTE, 0);
    if (t->sliced)  // each rank its slice of the whole head
        sharded_head_scatter(&t->shard, w.params, 1, t->model->host_params);
    else
        comm_bcast(t->comm, t->model->host_params, t->model->table.total, MPI_FLOAT, 0);
    comm_bcast(t->comm, t->model->host_state, t->model->state_table.total, MPI_FLOAT, 0);
    if (r->keep_optimizer && t->sliced)
        sharded_head_scatter(&t->shard, w.opt, t->opt.slots, t->opt.host_state);
    else if (r->keep_optimizer)
        comm_bcast(t->comm, t->opt.host_state, (int64_t)t->opt.slots * t->opt.n, MPI_FLOAT, 0);
    else
        m->opt_step = 0;  // a fresh optimizer state: Adam's bias correction starts over too
    whole_free(&w);
    model_upload(t->model);
    optimizer_upload(&t->opt);
    // Balanced epochs are made of global batches of one size: another size is another order.
    if (strcmp(c->sampler, "balanced") == 0 && m->samples_in_epoch > 0 && m->global_batch != c->global_batch)
        spk_fail_all(SPK_EXIT_CKPT,
                     "%s: stopped inside epoch %lld of speaker-balanced batches of %lld; another global batch (%lld) "
                     "makes other batches: resume with --global-batch %lld, or from an epoch's end",
                     r->path, (long long)m->epoch + 1, (long long)m->global_batch, (long long)c->global_batch,
                     (long long)m->global_batch);
    if (m->samples_in_epoch % c->global_batch != 0)
        spk_fail_all(SPK_EXIT_CKPT,
                     "%s: stopped after %lld samples of epoch %lld, not a multiple of the global batch %lld; resume "
                     "with the original global batch",
                     r->path, (long long)m->samples_in_epoch, (long long)m->epoch + 1, (long long)c->global_batch);
    if (r->note[0]) printf0("resume: changed from the checkpoint, as --resume-allow lets it: %s\n", r->note);
    if (!r->keep_optimizer && m->optimizer[0])
        printf0("resume: the optimizer state starts afresh (the checkpoint's is %s's)\n", m->optimizer);
    restore_position(t, m);
    printf0("resumed from %s: epoch %lld, step %lld, %lld samples into the epoch (written by %lld ranks, now %d)\n",
            r->path, (long long)t->epoch + 1, (long long)t->global_step, (long long)t->samples_in_epoch,
            (long long)m->world_size, t->comm->size);
    if (t->epoch >= c->epochs)
        printf0("already finished: %lld of %lld epochs, global step %lld; nothing to train (raise --epochs to go on)\n",
                (long long)t->epoch, (long long)c->epochs, (long long)t->global_step);
    free(r);
    return 1;
}

// ---- evaluation -------------------------------------------------------------------------------

// The invariant mode's loss sum: the exact sum of every sample's loss over all ranks.
static double global_loss(const trainer_t *t, step_stats_t *st) {
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
        met();
        if (n > 0 || t->model->head_comm) t->model->ops->eval_step(t->model, b, &st);  // (the sharded head needs all)
    }
    sampler_free(&s);
    double v[3] = {st.loss_sum, (double)st.correct, (double)st.count};
    comm_allreduce_sum_f64(t->comm, v, 3);
    if (t->model->invariant) v[0] = global_loss(t, &st);
    *loss = v[0] / v[2];
    *acc = v[1] / v[2];
}

// EER, minDCF(0.01), minDCF(0.05) of the held-out trials: every rank embeds its block of
// utterances, rank 0 scores.
static void verify(trainer_t *t, double out[3]) {
    model_t *m = t->model;
    float *emb = embed_dataset(t->comm, m, &t->val, t->cfg->batch, met);
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

// ---- one step, one epoch's end ------------------------------------------------------------

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

// max |theta_r - theta_0| over ranks and parameters; in the invariant mode over the running
// statistics too, which come out the same on every rank without a broadcast. Needs the host
// copies downloaded.
static double replica_divergence(trainer_t *t) {
    const model_t *m = t->model;
    const int64_t own = t->sliced ? t->shard.own : 0;  // a slice of the head is each rank's own
    double d = comm_divergence(t->comm, m->host_params + own, m->table.total - own, t->scratch);
    if (m->invariant) {
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
    s.divergence = replica_divergence(t);
    if (t->has_val) {
        if (!m->invariant) {  // rank 0's running stats rule
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
    json_end(&j);
    metrics_append(t->cfg->metrics, &j);
}

// After an epoch's last step: replica and finiteness checks, validation, the epoch line and
// metrics; then the position moves to the next epoch.
static void end_epoch(trainer_t *t) {
    model_download(t->model);
    check_finite(t);
    const epoch_summary_t s = summarise_epoch(t);
    met();
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

// Hands the loader this epoch's micro-batches before `upto` not yet handed over.
static void prefetch_until(trainer_t *t, int64_t upto) {
    for (; t->prefetched < upto && t->prefetched < t->micro_steps; t->prefetched++) {
        int n = t->model->invariant || t->sampler.per_speaker
                    ? sampler_batch_slice(&t->sampler, t->prefetched, t->cfg->batch, t->idx)
                    : sampler_batch(&t->sampler, t->prefetched, t->cfg->batch, t->idx);
        const int64_t V = t->cfg->views;  // each utterance V times in a row: its views
        for (int64_t i = (int64_t)n * V - 1; V > 1 && i >= 0; i--) t->idx[i] = t->idx[i / V];
        loader_prefetch(&t->loader, t->epoch, t->idx, (int)(n * V));
    }
}

// Samples of this rank's micro-batch u (the last of an epoch may be short; equal on every rank).
static int64_t micro_batch_size(const trainer_t *t, int64_t u) {
    const int64_t left = t->sampler.per_rank - u * t->cfg->batch;
    return left < t->cfg->batch ? left : t->cfg->batch;
}

// An accounted update's global figures (loss sum, correct, count) into the epoch's; a skipped
// update's samples count as seen, its loss and accuracy do not.
static void count_update(trainer_t *t, const double v[3], int applied) {
    const int64_t later = t->unaccounted;                  // updates queued after this one
    t->samples_in_epoch += (int64_t)v[2] / t->cfg->views;  // (the epoch's position counts utterances)
    if (applied) {
        t->ep_loss_sum += v[0];
        t->ep_correct += (int64_t)v[1];
        t->ep_count += (int64_t)v[2];
    }
    progress_step(&t->progress, (int64_t)v[2], v[0] / v[2], t->epoch, t->cfg->epochs, t->step_in_epoch - later,
                  t->steps);
}

// Reads the statistics of the oldest update not yet accounted for (global: summed over
// ranks) and checks them; without step controls also adds them to the epoch's figures and
// reports progress (with them queue_step does, once it has decided on the update).
static void account_step(trainer_t *t) {
    step_stats_t st = t->partial;  // its micro-batches read before
    t->partial = (step_stats_t){0};
    const int pending = model_read_stats(t->model, &st);
    SPK_ASSERT(pending && t->unaccounted > 0);
    t->unaccounted--;
    // The signal flag rides on the statistics' allreduce: ranks that got SIGTERM at slightly
    // different moments still stop after the same step.
    double v[4] = {st.loss_sum, (double)st.correct, (double)st.count, (double)stop_signals_pending()};
    comm_allreduce_max_f64(t->comm, v + 3, 1);
    comm_allreduce_sum_f64(t->comm, v, 3);
    if (t->model->invariant) v[0] = global_loss(t, &st);
    t->stop_signal = (int)v[3];
    // Every rank has just left the allreduce, so the collective read of a later update's
    // micro-batches costs only its I/O here (before it, a rank would wait for the slowest).
    const double w0 = spk_seconds();
    prefetch_until(t, t->step_in_epoch * t->cfg->grad_accum + 2);
    t->ep_data_wait += spk_seconds() - w0;
    met();
    memcpy(t->last_update, v, sizeof t->last_update);
    if (t->controls.measure) return;  // step_controls_apply judges a non-finite loss
    if (!isfinite(v[0]))
        spk_fail_all(SPK_EXIT_NUMERIC, "loss is %s at epoch %lld, global step %lld; " NONFINITE_ADVICE,
                     isnan(v[0]) ? "NaN" : "infinite", (long long)t->epoch + 1,
                     (long long)(t->global_step - t->unaccounted), t->cfg->data);
    count_update(t, v, 1);
}

// Brings the host up to date with the device: the averaging finished (with its deadline) and
// every update's statistics accounted for. Before checkpoints, epoch ends and the run's end.
static void settle(trainer_t *t) {
    grad_sync_drain(&t->grad_sync);
    while (t->model->stats_pending > 0) account_step(t);
}

// The forward/backward passes of update `step`: its --grad-accum micro-batches, gradients
// accumulated so that they end as the mean over all the update's samples, then averaged
// across ranks (overlapping the last backward). At most one micro-batch's statistics may wait
// unread when the next is queued: the previous update's are accounted for after this one's
// first micro-batch, and every micro-batch but the last is read into t->partial at once.
static void accumulate(trainer_t *t, int64_t step) {
    model_t *m = t->model;
    const int64_t first = step * t->cfg->grad_accum, total = (int64_t)m->table.total;
    const int64_t last =
        (first + t->cfg->grad_accum < t->micro_steps ? first + t->cfg->grad_accum : t->micro_steps) - 1;
    int64_t n_prev = 0, n_all = 0;
    model_zero_grads(m);                               // (and the exact sums of the invariant mode)
    m->step_key = t->global_step;                      // (a sharded head's class sampling)
    if (t->prefetched < first) t->prefetched = first;  // resumed mid-epoch
    for (int64_t u = first; u <= last; u++) {
        // Batches are read two ahead; the loader's threads compute their frames meanwhile.
        const double w0 = spk_seconds();
        prefetch_until(t, u + 2);
        const batch_t *b = loader_wait(&t->loader);
        t->ep_data_wait += spk_seconds() - w0;
        // Each backward adds its batch's mean gradient. A micro-batch of another size (an
        // epoch's last) first rescales the sum so far, which then weighs each by its samples.
        const int64_t n = micro_batch_size(t, u);
        if (n_prev && n != n_prev) m->be->vec_scale(m->grads, (float)((double)n_prev / (double)n), (size_t)total);
        n_prev = n;
        n_all += n;
        if (u == last)
            grad_sync_begin(&t->grad_sync, m);
        else
            grad_sync_begin_micro(&t->grad_sync, m);
        m->ops->train_step(m, b);
        if (u < last) {
            if (m->stats_pending > 1) account_step(t);  // the previous update's last micro-batch
            model_read_stats(m, &t->partial);
        }
    }
    grad_sync_finish(&t->grad_sync);
    grad_sync_wait(&t->grad_sync);
    if (m->ops->after_averaging) m->ops->after_averaging(m);
    met();
    if (n_all != n_prev) m->be->vec_scale(m->grads, (float)((double)n_prev / (double)n_all), (size_t)total);
}

// What the model does after an update (DINO: the teacher's EMA), over the run's planned updates.
static void after_update(trainer_t *t) {
    model_t *m = t->model;
    if (m->ops->after_update) m->ops->after_update(m, t->global_step, t->steps * t->cfg->epochs);
}

// Queues one synchronous data-parallel update: micro-batches, averaging, step controls and
// the optimizer's update. Without controls that need the update's figures first, nothing here
// waits for a device (its statistics are read at the next update, the averaging's deadline
// covers the update before), so the host prepares update s + 1 while the device computes s.
// With them (app/train/step_controls.h) the update waits for its loss and gradient norm.
static void queue_step(trainer_t *t, int64_t step) {
    model_t *m = t->model;
    const double t0 = spk_seconds(), wait0 = t->ep_data_wait;
    accumulate(t, step);
    t->lr = lr_at(&t->sched, t->global_step);
    t->global_step++;
    t->step_in_epoch++;
    t->unaccounted++;
    t->started = 1;
    step_watchdog_at_step(t->global_step);
    if (!t->controls.measure) {
        optimizer_step(&t->opt, m->params, m->grads, t->lr);
        after_update(t);
        return;
    }
    grad_sync_drain(&t->grad_sync);  // the norm's download waits for the device: with the deadline first
    while (m->stats_pending > 0) account_step(t);
    step_report_t r = {.loss = t->last_update[0] / t->last_update[2],
                       .accuracy = t->last_update[1] / t->last_update[2]};
    const int apply = step_controls_apply(&t->controls, m->grads, m->table.total, &r, t->epoch, t->global_step - 1);
    if (apply) {
        optimizer_step(&t->opt, m->params, m->grads, t->lr);
        after_update(t);
    }
    count_update(t, t->last_update, apply);
    step_controls_log(&t->controls, &r, t->epoch, t->global_step - 1, t->lr, (int64_t)t->last_update[2],
                      spk_seconds() - t0, t->ep_data_wait - wait0);
}

// ---- setup ---------------------------------------------------------------------------------

static void open_data(trainer_t *t) {
    const train_config_t *c = t->cfg;
    dataset_open(&t->data, c->data, t->comm->world);
    t->data_fingerprint = dataset_fingerprint(&t->data);
    t->aug = augment_open(&c->aug, &t->data, t->comm->world, (uint64_t)c->seed);
    if (t->aug) {
        char line[2048];
        augment_describe(t->aug, line, sizeof line);
        printf0("%s\n", line);
    }
    if (c->global_batch > t->data.num_utts)
        spk_fail_all(SPK_EXIT_USAGE,
                     "train: the global batch %lld (%lld per rank x %d ranks) is larger than the %lld utterances of %s",
                     (long long)c->global_batch, (long long)c->batch, t->comm->size, (long long)t->data.num_utts,
                     c->data);
    t->has_val = c->val_data[0] != 0;
    if (t->has_val) {
        dataset_open(&t->val, c->val_data, t->comm->world);
        if (t->val.visual.dim != t->data.visual.dim || t->val.visual_ratio != t->data.visual_ratio ||
            (t->val.image_size > 0) != (t->data.image_size > 0))
            spk_fail_all(
                SPK_EXIT_DATA,
                "%s: its visual stream (%lld values a frame, 1 frame per %lld audio frames%s) differs from the "
                "training set's (%lld, %lld%s)",
                c->val_data, (long long)t->val.visual.dim, (long long)t->val.visual_ratio,
                t->val.image_size ? ", pictures" : "", (long long)t->data.visual.dim, (long long)t->data.visual_ratio,
                t->data.image_size ? ", pictures" : "");
        if (c->val_trials[0]) {  // verification: any speakers, utterances named by /utt_ids
            if (t->val.feature_dim != t->data.feature_dim)
                spk_fail_all(SPK_EXIT_DATA, "%s: feature_dim %lld differs from the training set's %lld", c->val_data,
                             (long long)t->val.feature_dim, (long long)t->data.feature_dim);
            char **ids = h5_read_strings(t->val.file, "utt_ids", t->val.num_utts);
            if (!ids)
                spk_fail_all(SPK_EXIT_DATA, "%s: '/utt_ids' is missing: --val-trials names utterances", c->val_data);
            trials_read(c->val_trials, ids, t->val.num_utts, &t->trials);
            h5_free_strings(ids, t->val.num_utts);
        } else if (t->val.feature_dim != t->data.feature_dim || t->val.num_speakers != t->data.num_speakers)
            spk_fail_all(SPK_EXIT_DATA,
                         "%s: feature_dim/num_speakers (%lld/%lld) differ from the training set's (%lld/%lld)",
                         c->val_data, (long long)t->val.feature_dim, (long long)t->val.num_speakers,
                         (long long)t->data.feature_dim, (long long)t->data.num_speakers);
    }
}

// Identical replicas from the start: rank 0's initialisation is everyone's.
static void create_model(trainer_t *t) {
    const train_config_t *c = t->cfg;
    const model_config_t mc = train_config_model(c);
    // Speed perturbation makes each factor's copies of a speaker a class of their own.
    const int64_t classes = t->data.num_speakers * augment_classes_per_speaker(&c->aug);
    const optimizer_config_t oc = train_config_optimizer(c);
    const int sharded = strcmp(c->head, "sharded") == 0;
    t->sliced = sharded && t->comm->size > 1;
    int64_t first = 0, rows = 0;
    if (t->sliced) {
        if (aam_shard_blocks(classes) < t->comm->size)
            spk_fail_all(
                SPK_EXIT_USAGE, "train: --head sharded over %d ranks needs at least as many classes (%s has %lld%s)",
                t->comm->size, c->data, (long long)classes, aam_shard_block(classes) > 1 ? ", split in blocks" : "");
        head_shard_slice(classes, t->comm->size, t->comm->rank, &first, &rows);
    }
    if (sharded && mc.invariant && classes > XSUM_MAX_TERMS)  // each class is one term of a row's denominator
        spk_fail_all(SPK_EXIT_USAGE,
                     "train: --head sharded --invariant sums each row's softmax over at most %d classes exactly (%s "
                     "has %lld)",
                     XSUM_MAX_TERMS, c->data, (long long)classes);
    const model_data_t md = {.feature_dim = t->data.feature_dim,
                             .num_classes = classes,
                             .class_first = first,
                             .class_rows = rows,
                             .visual_dim = t->data.visual.dim,
                             .visual_ratio = t->data.visual_ratio,
                             .visual_kind = t->data.image_size ? VISUAL_PICTURES : VISUAL_FEATURES,
                             .source = c->data,
                             .param_copies = 2 + optimizer_slots(&oc),
                             .ranks_per_node = t->comm->local_size};
    model_t *m = t->model = model_create(&mc, &md, t->be);
    const int64_t own = t->sliced ? m->table.t[0].numel : 0;  // each rank drew its own slice
    comm_bcast(t->comm, m->host_params + own, m->table.total - own, MPI_FLOAT, 0);
    head_comm_init(&t->head_comm, t->comm);
    if (sharded) m->head_comm = &t->head_comm.ops;
    m->batch_comm = &t->head_comm.ops;  // (contrastive losses over the global batch)
    if (t->sliced) sharded_head_init(&t->shard, t->comm, m);
    comm_bcast(t->comm, m->host_state, m->state_table.total, MPI_FLOAT, 0);
    model_upload(m);
}

static void create_optimizer(trainer_t *t) {
    const int64_t n = t->model->table.total;
    const optimizer_config_t oc = train_config_optimizer(t->cfg);
    optimizer_init(&t->opt, &oc, n, t->be);
    step_controls_init(&t->controls, t->cfg, t->be);
    const int64_t own = t->sliced ? t->shard.own : 0;  // the head's slice: its gradient is the global batch's already
    const model_t *m = t->model;
    if (m->invariant && m->head_comm) {  // the head's norm by class blocks on any number of ranks, one included
        const param_tensor_t *head = &m->table.t[0];
        SPK_ASSERT(strcmp(head->name, "classifier.weight") == 0);
        step_controls_shard(&t->controls, t->comm, head->numel, aam_shard_block(m->num_classes) * head->shape[1]);
    } else if (own) {
        step_controls_shard(&t->controls, t->comm, own, 0);
    }
    grad_sync_init(&t->grad_sync, t->comm, t->be, n, own ? own : model_unaveraged_head(t->model), t->model->invariant,
                   t->model->teacher);
    head_comm_use_backend(&t->head_comm, t->be, t->grad_sync.nccl);  // (the global batch's collectives on the GPUs)
    const int64_t ns = t->model->state_table.total;
    t->scratch = mallocCheck((size_t)(n > ns ? n : ns) * sizeof(float));
}

// Steps per epoch, PyTorch's way: every rank takes ceil(N / K) positions of the padded order
// (or floor with --drop-last) in steps of --batch; a last step too small for BatchNorm is left out.
static int64_t default_steps(const trainer_t *t) {
    const train_config_t *c = t->cfg;
    const model_t *m = t->model;
    int64_t steps = sampler_steps(&t->sampler, c->batch);
    const int64_t tail = t->sampler.per_rank - (steps - 1) * c->batch;  // samples of the last step
    if (c->batch < m->min_batch || t->sampler.per_rank < m->min_batch)
        spk_fail_all(SPK_EXIT_USAGE,
                     "train: %s's BatchNorm needs at least %d samples per rank and step (--batch %lld, %lld "
                     "samples per rank and epoch)",
                     c->model.name, m->min_batch, (long long)c->batch, (long long)t->sampler.per_rank);
    if (tail < m->min_batch) {
        steps--;  // as in PyTorch, BatchNorm cannot train on a batch of one: skip that step
        printf0(
            "note: the last step of each epoch would have %lld sample per rank, too few for %s's BatchNorm; it is "
            "skipped (%lld samples per epoch unused%s; another --batch avoids this)\n",
            (long long)tail, c->model.name, (long long)tail * t->comm->size,
            c->no_shuffle ? ", always the same ones with --no-shuffle" : "");
    }
    return steps;
}

// What the invariant mode needs of the batches: BatchNorm's samples in each micro-batch's global
// batch, and groups of samples whole on every rank.
static void invariant_checks(const trainer_t *t) {
    const train_config_t *c = t->cfg;
    if (c->global_batch / c->grad_accum < t->model->min_batch)
        spk_fail_all(SPK_EXIT_USAGE,
                     "train: %s's BatchNorm needs at least %d samples in the global batch of each micro-batch "
                     "(--global-batch %lld / --grad-accum %lld)",
                     c->model.name, t->model->min_batch, (long long)c->global_batch, (long long)c->grad_accum);
    if (c->batch % c->model.invariant_group != 0)
        spk_fail_all(
            SPK_EXIT_USAGE,
            "train: --invariant-group %lld does not divide the per-rank batch %lld (%lld samples on %d ranks): "
            "the groups of samples must stay whole on any world size you use",
            (long long)c->model.invariant_group, (long long)c->batch, (long long)c->global_batch, t->comm->size);
}

// Micro-batches per epoch in the invariant mode: whole updates of the epoch order only, so the
// steps and their samples are the same on any number of ranks (padding to a multiple of the
// ranks would not be); each rank takes a contiguous slice of each micro-batch's global batch
// (sampler_batch_slice).
static int64_t invariant_steps(const trainer_t *t) {
    const train_config_t *c = t->cfg;
    const int64_t n = t->data.num_utts, steps = n / c->global_batch, rest = n - steps * c->global_batch;
    invariant_checks(t);
    // With --grad-accum, each update's micro-batches add to the same exact sums, rounded once when
    // the last one is reduced: whole updates only, so every update is the same samples on any K.
    if (rest)
        printf0(
            "note: --invariant trains on whole global batches: %lld of the %lld samples of each epoch are not "
            "used%s\n",
            (long long)rest, (long long)n, c->no_shuffle ? " (always the same ones with --no-shuffle)" : "");
    return steps * c->grad_accum;
}

// Steps per epoch with speaker-balanced global batches (io/loader/sampler.h): as many as the
// speakers' groups of --utts-per-speaker fill, each rank taking contiguous slices.
static int64_t balanced_steps(trainer_t *t) {
    const train_config_t *c = t->cfg;
    const int64_t M = c->model.per_speaker, micro = c->batch * t->comm->size, speakers_per_batch = micro / M;
    if (t->model->invariant) invariant_checks(t);
    const int64_t speakers = sampler_balance(&t->sampler, t->data.labels, t->data.num_speakers, M, micro);
    if (speakers < speakers_per_batch || t->sampler.total == 0)
        spk_fail_all(SPK_EXIT_USAGE,
                     "train: --sampler balanced needs %lld speakers with at least %lld utterances for a global batch "
                     "of %lld (%lld ranks x %lld); %s has %lld such speakers%s",
                     (long long)speakers_per_batch, (long long)M, (long long)micro, (long long)t->comm->size,
                     (long long)c->batch, c->data, (long long)speakers,
                     speakers >= speakers_per_batch ? " and too few utterances for one batch" : "");
    if ((t->model->invariant ? micro : c->batch) < t->model->min_batch)
        spk_fail_all(SPK_EXIT_USAGE, "train: %s's BatchNorm needs at least %d samples per step (--batch %lld)",
                     c->model.name, t->model->min_batch, (long long)c->batch);
    const int64_t steps = t->sampler.total / micro;
    return t->model->invariant ? steps / c->grad_accum * c->grad_accum : steps;  // (the invariant mode: whole updates)
}

// A recipe shrunk past its schedule still runs, but not as written: say so once.
static void warn_short_schedule(const trainer_t *t) {
    const train_config_t *c = t->cfg;
    const int64_t total = t->steps * c->epochs;
    if (c->model.margin > 0 && c->model.margin_warmup_end > c->epochs)
        printf0("warning: --margin-warmup-end %lld is after the last epoch (%lld): the margin never reaches %g\n",
                (long long)c->model.margin_warmup_end, (long long)c->epochs, c->model.margin);
    if (c->warmup_steps >= total)
        printf0(
            "warning: --warmup-steps %lld is not below the run's %lld steps: the learning rate never reaches "
            "--lr\n",
            (long long)c->warmup_steps, (long long)total);
    if (c->max_steps > 0 && c->max_steps < total && c->warmup_steps >= c->max_steps)
        printf0("warning: --warmup-steps %lld is not below --max-steps %lld\n", (long long)c->warmup_steps,
                (long long)c->max_steps);
}

// The sampler and loaders, the steps of an epoch and the learning-rate schedule over them.
static void plan_epochs(trainer_t *t) {
    const train_config_t *c = t->cfg;
    const model_t *m = t->model;
    sampler_init(&t->sampler, t->data.num_utts, t->comm->size, t->comm->rank, (uint64_t)c->seed, !c->no_shuffle,
                 c->drop_last);
    loader_init(&t->loader, &t->data, (int)(c->batch * c->views), &m->input, (uint64_t)c->seed, -1);
    loader_set_augment(&t->loader, t->aug);
    loader_set_views(&t->loader, (int)c->views);
    if (c->local_frames > 0 && c->views > c->model.global_views && strcmp(c->model.loss, "dino") == 0)
        loader_set_local_crops(&t->loader, (int)c->model.global_views, c->local_frames);
    loader_set_picture_augment(&t->loader, c->picture_augment);
    if (t->has_val) loader_init(&t->val_loader, &t->val, (int)c->batch, &m->input, (uint64_t)c->seed, -1);
    t->idx = mallocCheck((size_t)(c->batch * c->views) * sizeof(int64_t));
    t->micro_steps = strcmp(c->sampler, "balanced") == 0 ? balanced_steps(t)
                     : m->invariant                      ? invariant_steps(t)
                                                         : default_steps(t);
    t->steps = (t->micro_steps + c->grad_accum - 1) / c->grad_accum;
    t->sched = train_config_lr_schedule(c, t->steps);
    t->lr = lr_at(&t->sched, 0);
    warn_short_schedule(t);
}

// Where the run starts: a checkpoint (--resume), or the beginning with a fresh metrics file
// (from --init-from's weights when given); and what the run may do in --ckpt-dir from there.
static void choose_start(trainer_t *t) {
    const train_config_t *c = t->cfg;
    ckpt_meta_t *m = callocCheck(1, sizeof *m);
    const int resumed = resume(t, m);
    ckpt_policy_start(&t->ckpt, t->comm, c, resumed ? m : NULL);
    free(m);
    step_controls_resume_log(&t->controls, resumed ? t->global_step : 0);  // a fresh run: a fresh step log
    if (!resumed && c->init_from[0]) init_from_start(t->comm, t->model, c->init_from, c->init_head);
    if (c->metrics[0] && t->comm->rank == 0) {
        if (resumed)
            metrics_truncate_from(c->metrics, t->epoch + 1);
        else
            metrics_truncate_from(c->metrics, 1);  // a fresh run starts a fresh file
    }
}

static trainer_t *trainer_setup(const comm_t *comm, const train_config_t *cfg, const char *config_text,
                                const char *config_yaml) {
    trainer_t *t = callocCheck(1, sizeof *t);
    t->comm = comm;
    t->cfg = cfg;
    t->config_text = config_text;
    t->config_yaml = config_yaml;
    t->be = device_select(comm, cfg->device, "train");
    device_set_precision(comm, t->be, train_config_model(cfg).precision);
    ckpt_policy_check_dir(comm, cfg->ckpt_dir);  // before minutes of loading, not at the first checkpoint
    open_data(t);
    stop_signals_progress();
    create_model(t);
    create_optimizer(t);
    plan_epochs(t);
    stop_signals_progress();
    char accum[48] = "";
    if (cfg->grad_accum > 1) snprintf(accum, sizeof accum, " x %lld micro-batches", (long long)cfg->grad_accum);
    char head[160] = "";
    if (t->sliced) {
        int64_t lo = INT64_MAX, hi = 0, first, rows;
        for (int r = 0; r < comm->size; r++) {
            head_shard_slice(t->model->num_classes, comm->size, r, &first, &rows);
            lo = rows < lo ? rows : lo;
            hi = rows > hi ? rows : hi;
        }
        snprintf(head, sizeof head, "; classifier sharded: %lld-%lld of %lld classes per rank", (long long)lo,
                 (long long)hi, (long long)t->model->num_classes);
    }
    printf0(
        "spkddp train: model %s (%lld parameters%s), %lld utterances of %s, %d ranks x batch %lld%s = global batch "
        "%lld, %lld steps/epoch\n",
        cfg->model.name, (long long)(t->sliced ? t->shard.n_full : t->model->table.total), head,
        (long long)t->data.num_utts, cfg->data, comm->size, (long long)cfg->batch, accum, (long long)cfg->global_batch,
        (long long)t->steps);
    if (strcmp(cfg->model.loss, "aam") != 0)
        printf0("loss %s over %s%s\n", cfg->model.loss,
                strcmp(cfg->negatives, "local") == 0 ? "each rank's batch" : "the global batch",
                strcmp(cfg->negatives, "local") == 0 || comm->size == 1 ? ""
                : t->head_comm.nccl ? " (embeddings gathered and gradients reduce-scattered by NCCL)"
                                    : " (embeddings gathered and gradients reduce-scattered by MPI)");
    choose_start(t);
    stop_signals_progress();
    return t;
}

// ---- the loop ------------------------------------------------------------------------------

static int at_max_steps(const trainer_t *t) { return t->cfg->max_steps > 0 && t->global_step >= t->cfg->max_steps; }

// The rest of the current epoch (all of it, or what a resumed run has left). Returns 1 when
// the run stops: --max-steps reached or a signal agreed, with a checkpoint either way.
static int run_epoch(trainer_t *t) {
    const train_config_t *c = t->cfg;
    model_t *m = t->model;
    sampler_set_epoch(&t->sampler, t->epoch);
    if (m->ops->set_epoch) m->ops->set_epoch(m, t->epoch);
    while (t->step_in_epoch < t->steps) {
        const double t0 = spk_seconds();
        queue_step(t, t->step_in_epoch);
        if (m->stats_pending > 1) account_step(t);  // the step before this one: one step late
        t->ep_seconds += spk_seconds() - t0;
        if (t->step_in_epoch >= t->steps) break;  // the epoch end checkpoints
        const int stop = at_max_steps(t) || t->stop_signal;
        if (stop || (c->ckpt_every > 0 && t->global_step % c->ckpt_every == 0)) {
            settle(t);
            save_checkpoint(t);
        }
        if (stop) return 1;
    }
    const double t0 = spk_seconds();
    settle(t);
    t->ep_seconds += spk_seconds() - t0;
    progress_end_epoch(&t->progress);
    end_epoch(t);
    save_checkpoint(t);
    return at_max_steps(t) || t->stop_signal;
}

// A signal that came while the run was starting: every rank learns of it before any step.
static int stopped_before_start(trainer_t *t) {
    double s = (double)stop_signals_pending();
    comm_allreduce_max_f64(t->comm, &s, 1);
    t->stop_signal = (int)s;
    return t->stop_signal != 0;
}

// Epochs until the last one, --max-steps or an agreed signal. Returns 1 when stopped early.
static int run_epochs(trainer_t *t) {
    progress_init(&t->progress, (double)t->cfg->progress, t->comm->rank);
    int stopped = at_max_steps(t) || stopped_before_start(t);
    while (t->epoch < t->cfg->epochs && !stopped) stopped = run_epoch(t);
    return stopped;
}

// ---- teardown ------------------------------------------------------------------------------

// The replicas' last check and how the run ended: finished (ckpt_dir/FINISHED), stopped at
// --max-steps, or stopped on a signal (exit 75: requeue me). Returns the exit code.
static int finish(trainer_t *t, int stopped) {
    const train_config_t *c = t->cfg;
    model_t *m = t->model;
    settle(t);
    model_download(m);
    const double div = replica_divergence(t);
    int rc = div == 0.0 ? SPK_EXIT_OK : SPK_EXIT_NUMERIC;
    if (t->stop_signal) {
        printf0("received %s: stopped at global step %lld%s\n", stop_signals_name(t->stop_signal),
                (long long)t->global_step,
                !c->ckpt_dir[0] ? ", no --ckpt-dir so nothing was saved"
                : t->started    ? " with a checkpoint; resume with --resume auto"
                                : " before its first step; resume with --resume auto");
        if (rc == SPK_EXIT_OK) rc = c->ckpt_dir[0] ? SPK_EXIT_REQUEUE : SPK_EXIT_FAILURE;
    } else if (stopped && t->epoch < c->epochs) {
        printf0("stopped at global step %lld (--max-steps); resume with --resume auto\n", (long long)t->global_step);
    } else if (c->ckpt_dir[0] && t->comm->rank == 0) {
        ckpt_policy_mark_finished(&t->ckpt, t->global_step);
    }
    printf0("cross-rank weight difference max |theta_r - theta_0| = %g (%s)\n", div,
            div == 0.0 ? "replicas identical" : "REPLICAS DIFFER");
    return rc;
}

static void trainer_free(trainer_t *t) {
    loader_free(&t->loader);
    augment_close(t->aug);
    if (t->has_val) {
        loader_free(&t->val_loader);
        dataset_close(&t->val);
        trials_free(&t->trials);
    }
    sampler_free(&t->sampler);
    dataset_close(&t->data);
    head_comm_release(&t->head_comm);
    grad_sync_free(&t->grad_sync);
    if (t->sliced) sharded_head_free(&t->shard);
    optimizer_free(&t->opt);
    step_controls_free(&t->controls);
    model_free(t->model);
    device_release(t->be);  // after everything that lived on it
    ckpt_policy_free(&t->ckpt);
    free(t->scratch);
    free(t->idx);
    free(t);
}

int trainer_run(const comm_t *comm, const train_config_t *cfg, const char *config_text, const char *config_yaml) {
    trainer_t *t = trainer_setup(comm, cfg, config_text, config_yaml);
    step_watchdog_start(comm->wait_timeout_s);
    step_watchdog_at_step(t->global_step);
    const int stopped = run_epochs(t);
    step_watchdog_stop();
    const int rc = finish(t, stopped);
    trainer_free(t);
    return rc;
}
