// Checkpoints of a training run (app/train/trainer_ckpt.h).
#include "app/train/trainer_ckpt.h"

#include "app/train/resume.h"
#include "io/ckpt/ckpt_dir.h"
#include "io/common/config_yaml.h"
#include "kernels/base/check.h"

#include <stdlib.h>
#include <string.h>

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
// An --invariant run begun on a build whose epochs left the data's last N mod G samples out (before
// they were padded to whole global batches) says so in its position: its updates are floor(N / G)
// an epoch. Its epochs from here are padded; --drop-last keeps them as they were.
static void note_cut_epochs(const trainer_t *t, const ckpt_meta_t *m, const char *path) {
    const train_config_t *c = t->cfg;
    const int64_t G = c->global_batch, N = t->data.num_utts;
    if (!t->model->invariant || c->drop_last || strcmp(c->sampler, "balanced") == 0 || N % G == 0 || m->epoch < 1)
        return;
    if (m->global_step == m->epoch * (N / G) + m->samples_in_epoch / G)
        printf0(
            "note: %s was written by an earlier build whose --invariant epochs left the last %lld of %lld "
            "samples out; from here each epoch fills its last global batch from its start (--drop-last keeps "
            "the earlier epochs)\n",
            path, (long long)(N % G), (long long)N);
}

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

void trainer_save_checkpoint(trainer_t *t) {
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
    trainer_met();
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

int trainer_resume(trainer_t *t, ckpt_meta_t *m) {
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
    note_cut_epochs(t, m, r->path);
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
