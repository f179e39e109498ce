// A training run's set-up and teardown (app/train/trainer_setup.h).
#include "app/train/trainer_setup.h"

#include "app/dist/device_select.h"
#include "app/train/init_from.h"
#include "app/train/trainer_ckpt.h"
#include "io/common/h5util.h"
#include "io/common/metrics.h"
#include "kernels/aam_shard.h"
#include "kernels/base/check.h"
#include "kernels/base/spk_assert.h"
#include "kernels/exact_sum_math.h"

#include <stdlib.h>
#include <string.h>

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
            char from[TRAIN_STR_MAX + 16];
            snprintf(from, sizeof from, "--val-data %s", c->val_data);
            trials_read(c->val_trials, ids, t->val.num_utts, from, &t->trials);
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
    const train_config_t *c = t->cfg;
    const step_controls_config_t sc = {.clip_grad_norm = c->clip_grad_norm,
                                       .skip_nonfinite = c->skip_nonfinite,
                                       .log_every = c->log_every,
                                       .step_log = c->step_log,
                                       .data = c->data};
    step_controls_init(&t->controls, &sc, t->be);
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
    // Its slowest form, with BatchNorm: say what the faster one is (docs/invariant.md, "Cost").
    if (c->model.invariant_group == 1 && strcmp(c->model.invariant_bn, "global") == 0 && t->model->min_batch > 1 &&
        c->batch > 1 && strcmp(c->model.loss, "dino") != 0)
        printf0(
            "note: --invariant in its slowest form here (groups of one sample, BatchNorm over the global batch: "
            "ECAPA 1.3-1.6x the default's step); --invariant-group %lld --invariant-bn group, PyTorch DDP's "
            "BatchNorm, costs 1.0-1.1x and resumes bit for bit on fewer ranks, not more\n",
            (long long)c->batch);
}

// Micro-batches per epoch in the invariant mode: whole updates, so the steps and their samples
// are the same on any number of ranks. The epoch order is padded to a multiple of the update's
// global batch (padding to a multiple of the ranks, PyTorch's, would change with their number),
// or cut to one with --drop-last; each rank takes a contiguous slice of each micro-batch's global
// batch (sampler_batch_slice).
static int64_t invariant_steps(trainer_t *t) {
    const train_config_t *c = t->cfg;
    invariant_checks(t);
    const int64_t n = t->data.num_utts, moved = sampler_pad_to(&t->sampler, c->global_batch);
    // With --grad-accum, each update's micro-batches add to the same exact sums, rounded once when
    // the last one is reduced: whole updates only, so every update is the same samples on any K.
    if (moved && c->drop_last)
        printf0(
            "note: --invariant --drop-last trains on whole global batches: %lld of the %lld samples of each epoch "
            "are not used%s\n",
            (long long)moved, (long long)n, c->no_shuffle ? " (always the same ones with --no-shuffle)" : "");
    else if (moved)
        printf0(
            "note: --invariant fills each epoch's last global batch of %lld with the first %lld samples of the "
            "epoch's order again, on any number of ranks (--drop-last leaves the last %lld out instead)\n",
            (long long)c->global_batch, (long long)moved, (long long)(c->global_batch - moved));
    return t->sampler.total / c->global_batch * c->grad_accum;
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

// SpecAugment's masks together as wide as a crop (or as the features) can blank a whole sample:
// ECAPA's training then stopped on a NaN loss that blamed the dataset. Refused before any step.
static void check_spec_masks(const train_config_t *c, const model_t *m) {
    const augment_config_t *a = &c->aug;
    if (a->time_masks > 0 && m->input.crop > 0 && a->time_masks * a->time_width >= m->input.crop)
        spk_fail_all(SPK_EXIT_USAGE,
                     "train: --spec-time-masks %lld x --spec-time-width %lld could mask all %lld frames of a crop: "
                     "keep their product below the crop",
                     (long long)a->time_masks, (long long)a->time_width, (long long)m->input.crop);
    if (a->freq_masks > 0 && a->freq_masks * a->freq_width >= m->feature_dim)
        spk_fail_all(SPK_EXIT_USAGE,
                     "train: --spec-freq-masks %lld x --spec-freq-width %lld could mask all %lld feature dimensions "
                     "of %s: keep their product below that",
                     (long long)a->freq_masks, (long long)a->freq_width, (long long)m->feature_dim, c->data);
}

// The sampler and loaders, the steps of an epoch and the learning-rate schedule over them.
static void plan_epochs(trainer_t *t) {
    const train_config_t *c = t->cfg;
    const model_t *m = t->model;
    check_spec_masks(c, m);
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
    const int resumed = trainer_resume(t, m);
    ckpt_policy_start(&t->ckpt, t->comm, c->ckpt_dir, c->keep, c->set_aside_newer, resumed ? m : NULL);
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

trainer_t *trainer_setup(const comm_t *comm, const train_config_t *cfg, const char *config_text,
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

void trainer_free(trainer_t *t) {
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
