#include "app/train/trainer.h"

#include "kernels/base/check.h"
#include "app/dist/device_select.h"
#include "app/eval/embedder.h"
#include "app/dist/grad_sync.h"
#include "app/eval/scoring.h"
#include "app/train/lr_schedule.h"
#include "app/model/model.h"
#include "app/train/optimizer.h"
#include "app/train/progress.h"
#include "app/train/signals.h"
#include "io/checkpoint.h"
#include "io/dataset.h"
#include "io/h5util.h"
#include "io/loader.h"
#include "io/metrics.h"
#include "io/sampler.h"
#include "kernels/base/clock.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    const comm_t *comm;
    const train_config_t *cfg;
    const char *config_text;  // the flags as key=value lines, stored in checkpoints
    dataset_t data, val;
    int has_val;       // held-out set: loss/accuracy (same speakers) or verification (trials)
    trials_t trials;   // verification trials over the held-out utterances (n = 0: none)
    sampler_t sampler;
    loader_t loader, val_loader;
    model_t *model;
    optimizer_t opt;
    grad_sync_t grad_sync;
    lr_schedule_t sched;
    int64_t *idx;          // (batch,) this step's sample indices
    int64_t steps;         // per epoch
    const batch_t *next;   // the batch of step next_step of this epoch, read ahead (-1: none)
    int64_t next_step;
    float *scratch;        // (num_params,) divergence check
    // position
    int64_t epoch;             // epoch in progress
    int64_t samples_in_epoch;  // global samples done in it
    int64_t step_in_epoch;
    int64_t global_step;
    // metrics of the epoch in progress (global, identical on every rank)
    double ep_loss_sum, ep_seconds;
    int64_t ep_correct, ep_count;
    double lr;
    int stop_signal;  // a signal every rank agreed to stop on (0: none)
    progress_t progress;
} trainer_t;

// ---- checkpoints --------------------------------------------------------------------------

static ckpt_tensors_t tensors_of(trainer_t *t) {
    return (ckpt_tensors_t){&t->model->table, t->model->host_params, &t->model->state_table, t->model->host_state,
                            t->opt.slots, t->opt.host_state};
}

static void save_checkpoint(trainer_t *t) {
    if (!t->cfg->ckpt_dir[0]) return;
    if (t->comm->rank == 0) {
        ckpt_meta_t *m = callocCheck(1, sizeof *m);
        snprintf(m->model, sizeof m->model, "%.63s", t->cfg->model);
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
        snprintf(m->config, sizeof m->config, "%s", t->config_text);
        model_download(t->model);
        optimizer_download(&t->opt);
        ckpt_tensors_t ts = tensors_of(t);
        char path[4200];
        ckpt_save(t->cfg->ckpt_dir, m, &ts, (int)t->cfg->keep, path, sizeof path);
        if (t->samples_in_epoch == 0)
            printf0("checkpoint %s (after epoch %lld, global step %lld)\n", path, (long long)t->epoch, (long long)t->global_step);
        else
            printf0("checkpoint %s (epoch %lld, step %lld of the epoch, global step %lld)\n", path, (long long)t->epoch + 1,
                    (long long)t->step_in_epoch, (long long)t->global_step);
        free(m);
    }
    comm_barrier(t->comm);  // nobody runs ahead while the file is not yet in place
}

// Loads --resume into every rank (rank 0 reads, everyone receives). Returns 1 if resumed.
static int resume(trainer_t *t) {
    const train_config_t *c = t->cfg;
    if (!c->resume[0]) return 0;
    struct { int code; int found; char path[4200]; char err[1024]; } r;
    memset(&r, 0, sizeof r);
    ckpt_meta_t *m = callocCheck(1, sizeof *m);
    if (t->comm->rank == 0) {
        if (strcmp(c->resume, "auto") == 0) r.found = ckpt_find_latest(c->ckpt_dir, r.path, sizeof r.path);
        else {
            r.found = 1;
            snprintf(r.path, sizeof r.path, "%s", c->resume);
        }
        if (r.found) {
            ckpt_tensors_t ts = tensors_of(t);
            r.code = ckpt_load(r.path, c->model, m, &ts, r.err, sizeof r.err);
        }
    }
    comm_bcast(t->comm, &r, sizeof r, MPI_BYTE, 0);
    if (r.code) spk_fail_all(r.code, "%s", r.err);
    if (!r.found) {
        printf0("resume: no checkpoint in %s yet, starting from scratch\n", c->ckpt_dir);
        free(m);
        return 0;
    }
    comm_bcast(t->comm, m, sizeof *m, MPI_BYTE, 0);
    comm_bcast(t->comm, t->model->host_params, t->model->table.total, MPI_FLOAT, 0);
    comm_bcast(t->comm, t->model->host_state, t->model->state_table.total, MPI_FLOAT, 0);
    comm_bcast(t->comm, t->opt.host_state, (int64_t)t->opt.slots * t->opt.n, MPI_FLOAT, 0);
    model_upload(t->model);
    optimizer_upload(&t->opt);
    if (m->seed != c->seed)
        spk_fail_all(SPK_EXIT_CKPT, "%s: written with --seed %lld, this run has --seed %lld; the sample order would not continue",
                     r.path, (long long)m->seed, (long long)c->seed);
    if (m->samples_in_epoch % c->global_batch != 0)
        spk_fail_all(SPK_EXIT_CKPT, "%s: stopped after %lld samples of epoch %lld, not a multiple of the global batch %lld; resume with the original global batch",
                     r.path, (long long)m->samples_in_epoch, (long long)m->epoch + 1, (long long)c->global_batch);
    t->epoch = m->epoch;
    t->samples_in_epoch = m->samples_in_epoch;
    t->step_in_epoch = m->samples_in_epoch / c->global_batch;
    t->global_step = m->global_step;
    t->opt.step = m->opt_step;
    t->ep_loss_sum = m->ep_loss_sum;
    t->ep_correct = m->ep_correct;
    t->ep_count = m->ep_count;
    t->ep_seconds = m->ep_seconds;
    printf0("resumed from %s: epoch %lld, step %lld, %lld samples into the epoch (written by %lld ranks, now %d)\n",
            r.path, (long long)t->epoch + 1, (long long)t->global_step, (long long)t->samples_in_epoch,
            (long long)m->world_size, t->comm->size);
    free(m);
    return 1;
}

// A finished run leaves ckpt_dir/FINISHED, so job scripts do not requeue it.
static void mark_finished(const char *dir, int64_t step) {
    char path[4200];
    snprintf(path, sizeof path, "%s/FINISHED", dir);
    FILE *f = fopen(path, "w");
    if (!f || fprintf(f, "finished at global step %lld\n", (long long)step) < 0 || fclose(f) != 0)
        spk_die(SPK_EXIT_FAILURE, "%s: cannot write the finished marker", path);
}

// ---- evaluation -------------------------------------------------------------------------------

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
        const batch_t *b = loader_load(&t->val_loader, 0, t->idx, n);
        if (n > 0) t->model->ops->eval_step(t->model, b, &st);
    }
    sampler_free(&s);
    double v[3] = {st.loss_sum, (double)st.correct, (double)st.count};
    comm_allreduce_sum_f64(t->comm, v, 3);
    *loss = v[0] / v[2];
    *acc = v[1] / v[2];
}

// EER, minDCF(0.01), minDCF(0.05) of the held-out trials: every rank embeds its block of
// utterances, rank 0 scores.
static void verify(trainer_t *t, double out[3]) {
    model_t *m = t->model;
    float *emb = embed_dataset(t->comm, m, &t->val, t->cfg->batch);
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

// ---- the loop ------------------------------------------------------------------------------

// A finite loss does not prove finite parameters (the last update may overflow), and NaN
// parameters would otherwise surface as "replicas diverged". Needs host_params downloaded.
static void check_finite(trainer_t *t) {
    const model_t *m = t->model;
    double bad = 0;
    for (int64_t i = 0; i < m->table.total; i++) bad += !isfinite(m->host_params[i]);
    comm_allreduce_max_f64(t->comm, &bad, 1);
    if (bad > 0)
        spk_fail_all(SPK_EXIT_NUMERIC, "%.0f parameters are NaN or infinite after epoch %lld; lower --lr or check the data "
                     "(inputs constant in time make ECAPA's pooled standard deviations degenerate)",
                     bad, (long long)t->epoch + 1);
}

static void end_epoch(trainer_t *t) {
    const train_config_t *c = t->cfg;
    model_t *m = t->model;
    model_download(m);
    check_finite(t);
    double div = comm_divergence(t->comm, m->host_params, m->table.total, t->scratch);
    double loss = t->ep_loss_sum / (double)t->ep_count, acc = (double)t->ep_correct / (double)t->ep_count;
    double sps = (double)t->ep_count / t->ep_seconds;
    double vloss = NAN, vacc = NAN, ver[3] = {NAN, NAN, NAN};
    if (t->has_val) {
        comm_bcast(t->comm, m->host_state, m->state_table.total, MPI_FLOAT, 0);  // rank 0's running stats rule
        model_upload(m);
        if (t->trials.n) verify(t, ver);
        else evaluate(t, &vloss, &vacc);
    }
    printf0("epoch %lld/%lld  step %lld  loss %.6f  acc %.4f", (long long)t->epoch + 1, (long long)c->epochs,
            (long long)t->global_step, loss, acc);
    if (t->has_val && !t->trials.n) printf0("  val_loss %.6f  val_acc %.4f", vloss, vacc);
    if (t->trials.n) printf0("  val_eer %.2f%%  minDCF(0.01) %.4f", 100.0 * ver[0], ver[1]);
    printf0("  lr %.6g  %.1f samples/s  %.2f s  divergence %g\n", t->lr, sps, t->ep_seconds, div);
    if (c->metrics[0] && t->comm->rank == 0) {
        json_line_t j;
        json_begin(&j);
        json_int(&j, "epoch", t->epoch + 1);
        json_int(&j, "global_step", t->global_step);
        json_num(&j, "loss", loss);
        json_num(&j, "accuracy", acc);
        if (t->has_val && !t->trials.n) {
            json_num(&j, "val_loss", vloss);
            json_num(&j, "val_accuracy", vacc);
        }
        if (t->trials.n) {
            json_num(&j, "val_eer", ver[0]);
            json_num(&j, "val_mindcf_0.01", ver[1]);
            json_num(&j, "val_mindcf_0.05", ver[2]);
        }
        json_num(&j, "lr", t->lr);
        json_num(&j, "samples_per_s", sps);
        json_num(&j, "epoch_seconds", t->ep_seconds);
        json_num(&j, "divergence", div);
        json_int(&j, "world_size", t->comm->size);
        json_end(&j);
        metrics_append(c->metrics, &j);
    }
    if (div != 0.0)
        spk_fail_all(SPK_EXIT_NUMERIC, "replicas diverged: max |theta_r - theta_0| = %g after epoch %lld", div,
                     (long long)t->epoch + 1);
    t->epoch++;
    t->samples_in_epoch = t->step_in_epoch = 0;
    t->ep_loss_sum = t->ep_seconds = 0.0;
    t->ep_correct = t->ep_count = 0;
}

static const batch_t *load_step(trainer_t *t, int64_t step) {
    int n = sampler_batch(&t->sampler, step, t->cfg->batch, t->idx);
    return loader_load(&t->loader, t->epoch, t->idx, n);
}

// One synchronous data-parallel step. Returns the global mean loss of the step.
static double train_step(trainer_t *t, int64_t step) {
    model_t *m = t->model;
    const batch_t *b = t->next_step == step ? t->next : load_step(t, step);
    t->next_step = -1;
    m->be->vec_zero(m->grads, (size_t)m->table.total);
    grad_sync_begin(&t->grad_sync, m);
    m->ops->train_step(m, b);
    grad_sync_finish(&t->grad_sync);
    // While a GPU computes and the gradients travel, the host reads the next batch into the
    // loader's buffer (train_step has copied b to the device; on the CPU it has finished).
    if (step + 1 < t->steps) {
        t->next = load_step(t, step + 1);
        t->next_step = step + 1;
    }
    grad_sync_wait(&t->grad_sync);
    step_stats_t st = {0};
    m->ops->read_stats(m, &st);
    // The signal flag rides on the statistics' allreduce: ranks that got SIGTERM at slightly
    // different moments still stop after the same step.
    double v[4] = {st.loss_sum, (double)st.correct, (double)st.count, (double)signals_pending()};
    comm_allreduce_max_f64(t->comm, v + 3, 1);
    comm_allreduce_sum_f64(t->comm, v, 3);
    t->stop_signal = (int)v[3];
    if (t->stop_signal) signals_agreed();
    if (!isfinite(v[0]))
        spk_fail_all(SPK_EXIT_NUMERIC, "loss is %s at epoch %lld, global step %lld; lower --lr or check the data",
                     isnan(v[0]) ? "NaN" : "infinite", (long long)t->epoch + 1, (long long)t->global_step + 1);
    t->lr = lr_at(&t->sched, t->global_step);
    optimizer_step(&t->opt, m->params, m->grads, t->lr);
    t->global_step++;
    t->step_in_epoch++;
    t->samples_in_epoch += (int64_t)v[2];
    t->ep_loss_sum += v[0];
    t->ep_correct += (int64_t)v[1];
    t->ep_count += (int64_t)v[2];
    return v[0] / v[2];
}

static void open_data(trainer_t *t) {
    const train_config_t *c = t->cfg;
    dataset_open(&t->data, c->data, t->comm->world);
    if (c->global_batch > t->data.num_utts)
        spk_fail_all(SPK_EXIT_USAGE, "train: the global batch %lld (%lld per rank x %d ranks) is larger than the %lld utterances of %s",
                     (long long)c->global_batch, (long long)c->batch, t->comm->size, (long long)t->data.num_utts, c->data);
    t->has_val = c->val_data[0] != 0;
    if (t->has_val) {
        dataset_open(&t->val, c->val_data, t->comm->world);
        if (c->val_trials[0]) {  // verification: any speakers, utterances named by /utt_ids
            if (t->val.feature_dim != t->data.feature_dim)
                spk_fail_all(SPK_EXIT_DATA, "%s: feature_dim %lld differs from the training set's %lld", c->val_data,
                             (long long)t->val.feature_dim, (long long)t->data.feature_dim);
            char **ids = h5_read_strings(t->val.file, "utt_ids", t->val.num_utts);
            if (!ids) spk_fail_all(SPK_EXIT_DATA, "%s: '/utt_ids' is missing: --val-trials names utterances", c->val_data);
            trials_read(c->val_trials, ids, t->val.num_utts, &t->trials);
            h5_free_strings(ids, t->val.num_utts);
        } else if (t->val.feature_dim != t->data.feature_dim || t->val.num_speakers != t->data.num_speakers)
            spk_fail_all(SPK_EXIT_DATA, "%s: feature_dim/num_speakers (%lld/%lld) differ from the training set's (%lld/%lld)",
                         c->val_data, (long long)t->val.feature_dim, (long long)t->val.num_speakers,
                         (long long)t->data.feature_dim, (long long)t->data.num_speakers);
    }
}

int trainer_run(const comm_t *comm, const train_config_t *cfg, const char *config_text) {
    trainer_t *t = callocCheck(1, sizeof *t);
    t->comm = comm;
    t->cfg = cfg;
    t->config_text = config_text;
    const spk_backend_t *be = device_select(comm, cfg->device, "train");
    device_set_tf32(be, cfg->tf32);
    open_data(t);

    model_config_t mc = train_config_model(cfg);
    t->model = model_create(&mc, &(model_data_t){t->data.feature_dim, t->data.num_speakers, t->data.visual.dim,
                                                 t->data.visual_ratio, cfg->data}, be);
    model_t *m = t->model;
    // Identical replicas from the start: rank 0's initialisation is everyone's.
    comm_bcast(comm, m->host_params, m->table.total, MPI_FLOAT, 0);
    comm_bcast(comm, m->host_state, m->state_table.total, MPI_FLOAT, 0);
    model_upload(m);
    optimizer_config_t oc = train_config_optimizer(cfg);
    optimizer_init(&t->opt, &oc, m->table.total, be);
    grad_sync_init(&t->grad_sync, comm, be, m->table.total);
    t->scratch = mallocCheck((size_t)m->table.total * sizeof(float));
    t->idx = mallocCheck((size_t)cfg->batch * sizeof(int64_t));

    sampler_init(&t->sampler, t->data.num_utts, comm->size, comm->rank, (uint64_t)cfg->seed, !cfg->no_shuffle, cfg->drop_last);
    loader_init(&t->loader, &t->data, (int)cfg->batch, &m->input, (uint64_t)cfg->seed);
    if (t->has_val) loader_init(&t->val_loader, &t->val, (int)cfg->batch, &m->input, (uint64_t)cfg->seed);
    int64_t steps = sampler_steps(&t->sampler, cfg->batch);
    t->next_step = -1;
    const int64_t tail = t->sampler.per_rank - (steps - 1) * cfg->batch;  // samples of the last step
    if (cfg->batch < m->min_batch || t->sampler.per_rank < m->min_batch)
        spk_fail_all(SPK_EXIT_USAGE, "train: %s's BatchNorm needs at least %d samples per rank and step (--batch %lld, %lld "
                     "samples per rank and epoch)", cfg->model, m->min_batch, (long long)cfg->batch,
                     (long long)t->sampler.per_rank);
    if (tail < m->min_batch) {
        steps--;  // as in PyTorch, BatchNorm cannot train on a batch of one: skip that step
        printf0("note: the last step of each epoch would have %lld sample per rank, too few for %s's BatchNorm; it is "
                "skipped (%lld samples per epoch unused%s; another --batch avoids this)\n",
                (long long)tail, cfg->model, (long long)tail * comm->size,
                cfg->no_shuffle ? ", always the same ones with --no-shuffle" : "");
    }
    t->sched = train_config_lr_schedule(cfg, steps);
    t->lr = lr_at(&t->sched, 0);
    t->steps = steps;

    printf0("spkddp train: model %s (%lld parameters), %lld utterances of %s, %d ranks x batch %lld = global batch %lld, %lld steps/epoch\n",
            cfg->model, (long long)m->table.total, (long long)t->data.num_utts, cfg->data, comm->size,
            (long long)cfg->batch, (long long)cfg->global_batch, (long long)steps);
    int resumed = resume(t);
    if (cfg->metrics[0] && comm->rank == 0) {
        if (resumed) metrics_truncate_from(cfg->metrics, t->epoch + 1);
        else metrics_truncate_from(cfg->metrics, 1);  // a fresh run starts a fresh file
    }

    signals_install();
    progress_init(&t->progress, (double)cfg->progress, comm->rank);
    int stopped = cfg->max_steps > 0 && t->global_step >= cfg->max_steps;
    while (t->epoch < cfg->epochs && !stopped) {
        sampler_set_epoch(&t->sampler, t->epoch);
        if (m->ops->set_epoch) m->ops->set_epoch(m, t->epoch);
        while (t->step_in_epoch < steps) {
            double t0 = spk_seconds();
            int64_t before = t->ep_count;
            double loss = train_step(t, t->step_in_epoch);
            t->ep_seconds += spk_seconds() - t0;
            progress_step(&t->progress, t->ep_count - before, loss, t->epoch, cfg->epochs, t->step_in_epoch, steps);
            int at_max = cfg->max_steps > 0 && t->global_step >= cfg->max_steps;
            if (t->step_in_epoch >= steps) break;  // the epoch end checkpoints
            if (at_max || t->stop_signal || (cfg->ckpt_every > 0 && t->global_step % cfg->ckpt_every == 0))
                save_checkpoint(t);
            if (at_max || t->stop_signal) {
                stopped = 1;
                break;
            }
        }
        if (t->step_in_epoch >= steps) {
            progress_end_epoch(&t->progress);
            end_epoch(t);
            save_checkpoint(t);
            if ((cfg->max_steps > 0 && t->global_step >= cfg->max_steps) || t->stop_signal) stopped = 1;
        }
    }
    model_download(m);
    double div = comm_divergence(comm, m->host_params, m->table.total, t->scratch);
    int rc = div == 0.0 ? SPK_EXIT_OK : SPK_EXIT_NUMERIC;
    if (t->stop_signal) {
        printf0("received %s: stopped at global step %lld%s\n", signals_name(t->stop_signal), (long long)t->global_step,
                cfg->ckpt_dir[0] ? " with a checkpoint; resume with --resume auto" : ", no --ckpt-dir so nothing was saved");
        if (rc == SPK_EXIT_OK) rc = cfg->ckpt_dir[0] ? SPK_EXIT_REQUEUE : SPK_EXIT_FAILURE;
    } else if (stopped && t->epoch < cfg->epochs) {
        printf0("stopped at global step %lld (--max-steps); resume with --resume auto\n", (long long)t->global_step);
    } else if (cfg->ckpt_dir[0] && comm->rank == 0) {
        mark_finished(cfg->ckpt_dir, t->global_step);
    }
    printf0("cross-rank weight difference max |theta_r - theta_0| = %g (%s)\n", div,
            div == 0.0 ? "replicas identical" : "REPLICAS DIFFER");

    loader_free(&t->loader);
    if (t->has_val) {
        loader_free(&t->val_loader);
        dataset_close(&t->val);
        trials_free(&t->trials);
    }
    sampler_free(&t->sampler);
    dataset_close(&t->data);
    grad_sync_free(&t->grad_sync);
    optimizer_free(&t->opt);
    model_free(m);
    device_release(be);
    free(t->scratch);
    free(t->idx);
    free(t);
    return rc;
}
