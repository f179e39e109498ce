#include "app/train/init_from.h"

#include "app/train/sharded_head.h"
#include "kernels/base/check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(...)                        \
    do {                                 \
        snprintf(err, cap, __VA_ARGS__); \
        return SPK_EXIT_CKPT;            \
    } while (0)

static int is_head(const char *name) { return strncmp(name, "classifier.", 11) == 0; }

// DINO's: its projection head, and the teacher's copy and centre that only its training keeps.
// A file without them leaves the model's own (a DINO run from a supervised encoder); a file with
// them starts a model without them from the encoder alone (fine-tuning a DINO export).
static int dino_only(const char *name) { return strncmp(name, "dino_head.", 10) == 0 || model_training_only(name); }

static int ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), k = strlen(tail);
    return n >= k && strcmp(s + n - k, tail) == 0;
}

static void shape_str(const int64_t *shape, int ndim, char *out, size_t cap) {
    int at = snprintf(out, cap, "[");
    for (int d = 0; d < ndim && at < (int)cap; d++)
        at += snprintf(out + at, cap - (size_t)at, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (at < (int)cap) snprintf(out + at, cap - (size_t)at, "]");
}

// One tensor of the model from the file: present, float32, the same shape, finite.
// A DINO checkpoint's teacher stands for its model (what embed and export take): a tensor is read
// from its teacher's copy (MODEL_TEACHER) when the file has one.
static int copy_tensor(const param_tensor_t *t, float *dst, const weights_file_t *wf, const model_t *m,
                       const char *path, char *err, size_t cap) {
    char teacher[PARAM_NAME_MAX + 16];
    snprintf(teacher, sizeof teacher, MODEL_TEACHER "%s", t->name);
    const weight_t *w = dino_only(t->name) ? NULL : weights_file_find(wf, teacher);
    if (!w) w = weights_file_find(wf, t->name);
    char want[96], have[96];
    shape_str(t->shape, t->ndim, want, sizeof want);
    if (!w)
        FAIL("%s: has no tensor '%s' %s, which model %s needs (was it written for another --model or --channels?)",
             path, t->name, want, m->name);
    shape_str(w->shape, w->ndim, have, sizeof have);
    int same = w->ndim == t->ndim;
    for (int d = 0; same && d < t->ndim; d++) same = w->shape[d] == t->shape[d];
    if (!same && is_head(t->name))
        FAIL(
            "%s: tensor '%s' is %s, this run's classifier is %s (%lld classes); for a new speaker set use --init-head "
            "drop",
            path, t->name, have, want, (long long)m->num_classes);
    if (!same)
        FAIL("%s: tensor '%s' is %s, model %s has it as %s (another --channels, --emb-dim or feature_dim?)", path,
             t->name, have, m->name, want);
    if (!w->data) FAIL("%s: tensor '%s' is not float32", path, t->name);
    for (int64_t i = 0; i < w->numel; i++)
        if (!isfinite(w->data[i])) FAIL("%s: tensor '%s' holds NaN or Inf (value %lld)", path, t->name, (long long)i);
    memcpy(dst + t->offset, w->data, (size_t)t->numel * sizeof(float));
    return 0;
}

static int in_table(const param_table_t *p, const char *name) {
    for (int i = 0; i < p->count; i++)
        if (strcmp(p->t[i].name, name) == 0) return 1;
    return 0;
}

int init_from_copy(model_t *m, const weights_file_t *wf, const char *path, int keep_head, char *err, size_t cap) {
    const struct {
        const param_table_t *table;
        float *data;
    } parts[2] = {{&m->table, m->host_params}, {&m->state_table, m->host_state}};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < parts[k].table->count; i++) {
            const param_tensor_t *t = &parts[k].table->t[i];
            if (!keep_head && is_head(t->name)) continue;
            if (dino_only(t->name) && !weights_file_find(wf, t->name)) continue;
            int rc = copy_tensor(t, parts[k].data, wf, m, path, err, cap);
            if (rc) return rc;
        }
    for (int i = 0; i < wf->count; i++) {
        const char *name = wf->w[i].name;
        if (ends_with(name, ".num_batches_tracked") || (!keep_head && is_head(name)) || dino_only(name)) continue;
        if (!in_table(&m->table, name) && !in_table(&m->state_table, name))
            FAIL("%s: holds tensor '%s', for which model %s has no place (was it written for another model?)", path,
                 name, m->name);
    }
    return 0;
}

void init_from_apply(const comm_t *comm, model_t *m, const char *path, int keep_head) {
    struct {
        int code;
        char err[1024];
    } r = {0};
    // A sharded classifier is read whole on rank 0 (its fresh slices first, for --init-head drop).
    const int sharded = sharded_head_of(m);
    sharded_head_t sh;
    float *full = NULL;
    model_t whole = *m;
    if (sharded) {
        sharded_head_init(&sh, comm, m);
        if (comm->rank == 0) full = callocCheck((size_t)sh.n_full + 1, sizeof(float));
        sharded_head_gather(&sh, m->host_params, 1, full);
        whole = sharded_head_view(&sh, m, full);
    }
    if (comm->rank == 0) {
        weights_file_t wf;
        r.code = weights_file_read(path, &wf, r.err, sizeof r.err);
        if (r.code == 0) r.code = init_from_copy(&whole, &wf, path, keep_head, r.err, sizeof r.err);
        weights_file_free(&wf);
    }
    comm_bcast(comm, &r, sizeof r, MPI_BYTE, 0);
    if (r.code) spk_fail_all(r.code, "%s", r.err);
    if (sharded) {
        sharded_head_scatter(&sh, full, 1, m->host_params);
        sharded_head_free(&sh);
        free(full);
    } else {
        comm_bcast(comm, m->host_params, m->table.total, MPI_FLOAT, 0);
    }
    comm_bcast(comm, m->host_state, m->state_table.total, MPI_FLOAT, 0);
    model_upload(m);
}

void init_from_start(const comm_t *comm, model_t *m, const char *path, const char *head) {
    const int keep = strcmp(head, "drop") != 0;
    init_from_apply(comm, m, path, keep);
    printf0("initialised from %s: %s, classifier %s; optimizer and learning-rate schedule start fresh\n", path,
            "weights and BatchNorm statistics", keep ? "kept" : "dropped (fresh for this run's classes)");
}
