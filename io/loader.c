#include "io/loader.h"

#include "app/check.h"
#include "io/rng.h"

#include <stdlib.h>
#include <string.h>

void loader_init(loader_t *l, dataset_t *ds, int max_batch, int64_t crop, int cmn, uint64_t seed) {
    memset(l, 0, sizeof *l);
    l->ds = ds;
    l->crop = crop;
    l->cmn = cmn;
    l->seed = seed;
    l->max_batch = max_batch;
    l->batch.feature_dim = ds->feature_dim;
    l->batch.frame_off = mallocCheck((size_t)(max_batch + 1) * sizeof(int64_t));
    l->batch.labels = mallocCheck((size_t)max_batch * sizeof(int32_t));
    l->batch.index = mallocCheck((size_t)max_batch * sizeof(int64_t));
    l->segs = mallocCheck((size_t)max_batch * sizeof(segment_t));
    l->mean = mallocCheck((size_t)ds->feature_dim * sizeof(double));
}

static void ensure(float **buf, int64_t *cap, int64_t need) {
    if (need <= *cap) return;
    free(*buf);
    *buf = mallocCheck((size_t)need * sizeof(float));
    *cap = need;
}

const batch_t *loader_load(loader_t *l, int64_t epoch, const int64_t *index, int n) {
    const int64_t F = l->ds->feature_dim;
    batch_t *b = &l->batch;
    b->n = n;
    b->frame_off[0] = 0;
    int64_t raw_frames = 0;
    for (int i = 0; i < n; i++) {
        int64_t u = index[i], len = dataset_frames(l->ds, u);
        segment_t s = {u, 0, len};
        if (l->crop > 0 && len > l->crop) {
            rng_t r = rng_init(l->seed, RNG_PURPOSE_CROP, (uint64_t)epoch, (uint64_t)u);
            s.start = (int64_t)rng_below(&r, (uint64_t)(len - l->crop + 1));
            s.count = l->crop;
        }
        l->segs[i] = s;
        raw_frames += s.count;
        b->frame_off[i + 1] = b->frame_off[i] + (l->crop > 0 ? l->crop : len);
        b->labels[i] = l->ds->labels[u];
        b->index[i] = u;
    }
    ensure(&b->x, &l->x_cap, b->frame_off[n] * F);
    ensure(&l->raw, &l->raw_cap, raw_frames * F);
    dataset_read(l->ds, n, l->segs, l->raw);

    const float *src = l->raw;
    for (int i = 0; i < n; i++) {
        float *dst = b->x + b->frame_off[i] * F;
        int64_t want = b->frame_off[i + 1] - b->frame_off[i], have = l->segs[i].count;
        for (int64_t t = 0; t < want; t += have) {  // repeat short utterances to the crop length
            int64_t m = want - t < have ? want - t : have;
            memcpy(dst + t * F, src, (size_t)(m * F) * sizeof(float));
        }
        if (l->cmn) {
            double *mean = l->mean;
            for (int64_t j = 0; j < F; j++) mean[j] = 0.0;
            for (int64_t t = 0; t < want; t++)
                for (int64_t j = 0; j < F; j++) mean[j] += dst[t * F + j];
            for (int64_t j = 0; j < F; j++) mean[j] /= (double)want;
            for (int64_t t = 0; t < want; t++)
                for (int64_t j = 0; j < F; j++) dst[t * F + j] -= (float)mean[j];
        }
        src += have * F;
    }
    return b;
}

void loader_free(loader_t *l) {
    free(l->batch.frame_off);
    free(l->batch.labels);
    free(l->batch.index);
    free(l->batch.x);
    free(l->segs);
    free(l->raw);
    free(l->mean);
    memset(l, 0, sizeof *l);
}
