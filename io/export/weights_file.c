#include "io/export/weights_file.h"

#include "kernels/base/check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void add_table(weights_file_t *wf, const param_table_t *p, const float *data) {
    for (int i = 0; i < p->count; i++) {
        const param_tensor_t *t = &p->t[i];
        weight_t *w = &wf->w[wf->count++];
        snprintf(w->name, sizeof w->name, "%s", t->name);
        w->ndim = t->ndim;
        memcpy(w->shape, t->shape, (size_t)t->ndim * sizeof(int64_t));
        w->numel = t->numel;
        w->data = data + t->offset;
    }
}

static int read_checkpoint(const char *path, weights_file_t *wf, char *err, size_t cap) {
    int rc = ckpt_image_load(path, &wf->ckpt, err, cap);
    if (rc) return rc;
    wf->is_checkpoint = 1;
    wf->w = callocCheck((size_t)(wf->ckpt.params.count + wf->ckpt.state.count + 1), sizeof *wf->w);
    add_table(wf, &wf->ckpt.params, wf->ckpt.param_data);
    add_table(wf, &wf->ckpt.state, wf->ckpt.state_data);
    return 0;
}

static int read_safetensors(const char *path, weights_file_t *wf, char *err, size_t cap) {
    int rc = safetensors_read(path, &wf->st, err, cap);
    if (rc) return rc;
    int64_t floats = 0;
    for (int i = 0; i < wf->st.count; i++)
        if (wf->st.t[i].dtype == ST_F32) floats += wf->st.t[i].numel;
    wf->floats = mallocCheck((size_t)(floats + 1) * sizeof(float));
    wf->w = callocCheck((size_t)wf->st.count + 1, sizeof *wf->w);
    float *at = wf->floats;
    for (int i = 0; i < wf->st.count; i++) {
        const st_tensor_t *t = &wf->st.t[i];
        weight_t *w = &wf->w[wf->count++];
        snprintf(w->name, sizeof w->name, "%s", t->name);
        w->ndim = t->ndim;
        memcpy(w->shape, t->shape, sizeof w->shape);
        w->numel = t->numel;
        if (t->dtype != ST_F32) continue;
        memcpy(at, t->data, (size_t)t->numel * sizeof(float));  // the file's data may sit unaligned
        w->data = at;
        at += t->numel;
    }
    return 0;
}

int weights_file_read(const char *path, weights_file_t *wf, char *err, size_t cap) {
    memset(wf, 0, sizeof *wf);
    int rc = safetensors_sniff(path) ? read_safetensors(path, wf, err, cap) : read_checkpoint(path, wf, err, cap);
    if (rc) weights_file_free(wf);
    return rc;
}

const weight_t *weights_file_find(const weights_file_t *wf, const char *name) {
    for (int i = 0; i < wf->count; i++)
        if (strcmp(wf->w[i].name, name) == 0) return &wf->w[i];
    return NULL;
}

void weights_file_free(weights_file_t *wf) {
    ckpt_image_free(&wf->ckpt);
    safetensors_free(&wf->st);
    free(wf->floats);
    free(wf->w);
    memset(wf, 0, sizeof *wf);
}
