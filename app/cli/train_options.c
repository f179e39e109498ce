// The flags of `spkddp train`: one row per field of train_config_t (app/train/train_config.h),
// with its range and help text. The same table serialises the config into checkpoints, so the
// order and names of its rows are part of the checkpoint format: append new rows at the end.
#include "app/cli/train_options.h"

#include "app/cli/common_options.h"

#include <float.h>

#define BIG 9.0e15

static const opt_t rows[] = {
    OPT_TEXT(train_config_t, data, "data", OPT_REQUIRED,
             "training dataset (HDF5, docs/dataset-format.md; spkddp synth --out toy.h5 makes a toy one)"),
    OPT_TEXT(train_config_t, val_data, "val-data", OPT_OPTIONAL,
             "held-out dataset with the same speakers: per-epoch loss/accuracy"),
    OPT_TEXT(train_config_t, val_trials, "val-trials", OPT_OPTIONAL,
             "trials over --val-data utterances: per-epoch EER and minDCF (speakers may be unseen)"),
    OPT_INTEGER(train_config_t, model.frames, "frames", 1, 100000,
                "training crop length in frames (ecapa: default 200; linear: whole utterances)"),
    OPT_SWITCH(train_config_t, drop_last, "drop-last",
               "drop the epoch's tail instead of padding it to a multiple of the ranks (--invariant: of the global "
               "batch)"),
    OPT_SWITCH(train_config_t, no_shuffle, "no-shuffle", "keep dataset order (no per-epoch shuffle)"),
    OPT_DEVICE(train_config_t, device),
    OPT_TF32(train_config_t, tf32),
    OPT_MODEL(train_config_t, model.name, "model (ecapa-av needs a dataset with a /visual stream)"),
    OPT_CHANNELS(train_config_t, model.channels),
    OPT_INTEGER(train_config_t, model.emb_dim, "emb-dim", 2, 4096, "embedding size (ecapa: 192, resnet: 256)"),
    OPT_INTEGER(train_config_t, model.att_channels, "attention-channels", 1, 4096, "ECAPA attentive-pooling channels"),
    OPT_INTEGER(train_config_t, model.se_channels, "se-channels", 1, 4096, "ECAPA squeeze-excitation channels"),
    OPT_INTEGER(train_config_t, model.visual_channels, "visual-channels", 1, 4096, "ecapa-av visual TDNN channels"),
    OPT_NUMBER(train_config_t, model.modality_dropout, "modality-dropout", 0, 1,
               "ecapa-av: the chance each training sample goes without one of its streams (audio or visual alike), "
               "so that either alone still embeds (embed --modality); 0 (default): never"),
    OPT_INTEGER(train_config_t, model.face_channels, "face-channels", 0, 1024,
                "ecapa-av on a /visual stream of pictures (prepare --video-scp): the width w of its ResNet18-class "
                "face encoder (w..8w channels; 32 is a start); 0 (default): the stream holds feature vectors"),
    OPT_NUMBER(train_config_t, model.margin, "margin", 0, 1.0, "AAM-softmax additive angular margin m"),
    OPT_NUMBER(train_config_t, model.scale, "scale", 1, 1000, "AAM-softmax scale s"),
    OPT_INTEGER(train_config_t, model.margin_warmup_start, "margin-warmup-start", 0, 1e6,
                "epoch where the margin ramp starts"),
    OPT_INTEGER(train_config_t, model.margin_warmup_end, "margin-warmup-end", 0, 1e6,
                "epoch where the margin reaches --margin"),
    OPT_INTEGER(train_config_t, epochs, "epochs", 1, 1e9, "epochs to train"),
    OPT_BATCH(train_config_t, batch),
    OPT_INTEGER(train_config_t, global_batch, "global-batch", 0, 1e9,
                "global batch (per-rank = global / (ranks x grad-accum)); overrides --batch"),
    OPT_CHOICE(train_config_t, optimizer, "optimizer", "sgd|adam|adamw", "optimizer"),
    OPT_NUMBER(train_config_t, lr, "lr", DBL_MIN, 1e3, "learning rate"),
    OPT_NUMBER(train_config_t, momentum, "momentum", 0, 0.999999, "SGD momentum (Adam: beta1 is 0.9)"),
    OPT_SWITCH(train_config_t, nesterov, "nesterov", "Nesterov momentum for SGD"),
    OPT_NUMBER(train_config_t, weight_decay, "weight-decay", 0, 10, "weight decay"),
    OPT_CHOICE(train_config_t, lr_schedule, "lr-schedule", "constant|warmup-exp|cosine|cyclic",
               "learning-rate schedule"),
    OPT_INTEGER(train_config_t, warmup_steps, "warmup-steps", 0, BIG, "linear warmup steps"),
    OPT_NUMBER(train_config_t, lr_decay, "lr-decay", DBL_MIN, 1, "warmup-exp: lr factor per epoch"),
    OPT_NUMBER(train_config_t, lr_min, "lr-min", 0, 1e3, "cosine/cyclic: lowest lr"),
    OPT_INTEGER(train_config_t, cycle_steps, "cycle-steps", 1, BIG, "cyclic: steps from lr-min to lr"),
    OPT_SEED(train_config_t, seed, "seed for init, shuffling and crops"),
    OPT_TEXT(train_config_t, ckpt_dir, "ckpt-dir", OPT_OPTIONAL, "checkpoint directory (empty: no checkpoints)"),
    OPT_INTEGER(train_config_t, ckpt_every, "ckpt-every", 0, BIG, "checkpoint every N steps, besides each epoch end"),
    OPT_INTEGER(train_config_t, keep, "keep", 1, 1e6, "checkpoints to keep"),
    OPT_TEXT(train_config_t, metrics, "metrics", OPT_OPTIONAL, "per-epoch metrics file (JSON lines)"),
    OPT_TEXT(train_config_t, resume, "resume", OPT_OPTIONAL,
             "'auto' (newest complete checkpoint in --ckpt-dir, if any) or a checkpoint path"),
    OPT_INTEGER(train_config_t, max_steps, "max-steps", 0, BIG,
                "stop cleanly with a checkpoint after this global step"),
    OPT_INTEGER(train_config_t, progress, "progress", 0, BIG,
                "seconds between progress lines (0: epoch lines only; a live bar on terminals)"),
    // augmentation (docs/augmentation.md)
    OPT_TEXT(train_config_t, aug.noise_bank, "noise-bank", OPT_OPTIONAL,
             "additive noise: a bank made by spkddp prepare --kind noise (audio datasets only)"),
    OPT_TEXT(train_config_t, aug.rir_bank, "rir-bank", OPT_OPTIONAL,
             "reverberation: impulse responses made by spkddp prepare --kind rir (audio datasets only)"),
    OPT_NUMBER(train_config_t, aug.prob, "aug-prob", 0, 1,
               "probability that a sample is augmented at all (reverberation, noise, SpecAugment)"),
    OPT_NUMBER(train_config_t, aug.reverb_prob, "reverb-prob", 0, 1,
               "probability that an augmented sample is reverberated"),
    OPT_NUMBER(train_config_t, aug.noise_prob, "noise-prob", 0, 1, "probability that an augmented sample gets noise"),
    OPT_TEXT(train_config_t, aug.noise_snr, "noise-snr", OPT_OPTIONAL,
             "noise categories of --noise-bank drawn uniformly, each with its SNR range in dB: CAT=LO:HI,..."),
    OPT_TEXT(train_config_t, aug.babble, "babble", OPT_OPTIONAL,
             "CAT=MIN:MAX: a noise of category CAT is the sum of MIN..MAX entries at unit power (\"\": none)"),
    OPT_TEXT(train_config_t, aug.speed, "speed-perturb", OPT_OPTIONAL,
             "speed factors drawn uniformly per sample (e.g. 1.0,0.9,1.1); factor k's copies are new speakers: "
             "the classifier has speakers x factors classes"),
    OPT_INTEGER(train_config_t, aug.time_masks, "spec-time-masks", 0, AUGMENT_MAX_MASKS,
                "SpecAugment: time masks per augmented sample"),
    OPT_INTEGER(train_config_t, aug.time_width, "spec-time-width", 1, 1000, "SpecAugment: widest time mask, frames"),
    OPT_INTEGER(train_config_t, aug.freq_masks, "spec-freq-masks", 0, AUGMENT_MAX_MASKS,
                "SpecAugment: frequency masks per augmented sample"),
    OPT_INTEGER(train_config_t, aug.freq_width, "spec-freq-width", 1, 1000,
                "SpecAugment: widest frequency mask, mel bins"),
    // step controls (app/train/step_controls.h)
    OPT_NUMBER(train_config_t, clip_grad_norm, "clip-grad-norm", 0, 1e9,
               "scale the averaged gradient down to this L2 norm when it is larger (0: no clipping)"),
    OPT_INTEGER(train_config_t, skip_nonfinite, "skip-nonfinite", 0, BIG,
                "skip (and log) at most this many updates whose loss or gradient is NaN/Inf, instead of stopping at "
                "the first"),
    OPT_INTEGER(train_config_t, grad_accum, "grad-accum", 1, 1e6,
                "micro-batches of --batch per update: the global batch is ranks x batch x grad-accum"),
    OPT_INTEGER(train_config_t, log_every, "log-every", 0, BIG,
                "a JSON line of step figures every N updates (0: none)"),
    OPT_TEXT(train_config_t, step_log, "step-log", OPT_OPTIONAL,
             "--log-every's lines go to this file (default: standard output)"),
    // fine-tuning (docs/interop.md)
    OPT_TEXT(train_config_t, init_from, "init-from", OPT_OPTIONAL,
             "start from the weights and BatchNorm statistics of a checkpoint or a safetensors file with SpeechBrain's "
             "names (spkddp export, tools/speechbrain_to_safetensors.py); the optimizer and schedule start fresh; "
             "ignored once --resume finds a checkpoint"),
    OPT_CHOICE(train_config_t, init_head, "init-head", "keep|drop",
               "--init-from: keep the file's classifier (the same speakers) or drop it (a new speaker set: a fresh "
               "AAM-softmax head)"),
    OPT_INVARIANT(train_config_t, model.invariant),
    OPT_INVARIANT_GROUP(train_config_t, model.invariant_group),
    OPT_INVARIANT_BN(train_config_t, model.invariant_bn),
    OPT_PRECISION(train_config_t, model.precision),
    OPT_CHOICE(train_config_t, head, "head", "replicated|sharded",
               "the AAM-softmax classifier whole on every rank, or its classes split across the ranks (for 100k+ "
               "speakers: each rank keeps a slice and its optimizer state, the head's gradient never crosses the "
               "network; checkpoints hold the whole head, docs/sharded-head.md)"),
    OPT_NUMBER(train_config_t, model.head_sample, "head-sample", 0, 1,
               "--head sharded: Partial FC, each step scores the batch's own classes and this fraction of the others "
               "(drawn from the seed and the step: the same on any number of ranks; default 1, all)"),
    // metric learning (docs/contrastive.md)
    OPT_CHOICE(train_config_t, model.loss, "loss", "aam|supcon|angleproto|ge2e|aam+supcon|aam+angleproto|aam+ge2e|dino",
               "the training loss: the AAM-softmax, a metric-learning loss over the global batch's embeddings "
               "(supervised contrastive, angular prototypical, GE2E), the AAM-softmax plus one of them, or DINO "
               "self-distillation without labels (docs/contrastive.md)"),
    OPT_NUMBER(train_config_t, model.contrastive_weight, "contrastive-weight", 0, 1e6,
               "aam+...: the metric-learning term's weight (default 1)"),
    OPT_NUMBER(train_config_t, model.contrastive_scale, "contrastive-scale", 1e-3, 1e6,
               "the metric-learning loss's cosine scale, an inverse temperature (default 10: temperature 0.1)"),
    OPT_CHOICE(train_config_t, negatives, "negatives", "global|local",
               "the contrastive batch: every rank's embeddings (gathered, the gradient sent back to the rank that "
               "computed each) or each rank's batch alone, as single-GPU toolkits"),
    OPT_CHOICE(train_config_t, sampler, "sampler", "plain|balanced",
               "plain: a shuffled epoch as PyTorch's DistributedSampler; balanced: each global batch holds "
               "batch x ranks / utts-per-speaker distinct speakers with utts-per-speaker utterances each"),
    OPT_INTEGER(train_config_t, model.per_speaker, "utts-per-speaker", 2, 1024,
                "--sampler balanced: utterances of one speaker together in a batch (default 2)"),
    OPT_SWITCH(train_config_t, picture_augment, "picture-augment",
               "a /visual stream of pictures: each training sample's frames cropped (80-100% of the side), flipped "
               "half the time, and their brightness and contrast changed, drawn per sample and epoch"),
    OPT_INTEGER(train_config_t, views, "views", 1, 64,
                "crops of each utterance in a batch, each with its own crop and augmentation (--batch counts "
                "utterances; the model sees batch x views samples)"),
    OPT_CHOICE(train_config_t, labels, "labels", "speaker|utterance",
               "what the contrastive loss treats as the same: the speaker labels, or each utterance alone (with "
               "--loss supcon and --views 2: SimCLR, no labels used in training)"),
    // DINO (docs/contrastive.md)
    OPT_INTEGER(train_config_t, model.global_views, "global-views", 1, 64,
                "--loss dino: the first views of each utterance are global crops (--frames), which the teacher sees "
                "too (default 2)"),
    OPT_INTEGER(train_config_t, local_frames, "local-frames", 1, 100000,
                "--loss dino: the other views are local crops of this many frames (default: --frames)"),
    OPT_INTEGER(train_config_t, model.dino_hidden, "dino-hidden", 1, 65536,
                "--loss dino: the projection head's hidden width (default 2048)"),
    OPT_INTEGER(train_config_t, model.dino_bottleneck, "dino-bottleneck", 1, 65536,
                "--loss dino: the projection head's bottleneck before the prototypes (default 256)"),
    OPT_INTEGER(train_config_t, model.dino_out, "dino-out", 2, 1 << 20,
                "--loss dino: prototypes, the softmax's width (default 65536)"),
    OPT_NUMBER(train_config_t, model.student_temp, "student-temp", 1e-4, 100,
               "--loss dino: the student's softmax temperature (default 0.1)"),
    OPT_NUMBER(train_config_t, model.teacher_temp, "teacher-temp", 1e-4, 100,
               "--loss dino: the teacher's softmax temperature after its warmup (default 0.04)"),
    OPT_NUMBER(train_config_t, model.teacher_temp_start, "teacher-temp-start", 1e-4, 100,
               "--loss dino: the teacher's temperature at epoch 0, linear to --teacher-temp (default 0.04)"),
    OPT_INTEGER(train_config_t, model.teacher_temp_epochs, "teacher-temp-epochs", 0, BIG,
                "--loss dino: epochs of the teacher temperature's warmup (default 0)"),
    OPT_NUMBER(train_config_t, model.centre_momentum, "centre-momentum", 0, 1,
               "--loss dino: momentum of the teacher outputs' centre, a mean over the global batch (default 0.9)"),
    OPT_NUMBER(train_config_t, model.ema_start, "ema", 0, 1,
               "--loss dino: the teacher's EMA momentum at the first update, cosine to 1 at the last (default 0.996)"),
    OPT_INTEGER(train_config_t, model.freeze_last_layer, "freeze-last-layer", 0, BIG,
                "--loss dino: epochs the prototypes stay as initialised (default 1)"),
    // resume policy (docs/checkpoints.md)
    OPT_TEXT(train_config_t, resume_allow, "resume-allow", OPT_OPTIONAL,
             "what a resume may change, comma-separated: global-batch, optimizer, data, or a flag of the trajectory "
             "(lr, epochs, ...); anything else that differs from the checkpoint is refused"),
    OPT_SWITCH(train_config_t, set_aside_newer, "set-aside-newer",
               "resuming an older checkpoint: move --ckpt-dir's newer checkpoints into abandoned-after-<step>/ "
               "instead of refusing"),
    // CAM++ (docs/models.md)
    OPT_INTEGER(train_config_t, model.growth_rate, "growth-rate", 1, 1024,
                "campplus: channels each CAM layer adds (default 32)"),
    OPT_INTEGER(train_config_t, model.bn_size, "bn-size", 1, 64,
                "campplus: a CAM layer's bottleneck, in growth-rate widths (default 4)"),
    OPT_CONV_ALGORITHM(train_config_t, model.conv_algorithm),
    OPT_SWITCH(train_config_t, model.zero_init_residual, "zero-init-residual",
               "2-D residual blocks (the ResNets, CAM++'s front end, face encoders) start as their shortcuts: each "
               "block's last BatchNorm weight 0 (torchvision's zero_init_residual); the ResNets then learn several "
               "times faster at the start"),
    OPT_SWITCH(train_config_t, model.recompute, "recompute",
               "campplus: make the dense layers' normalised inputs again in the backward instead of keeping them "
               "(3D-Speaker's memory_efficient): activation memory linear in the layers, not quadratic"),
};

const opt_table_t train_options =
    OPT_TABLE("train", "Train a speaker model with synchronous data parallelism (run under mpiexec/srun).", rows);
