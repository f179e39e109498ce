// A model's exports, through its row of the registry (app/model/model_export.h).
#include "app/model/model_export.h"

#include "app/model/registry.h"
#include "kernels/base/check.h"

#include <stdio.h>

int model_speechbrain(const model_t *m, model_speechbrain_t *sb) {
    const model_family_t *f = model_family_of(m);
    if (!f || !f->speechbrain_args) return -1;
    sb->encoder = f->speechbrain_encoder;
    sb->classifier = f->speechbrain_classifier;
    return f->speechbrain_args(m, sb->encoder_args, sizeof sb->encoder_args, sb->classifier_args,
                               sizeof sb->classifier_args);
}

void model_toolkit(const model_t *m, model_toolkit_t *t) {
    const model_family_t *f = model_family_of(m);
    t->toolkit = f && f->toolkit ? f->toolkit : "spkddp";
    t->model = f ? f->toolkit_model : NULL;
    t->args[0] = 0;
    if (f && f->toolkit_args) f->toolkit_args(m, t->args, sizeof t->args);
}

int model_onnx_write(const model_t *m, const char *path, const st_meta_t *meta, int n, char *err, size_t cap) {
    const model_family_t *f = model_family_of(m);
    if (!f || !f->onnx_write) {
        snprintf(err, cap, "%s: the ONNX export covers --model %s; this checkpoint holds model %s", path,
                 model_family_onnx_names(), m->name);
        return SPK_EXIT_USAGE;
    }
    return f->onnx_write(m, path, meta, n, err, cap);
}
