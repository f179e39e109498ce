#include "io/export/spkddp_meta.h"

#include "io/dataset/dataset.h"
#include "kernels/base/check.h"
#include "kernels/base/spk_assert.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const NUMBER_KEYS[5] = {"feature_dim", "num_classes", "visual_dim", "visual_ratio", "global_step"};

static int64_t *number_field(ckpt_meta_t *m, int i) {
    int64_t *const f[5] = {&m->feature_dim, &m->num_classes, &m->visual_dim, &m->visual_ratio, &m->global_step};
    return f[i];
}

void spkddp_meta_add(spkddp_meta_t *out, const char *key, const char *value) {
    SPK_ASSERT(out->n < SPKDDP_META_MAX);
    out->kv[out->n++] = (st_meta_t){key, value};
}

void spkddp_meta_fill(spkddp_meta_t *out, const ckpt_meta_t *meta) {
    memset(out, 0, sizeof *out);
    spkddp_meta_add(out, "spkddp_model", meta->model);
    spkddp_meta_add(out, "spkddp_config", meta->config);
    for (int i = 0; i < 5; i++) {
        snprintf(out->numbers[i], sizeof out->numbers[i], "%lld", (long long)*number_field((ckpt_meta_t *)meta, i));
        spkddp_meta_add(out, NUMBER_KEYS[i], out->numbers[i]);
    }
}

#define FAIL(...)                        \
    do {                                 \
        snprintf(err, cap, __VA_ARGS__); \
        return SPK_EXIT_CKPT;            \
    } while (0)

int spkddp_meta_read(const safetensors_t *st, const char *path, ckpt_meta_t *meta, char *err, size_t cap) {
    memset(meta, 0, sizeof *meta);
    const char *model = safetensors_meta(st, "spkddp_model"), *config = safetensors_meta(st, "spkddp_config");
    if (!model || !config)
        FAIL(
            "%s: the safetensors metadata has no 'spkddp_model'/'spkddp_config' to build a model from (files from "
            "spkddp "
            "export and tools/speechbrain_to_safetensors.py have them; train --init-from takes any file of the right "
            "tensors)",
            path);
    if (strlen(model) >= sizeof meta->model || strlen(config) >= sizeof meta->config)
        FAIL("%s: safetensors metadata 'spkddp_model' or 'spkddp_config' is too long", path);
    snprintf(meta->model, sizeof meta->model, "%s", model);
    snprintf(meta->config, sizeof meta->config, "%s", config);
    const int64_t hi[5] = {DATASET_MAX_DIM, DATASET_MAX_SPEAKERS, DATASET_MAX_DIM, 1 << 16, INT64_MAX / 2};
    for (int i = 0; i < 5; i++) {
        const char *v = safetensors_meta(st, NUMBER_KEYS[i]);
        char *end;
        errno = 0;
        long long x = v ? strtoll(v, &end, 10) : -1;
        const int64_t lo = i < 2 ? 1 : 0;
        if (!v || errno || end == v || *end || x < lo || x > hi[i])
            FAIL("%s: safetensors metadata '%s' must be an integer in [%lld, %lld]", path, NUMBER_KEYS[i],
                 (long long)lo, (long long)hi[i]);
        *number_field(meta, i) = x;
    }
    meta->world_size = 1;
    meta->version = CKPT_VERSION;
    return 0;
}
