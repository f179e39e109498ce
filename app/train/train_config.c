#include "app/train/train_config.h"

#include "app/dist/device_select.h"
#include "app/model/registry.h"
#include "app/train/resume_allow.h"
#include "io/common/out_paths.h"
#include "kernels/base/check.h"

#include <string.h>
#include <sys/stat.h>

train_config_t train_config_defaults(void) {
    train_config_t c;
    memset(&c, 0, sizeof c);
    // The seed job: linear classifier, batch 16 per rank, SGD lr 0.05, 3 epochs.
    c.model = model_config_defaults("linear");
    c.seed = (int64_t)c.model.seed;
    snprintf(c.device, sizeof c.device, "%s", device_default());
    c.epochs = 3;
    c.batch = 16;
    strcpy(c.optimizer, "sgd");
    c.lr = 0.05;
    strcpy(c.lr_schedule, "constant");
    c.lr_decay = 1.0;
    c.cycle_steps = 1000;
    c.keep = 3;
    c.progress = 30;
    c.aug = augment_config_defaults();
    c.grad_accum = 1;
    strcpy(c.init_head, "keep");
    strcpy(c.head, "replicated");
    strcpy(c.negatives, "global");
    strcpy(c.sampler, "plain");
    strcpy(c.labels, "speaker");
    c.views = 1;
    return c;
}

// --loss dino's views, and what it does not combine with yet.
static void check_dino(const train_config_t *c, const model_config_t *m) {
    if (strcmp(m->loss, "dino") != 0) return;
    if (c->views < 2 || m->global_views > c->views)
        spk_fail_all(SPK_EXIT_USAGE,
                     "train: --loss dino distils the teacher's view of each global crop into the student's view of "
                     "the other crops: it needs --views 2 or more and --global-views at most --views (have --views "
                     "%lld, --global-views %lld)",
                     (long long)c->views, (long long)m->global_views);
    if (strstr(m->name, "-av"))  // (the linear model was refused with every loss but aam)
        spk_fail_all(SPK_EXIT_USAGE,
                     "train: --loss dino trains an audio encoder (ecapa, resnet*, campplus); --model %s is not one",
                     m->name);
    if (c->local_frames > 0 && c->local_frames > m->frames && m->frames > 0)
        spk_fail_all(SPK_EXIT_USAGE, "train: --local-frames %lld is longer than the global crops' --frames %lld",
                     (long long)c->local_frames, (long long)m->frames);
    if (c->grad_accum > 1)
        spk_fail_all(SPK_EXIT_USAGE,
                     "train: --loss dino updates the teacher's centre with every batch: --grad-accum is not supported");
    if (c->val_data[0])
        spk_fail_all(SPK_EXIT_USAGE,
                     "train: --loss dino has no held-out loss to report: drop --val-data and score the teacher's "
                     "embeddings (spkddp embed, spkddp score)");
}

// --loss, --negatives, --sampler and --utts-per-speaker together.
static void check_metric_learning(const train_config_t *c, const model_config_t *m, int world) {
    const int contrastive = strcmp(m->loss, "aam") != 0, balanced = strcmp(c->sampler, "balanced") == 0;
    const int grouped = strstr(m->loss, "angleproto") || strstr(m->loss, "ge2e");
    if (contrastive && strcmp(m->name, "linear") == 0)
        spk_fail_all(SPK_EXIT_USAGE,
                     "train: --loss %s trains an encoder's embeddings; the linear model has none (use --model ecapa, "
                     "resnet34, campplus, ...)",
                     m->loss);
    if (grouped && !balanced)
        spk_fail_all(SPK_EXIT_USAGE,
                     "train: --loss %s compares groups of utterances of one speaker: it needs --sampler balanced",
                     m->loss);
    if (contrastive && !strstr(m->loss, "aam") && strcmp(c->head, "sharded") == 0)
        spk_fail_all(SPK_EXIT_USAGE,
                     "train: --head sharded splits the AAM-softmax classifier, which --loss %s does not use", m->loss);
    // Each rank's negatives are the samples the partition gave it, which the world size changes.
    if (contrastive && strcmp(c->negatives, "local") == 0 && m->invariant)
        spk_fail_all(SPK_EXIT_USAGE,
                     "train: --negatives local depends on how the global batch is split across ranks, which "
                     "--invariant promises does not matter: use --negatives global");
    // SimCLR: each utterance is its own class, its other views its positives.
    if (strcmp(c->labels, "utterance") == 0 && (strcmp(m->loss, "supcon") != 0 || c->views < 2))
        spk_fail_all(SPK_EXIT_USAGE,
                     "train: --labels utterance contrasts each utterance's views with everything else: it needs "
                     "--loss supcon and --views 2 or more (have --loss %s, --views %lld)",
                     m->loss, (long long)c->views);
    if (grouped && c->views > 1)
        spk_fail_all(SPK_EXIT_USAGE,
                     "train: --loss %s reads each run of --utts-per-speaker rows as one group of a speaker: "
                     "--views must be 1",
                     m->loss);
    // A softmax over one group's prototype or centroid is 0 whatever the embeddings.
    const int64_t contrastive_batch = c->batch * (strcmp(c->negatives, "local") == 0 ? 1 : world);
    if (grouped && balanced && contrastive_batch / m->per_speaker < 2)
        spk_fail_all(SPK_EXIT_USAGE,
                     "train: --loss %s compares each group with the others, and the contrastive batch (%lld samples) "
                     "holds only one group of %lld: use a larger batch or fewer --utts-per-speaker",
                     m->loss, (long long)contrastive_batch, (long long)m->per_speaker);
    if (!balanced) return;
    if (m->per_speaker < 2)
        spk_fail_all(SPK_EXIT_USAGE, "train: --sampler balanced needs --utts-per-speaker of at least 2");
    if (c->batch % m->per_speaker != 0)
        spk_fail_all(SPK_EXIT_USAGE,
                     "train: --sampler balanced keeps each speaker's %lld utterances on one rank: the per-rank "
                     "batch %lld must be a multiple of --utts-per-speaker",
                     (long long)m->per_speaker, (long long)c->batch);
    if (c->no_shuffle)
        spk_fail_all(SPK_EXIT_USAGE, "train: --sampler balanced draws its groups from the seed: drop --no-shuffle");
    // A speed-perturbed copy is another class, so a group would no longer be one speaker.
    if (augment_classes_per_speaker(&c->aug) > 1)
        spk_fail_all(SPK_EXIT_USAGE,
                     "train: --sampler balanced groups utterances of one speaker, and --speed-perturb makes "
                     "other speakers of some of them: use one or the other");
}

void train_config_finalize(train_config_t *c, int world) {
    struct stat st;
    if (c->metrics[0] && stat(c->metrics, &st) == 0 && !S_ISREG(st.st_mode))
        spk_fail_all(SPK_EXIT_USAGE, "train: --metrics %s: not a regular file (metrics are appended to a file)",
                     c->metrics);
    const path_arg_t logs[] = {{"--metrics", c->metrics}, {"--step-log", c->step_log}};
    const int resume_file = c->resume[0] && strcmp(c->resume, "auto") != 0;
    const path_arg_t ins[] = {{"--data", c->data},
                              {"--val-data", c->val_data},
                              {"--val-trials", c->val_trials},
                              {"--init-from", c->init_from},
                              {"--resume", resume_file ? c->resume : NULL},
                              {"--noise-bank", c->aug.noise_bank},
                              {"--rir-bank", c->aug.rir_bank}};
    out_paths_check_files("train", logs, 2, ins, 7);
    for (int i = 0; i < 2; i++)  // (a log may go into the --ckpt-dir, which the run creates)
        if (!out_paths_in_folder(logs[i].path, c->ckpt_dir)) out_paths_check("train", &logs[i], 1, NULL, 0);
    const int64_t per_update = world * c->grad_accum;  // forward/backward passes per update
    if (c->global_batch > 0) {
        if (c->global_batch % per_update != 0)
            spk_fail_all(SPK_EXIT_USAGE, "train: --global-batch %lld is not divisible by the %d ranks%s",
                         (long long)c->global_batch, world, c->grad_accum > 1 ? " x --grad-accum" : "");
        c->batch = c->global_batch / per_update;
    }
    c->global_batch = c->batch * per_update;
    if (c->nesterov && (strcmp(c->optimizer, "sgd") != 0 || c->momentum <= 0))
        spk_fail_all(SPK_EXIT_USAGE, "train: --nesterov needs --optimizer sgd and --momentum > 0");
    if (c->model.margin_warmup_end < c->model.margin_warmup_start)
        spk_fail_all(SPK_EXIT_USAGE, "train: --margin-warmup-end must not be before --margin-warmup-start");
    if (c->val_trials[0] && !c->val_data[0]) spk_fail_all(SPK_EXIT_USAGE, "train: --val-trials needs --val-data");
    if (c->lr_min > c->lr) spk_fail_all(SPK_EXIT_USAGE, "train: --lr-min must not exceed --lr");
    if (c->resume[0] && strcmp(c->resume, "auto") == 0 && !c->ckpt_dir[0])
        spk_fail_all(SPK_EXIT_USAGE, "train: --resume auto needs --ckpt-dir");
    char why[2048];
    if (resume_allow_check(c->resume_allow, why, sizeof why) != 0) spk_fail_all(SPK_EXIT_USAGE, "%s", why);
    if ((c->resume_allow[0] || c->set_aside_newer) && !c->resume[0])
        spk_fail_all(SPK_EXIT_USAGE, "train: --%s applies to a resume: it needs --resume",
                     c->resume_allow[0] ? "resume-allow" : "set-aside-newer");
    c->model = model_config_resolve(&c->model);  // the width and embedding size the model will have
    model_config_t m = c->model;
    if (model_config_apply_tf32(&m, c->tf32) != 0)
        spk_fail_all(SPK_EXIT_USAGE, "train: --tf32 means --precision tf32, which contradicts --precision bf16");
    if (strcmp(c->head, "sharded") == 0 && strcmp(m.name, "linear") == 0)
        spk_fail_all(SPK_EXIT_USAGE,
                     "train: --head sharded splits an AAM-softmax classifier; the linear model has none (use "
                     "--model ecapa, resnet34, campplus, ...)");
    if (m.head_sample > 0 && m.head_sample < 1 && strcmp(c->head, "sharded") != 0)
        spk_fail_all(SPK_EXIT_USAGE,
                     "train: --head-sample samples the classes of a sharded classifier: it needs --head sharded");
    check_metric_learning(c, &m, world);
    check_dino(c, &m);
    if (c->max_steps > 0 && !c->ckpt_dir[0])
        spk_fail_all(SPK_EXIT_USAGE, "train: --max-steps stops with a checkpoint, so it needs --ckpt-dir");
    augment_spec_t spec;
    char err[512];
    if (augment_parse(&c->aug, &spec, err, sizeof err) != 0) spk_fail_all(SPK_EXIT_USAGE, "train: %s", err);
}

model_config_t train_config_model(const train_config_t *c) {
    model_config_t m = c->model;
    m.seed = (uint64_t)c->seed;
    m.local_negatives = strcmp(c->negatives, "local") == 0;
    m.instance_labels = strcmp(c->labels, "utterance") == 0;
    m.views = c->views;
    model_config_apply_tf32(&m, c->tf32);  // a conflict stopped train_config_finalize
    return m;
}

optimizer_config_t train_config_optimizer(const train_config_t *c) {
    return (optimizer_config_t){.kind = optimizer_kind_parse(c->optimizer),
                                .momentum = c->momentum,
                                .weight_decay = c->weight_decay,
                                .nesterov = c->nesterov};
}

lr_schedule_t train_config_lr_schedule(const train_config_t *c, int64_t steps_per_epoch) {
    return (lr_schedule_t){.kind = lr_kind_parse(c->lr_schedule),
                           .lr = c->lr,
                           .lr_min = c->lr_min,
                           .decay = c->lr_decay,
                           .warmup_steps = c->warmup_steps,
                           .cycle_steps = c->cycle_steps,
                           .steps_per_epoch = steps_per_epoch,
                           .total_steps = steps_per_epoch * c->epochs};
}
