// The training loop, read from the bottom: trainer_run = trainer_setup (trainer_setup.c: device,
// data, model, optimizer, sampler and schedule, resume) -> run_epochs (steps, checkpoints in
// trainer_ckpt.c, epoch ends in trainer_epoch.c, signals) -> finish (last replica check,
// FINISHED marker, exit code) -> trainer_free.
#include "app/train/trainer.h"

#include "app/train/trainer_ckpt.h"
#include "app/train/trainer_epoch.h"
#include "app/train/trainer_setup.h"
#include "kernels/base/check.h"
#include "kernels/base/clock.h"
#include "kernels/base/spk_assert.h"

#include <math.h>
#include <string.h>

// ---- one step ------------------------------------------------------------------------------

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
    if (t->model->invariant) v[0] = trainer_global_loss(t, &st);
    t->stop_signal = (int)v[3];
    // Every rank has just left the allreduce, so the collective read of a later update's
    // micro-batches costs only its I/O here (before it, a rank would wait for the slowest).
    const double w0 = spk_seconds();
    prefetch_until(t, t->step_in_epoch * t->cfg->grad_accum + 2);
    t->ep_data_wait += spk_seconds() - w0;
    trainer_met();
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
    model_plan_update(m, t->cfg->global_batch * t->cfg->views, t->comm->size);  // (the invariant mode's sums)
    model_zero_grads(m);                                       // (and the exact sums of the invariant mode)
    m->step_key = t->global_step;                              // (a sharded head's class sampling)
    m->batch_offset = (int64_t)t->comm->rank * t->cfg->batch;  // (the invariant mode's contiguous slices)
    if (t->prefetched < first) t->prefetched = first;          // resumed mid-epoch
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
    trainer_met();
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
            trainer_save_checkpoint(t);
        }
        if (stop) return 1;
    }
    const double t0 = spk_seconds();
    settle(t);
    t->ep_seconds += spk_seconds() - t0;
    progress_end_epoch(&t->progress);
    trainer_end_epoch(t);
    trainer_save_checkpoint(t);
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

// ---- the end -------------------------------------------------------------------------------

// The replicas' last check and how the run ended: finished (ckpt_dir/FINISHED), stopped at
// --max-steps, or stopped on a signal (exit 75: requeue me). Returns the exit code.
static int finish(trainer_t *t, int stopped) {
    const train_config_t *c = t->cfg;
    model_t *m = t->model;
    settle(t);
    model_download(m);
    const double div = trainer_replica_divergence(t);
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

int trainer_run(const comm_t *comm, const train_config_t *cfg, const char *config_text, const char *config_yaml) {
    trainer_t *t = trainer_setup(comm, cfg, config_text, config_yaml);
    step_watchdog_start(comm->wait.timeout_s);
    step_watchdog_at_step(t->global_step);
    const int stopped = run_epochs(t);
    step_watchdog_stop();
    const int rc = finish(t, stopped);
    trainer_free(t);
    return rc;
}
