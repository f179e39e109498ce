#include "app/train/resume.h"

#include "app/model/registry.h"
#include "app/train/resume_allow.h"
#include "kernels/base/check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(RESUME_NAME_MAX == TRAIN_STR_MAX, "--resume-allow is a string field of the training config");

// Whether `key` decides this run's trajectory: the number of epochs only sets the length of
// a cosine schedule; the crop length only exists for the models that crop (a registry row's
// frames, app/model/registry.h).
static int matters(const char *key, const train_config_t *c) {
    if (strcmp(key, "epochs") == 0) return strcmp(c->lr_schedule, "cosine") == 0;
    if (strcmp(key, "frames") == 0) {
        const model_family_t *f = model_family_find(c->model.name);
        return !f || f->frames > 0;
    }
    if (strcmp(key, "invariant-group") == 0 || strcmp(key, "invariant-bn") == 0) return c->model.invariant;
    return 1;
}

// Whether the comma-separated list names `name`.
static int listed(const char *list, const char *name) {
    const size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *comma = strchr(p, ',');
        const size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0) return 1;
        if (!comma) break;
        p = comma + 1;
    }
    return 0;
}

int resume_keeps_optimizer(const ckpt_meta_t *m, int ckpt_slots, const train_config_t *c, int run_slots) {
    return strcmp(m->optimizer, c->optimizer) == 0 && ckpt_slots == run_slots;
}

// Appends to a growing sentence (truncated at cap).
static void add(char *s, size_t cap, const char *fmt, const char *a, const char *b) {
    const size_t n = strlen(s);
    if (n + 1 < cap) snprintf(s + n, cap - n, fmt, a, b);
}

// A flag's value as a person typed it: numbers are stored with 17 digits so they read back
// exactly (0.05 as 0.050000000000000003); 15 show the same number.
static const char *shown(const char *v, char *buf, size_t cap) {
    char *end;
    const double d = strtod(v, &end);
    if (!v[0]) return "''";
    if (*end || end == v) return v;
    snprintf(buf, cap, "%.15g", d);
    return buf;
}

// The trajectory flags whose stored value differs from this run's, as "--k v" lists of the
// checkpoint's and this run's values, and the names not allowed. Flags a checkpoint does not
// record (written before they existed) are not compared.
static void changed_flags(const ckpt_meta_t *m, const train_config_t *c, const char *config_text, char *was, char *now,
                          char *names, char *allowed, size_t cap) {
    char a[TRAIN_STR_MAX], b[TRAIN_STR_MAX], sa[64], sb[64];
    for (size_t i = 0; i < resume_trajectory_count; i++) {
        const char *k = resume_trajectory[i];
        if (!matters(k, c) || ckpt_config_value(m->config, k, a, sizeof a) != 0 ||
            ckpt_config_value(config_text, k, b, sizeof b) != 0 || strcmp(a, b) == 0)
            continue;
        char *list = listed(c->resume_allow, k) ? allowed : names;
        add(list, cap, list[0] ? ",%s%s" : "%s%s", k, "");
        if (list == names) {
            add(was, cap, " --%s %s", k, shown(a, sa, sizeof sa));
            add(now, cap, " --%s %s", k, shown(b, sb, sizeof sb));
        }
    }
}

int resume_check(const ckpt_meta_t *m, const char *path, const train_config_t *c, const char *config_text,
                 uint64_t fingerprint, char *err, size_t cap, char *note, size_t note_cap) {
    note[0] = 0;
#define REFUSE(...)                      \
    do {                                 \
        snprintf(err, cap, __VA_ARGS__); \
        return SPK_EXIT_CKPT;            \
    } while (0)
    if (m->seed != c->seed)
        REFUSE("%s: written with --seed %lld, this run has --seed %lld; the sample order would not continue", path,
               (long long)m->seed, (long long)c->seed);
    if (m->data_fingerprint && m->data_fingerprint != fingerprint) {
        if (!listed(c->resume_allow, "data"))
            REFUSE(
                "%s: trained on other data: the utterances, lengths or labels of %s differ from those the checkpoint "
                "was trained on; resume on the same data, or allow it with --resume-allow data",
                path, c->data);
        add(note, note_cap, "%s%s", note[0] ? ", " : "", "data");
    }
    int64_t batch = m->global_batch;
    char v[64];
    if (!batch && ckpt_config_value(m->config, "global-batch", v, sizeof v) == 0) batch = atoll(v);  // format 1
    if (batch && batch != c->global_batch) {
        if (!listed(c->resume_allow, "global-batch"))
            REFUSE(
                "%s: trained with a global batch of %lld, this run has %lld (%lld per rank): the steps would change "
                "size and global_step would count steps of both; resume with --global-batch %lld (any world size "
                "that divides it), or allow it with --resume-allow global-batch",
                path, (long long)batch, (long long)c->global_batch, (long long)c->batch, (long long)batch);
        add(note, note_cap, "%s%s", note[0] ? ", " : "", "global-batch");
    }
    if (strcmp(m->optimizer, c->optimizer) != 0) {
        if (strcmp(m->optimizer, "none") == 0 && !listed(c->resume_allow, "optimizer"))
            REFUSE(
                "%s: holds no optimizer state (--optimizer none: an average or an export); start from its weights "
                "with --init-from, or resume with a fresh optimizer with --resume-allow optimizer",
                path);
        if (!listed(c->resume_allow, "optimizer"))
            REFUSE(
                "%s: trained with --optimizer %s, this run has --optimizer %s: the checkpoint's optimizer state "
                "would be dropped; resume with --optimizer %s, or start a fresh one with --resume-allow optimizer",
                path, m->optimizer, c->optimizer, m->optimizer);
        add(note, note_cap, "%s%s", note[0] ? ", " : "", "optimizer");
    }
    char was[1024] = "", now[1024] = "", names[1024] = "", allowed[1024] = "";
    changed_flags(m, c, config_text, was, now, names, allowed, sizeof names);
    if (names[0])
        REFUSE(
            "%s: written with%s, this run has%s: it would not continue the checkpoint's trajectory; give the "
            "checkpoint's values, or allow the change with --resume-allow %s",
            path, was, now, names);
    if (allowed[0]) add(note, note_cap, "%s%s", note[0] ? ", " : "", allowed);
    return 0;
#undef REFUSE
}
