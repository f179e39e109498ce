// The flags of `spkddp train`: one row per field of train_config_t (app/train/train_config.h),
// with its range and help text. The same table serialises the config into checkpoints.
#include "app/cli/train_options.h"

#include <float.h>
#include <stddef.h>

_Static_assert(TRAIN_STR_MAX == OPT_STR_MAX, "train_config_t strings must match the option table's");

#define F(field) offsetof(train_config_t, field)
#define BIG 9.0e15

static const opt_t opts[] = {
    {"data", OPT_STR, F(data), 0, 0, NULL, "training dataset (HDF5, docs/dataset-format.md)"},
    {"val-data", OPT_STR, F(val_data), 0, 0, NULL, "held-out dataset with the same speakers: per-epoch loss/accuracy"},
    {"val-trials", OPT_STR, F(val_trials), 0, 0, NULL, "trials over --val-data utterances: per-epoch EER and minDCF (speakers may be unseen)"},
    {"frames", OPT_INT, F(frames), 0, 100000, NULL, "training crop length in frames (ecapa: default 200; linear: whole utterances)"},
    {"drop-last", OPT_FLAG, F(drop_last), 0, 0, NULL, "drop the tail instead of padding to a multiple of the ranks"},
    {"no-shuffle", OPT_FLAG, F(no_shuffle), 0, 0, NULL, "keep dataset order (no per-epoch shuffle)"},
    {"device", OPT_STR, F(device), 0, 0, "cpu|cuda|auto|cpu-staged", "where to train (auto: a GPU when every rank has one, else the CPU; cpu-staged: the GPU code path on the CPU, for tests; default $SPKDDP_DEVICE or auto)"},
    {"tf32", OPT_FLAG, F(tf32), 0, 0, NULL, "CUDA: allow TF32 tensor-core math in convolutions and GEMMs (faster on Ampere and newer; inputs rounded to a 10-bit mantissa; default plain fp32)"},
    {"model", OPT_STR, F(model), 0, 0, "linear|ecapa|ecapa-av", "model (ecapa-av needs a dataset with a /visual stream)"},
    {"channels", OPT_INT, F(channels), 8, 4096, NULL, "ECAPA channels C"},
    {"emb-dim", OPT_INT, F(emb_dim), 2, 4096, NULL, "embedding size"},
    {"attention-channels", OPT_INT, F(att_channels), 1, 4096, NULL, "ECAPA attentive-pooling channels"},
    {"se-channels", OPT_INT, F(se_channels), 1, 4096, NULL, "ECAPA squeeze-excitation channels"},
    {"visual-channels", OPT_INT, F(visual_channels), 1, 4096, NULL, "ecapa-av visual TDNN channels"},
    {"margin", OPT_REAL, F(margin), 0, 1.0, NULL, "AAM-softmax additive angular margin m"},
    {"scale", OPT_REAL, F(scale), 1, 1000, NULL, "AAM-softmax scale s"},
    {"margin-warmup-start", OPT_INT, F(margin_warmup_start), 0, 1e6, NULL, "epoch where the margin ramp starts"},
    {"margin-warmup-end", OPT_INT, F(margin_warmup_end), 0, 1e6, NULL, "epoch where the margin reaches --margin"},
    {"epochs", OPT_INT, F(epochs), 1, 1e9, NULL, "epochs to train"},
    {"batch", OPT_INT, F(batch), 0, 1e7, NULL, "per-rank batch size"},
    {"global-batch", OPT_INT, F(global_batch), 0, 1e9, NULL, "global batch (per-rank = global / ranks); overrides --batch"},
    {"optimizer", OPT_STR, F(optimizer), 0, 0, "sgd|adam|adamw", "optimizer"},
    {"lr", OPT_REAL, F(lr), DBL_MIN, 1e3, NULL, "learning rate"},
    {"momentum", OPT_REAL, F(momentum), 0, 0.999999, NULL, "SGD momentum (Adam: beta1 is 0.9)"},
    {"nesterov", OPT_FLAG, F(nesterov), 0, 0, NULL, "Nesterov momentum for SGD"},
    {"weight-decay", OPT_REAL, F(weight_decay), 0, 10, NULL, "weight decay"},
    {"lr-schedule", OPT_STR, F(lr_schedule), 0, 0, "constant|warmup-exp|cosine|cyclic", "learning-rate schedule"},
    {"warmup-steps", OPT_INT, F(warmup_steps), 0, BIG, NULL, "linear warmup steps"},
    {"lr-decay", OPT_REAL, F(lr_decay), DBL_MIN, 1, NULL, "warmup-exp: lr factor per epoch"},
    {"lr-min", OPT_REAL, F(lr_min), 0, 1e3, NULL, "cosine/cyclic: lowest lr"},
    {"cycle-steps", OPT_INT, F(cycle_steps), 1, BIG, NULL, "cyclic: steps from lr-min to lr"},
    {"seed", OPT_INT, F(seed), 0, BIG, NULL, "seed for init, shuffling and crops"},
    {"ckpt-dir", OPT_STR, F(ckpt_dir), 0, 0, NULL, "checkpoint directory (empty: no checkpoints)"},
    {"ckpt-every", OPT_INT, F(ckpt_every), 0, BIG, NULL, "checkpoint every N steps, besides each epoch end"},
    {"keep", OPT_INT, F(keep), 1, 1e6, NULL, "checkpoints to keep"},
    {"metrics", OPT_STR, F(metrics), 0, 0, NULL, "per-epoch metrics file (JSON lines)"},
    {"resume", OPT_STR, F(resume), 0, 0, NULL, "'auto' (newest complete checkpoint in --ckpt-dir, if any) or a checkpoint path"},
    {"max-steps", OPT_INT, F(max_steps), 0, BIG, NULL, "stop cleanly with a checkpoint after this global step"},
    {"progress", OPT_INT, F(progress), 0, BIG, NULL, "seconds between progress lines (0: epoch lines only; a live bar on terminals)"},
};

const opt_table_t train_options = {
    .command = "train",
    .summary = "Train a speaker model with synchronous data parallelism (run under mpiexec/srun).",
    .opts = opts,
    .count = (int)(sizeof opts / sizeof opts[0]),
};

