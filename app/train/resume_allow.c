// The names of what a resume compares (app/train/resume_allow.h).
#include "app/train/resume_allow.h"

#include <stdio.h>
#include <string.h>

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

// The flags (as stored in the checkpoint's config) that change what the next step computes.
// The model's shape is not among them: a checkpoint of another shape does not load at all.
const char *const resume_trajectory[] = {
    "frames",
    "drop-last",
    "no-shuffle",
    "margin",
    "scale",
    "margin-warmup-start",
    "margin-warmup-end",
    "epochs",
    "lr",
    "momentum",
    "nesterov",
    "weight-decay",
    "lr-schedule",
    "warmup-steps",
    "lr-decay",
    "lr-min",
    "cycle-steps",
    "noise-bank",
    "rir-bank",
    "aug-prob",
    "reverb-prob",
    "noise-prob",
    "noise-snr",
    "babble",
    "speed-perturb",
    "spec-time-masks",
    "spec-time-width",
    "spec-freq-masks",
    "spec-freq-width",
    "invariant",
    "invariant-group",
    "invariant-bn",
    "grad-accum",
    "clip-grad-norm",
    "precision",
    "conv-algorithm",
    "head-sample",
    "loss",
    "contrastive-weight",
    "contrastive-scale",
    "negatives",
    "sampler",
    "utts-per-speaker",
    "views",
    "labels",
    "global-views",
    "local-frames",
    "student-temp",
    "teacher-temp",
    "teacher-temp-start",
    "teacher-temp-epochs",
    "centre-momentum",
    "ema",
    "freeze-last-layer",
};
const size_t resume_trajectory_count = COUNT(resume_trajectory);
// Checked from the checkpoint's header rather than its config text.
const char *const resume_header[] = {"global-batch", "optimizer", "data"};
const size_t resume_header_count = COUNT(resume_header);

static int known(const char *name) {
    for (size_t i = 0; i < resume_trajectory_count; i++)
        if (strcmp(name, resume_trajectory[i]) == 0) return 1;
    for (size_t i = 0; i < resume_header_count; i++)
        if (strcmp(name, resume_header[i]) == 0) return 1;
    return 0;
}

int resume_allow_check(const char *list, char *err, size_t cap) {
    char name[RESUME_NAME_MAX];
    for (const char *p = list; *p;) {
        const char *comma = strchr(p, ',');
        const size_t len = comma ? (size_t)(comma - p) : strlen(p);
        snprintf(name, sizeof name, "%.*s", (int)len, p);
        if (!known(name)) {
            int w =
                snprintf(err, cap, "train: --resume-allow: '%s' is not something a resume checks; the names are", name);
            for (size_t i = 0; i < resume_header_count && w > 0 && (size_t)w < cap; i++)
                w += snprintf(err + w, cap - w, " %s", resume_header[i]);
            for (size_t i = 0; i < resume_trajectory_count && w > 0 && (size_t)w < cap; i++)
                w += snprintf(err + w, cap - w, " %s", resume_trajectory[i]);
            return -1;
        }
        if (!comma) break;
        p = comma + 1;
    }
    return 0;
}
