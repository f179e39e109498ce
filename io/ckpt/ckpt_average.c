#include "io/ckpt/ckpt_average.h"

#include "io/ckpt/checkpoint.h"
#include "kernels/base/check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(...)                           \
    do {                                    \
        snprintf(err, errcap, __VA_ARGS__); \
        rc = SPK_EXIT_CKPT;                 \
        goto done;                          \
    } while (0)

static void accumulate(double *sum, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) sum[i] += (double)x[i];
}

static void mean_into(float *out, const double *sum, int64_t n, int count) {
    for (int64_t i = 0; i < n; i++) out[i] = (float)(sum[i] / count);
}

int ckpt_average(const char *const *paths, int n, const char *out, char *err, size_t errcap) {
    ckpt_image_t first = {0}, img = {0};
    double *psum = NULL, *ssum = NULL;
    int rc = ckpt_image_load(paths[0], &first, err, errcap);
    if (rc) return rc;
    const int64_t P = first.params.total, S = first.state.total;
    psum = callocCheck((size_t)P + 1, sizeof(double));
    ssum = callocCheck((size_t)S + 1, sizeof(double));
    ckpt_meta_t *meta = callocCheck(1, sizeof *meta);
    *meta = *first.meta;
    accumulate(psum, first.param_data, P);
    accumulate(ssum, first.state_data, S);
    for (int k = 1; k < n; k++) {
        if ((rc = ckpt_image_load(paths[k], &img, err, errcap)) != 0) goto done;
        const ckpt_meta_t *m = img.meta;
        char why[512] = "";
        if (strcmp(m->model, first.meta->model) != 0)
            snprintf(why, sizeof why, "model '%s' against '%s'", m->model, first.meta->model);
        else if (!param_table_difference(&img.params, &first.params, why, sizeof why))
            param_table_difference(&img.state, &first.state, why, sizeof why);
        if (why[0])
            FAIL("%s: holds another model than %s (%s); only checkpoints of one model average", paths[k], paths[0],
                 why);
        if (m->feature_dim != first.meta->feature_dim || m->num_classes != first.meta->num_classes)
            FAIL("%s: trained on feature_dim %lld with %lld classes, %s on %lld with %lld", paths[k],
                 (long long)m->feature_dim, (long long)m->num_classes, paths[0], (long long)first.meta->feature_dim,
                 (long long)first.meta->num_classes);
        accumulate(psum, img.param_data, P);
        accumulate(ssum, img.state_data, S);
        if (m->global_step > meta->global_step) *meta = *m;
        ckpt_image_free(&img);
    }
    mean_into(first.param_data, psum, P, n);
    mean_into(first.state_data, ssum, S, n);
    meta->run_id = ckpt_new_run_id();
    snprintf(meta->optimizer, sizeof meta->optimizer, "none");
    meta->opt_step = 0;
    ckpt_tensors_t t = {&first.params, first.param_data, &first.state, first.state_data, 0, NULL};
    ckpt_write_path(out, meta, &t);
done:
    ckpt_image_free(&img);
    ckpt_image_free(&first);
    free(meta);
    free(psum);
    free(ssum);
    return rc;
}
