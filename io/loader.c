#include "io/loader.h"

#include "kernels/base/check.h"
#include "io/rng.h"

#include <stdlib.h>
#include <string.h>

void loader_init(loader_t *l, dataset_t *ds, int max_batch, const loader_spec_t *spec, uint64_t seed) {
    memset(l, 0, sizeof *l);
    l->ds = ds;
    l->spec = *spec;
    l->spec.visual = spec->visual && ds->visual.dim > 0;
    l->seed = seed;
    l->max_batch = max_batch;
    batch_t *b = &l->batch;
    b->feature_dim = ds->feature_dim;
    b->visual_dim = l->spec.visual ? ds->visual.dim : 0;
    b->frame_off = mallocCheck((size_t)(max_batch + 1) * sizeof(int64_t));
    b->vframe_off = mallocCheck((size_t)(max_batch + 1) * sizeof(int64_t));
    b->labels = mallocCheck((size_t)max_batch * sizeof(int32_t));
    b->index = mallocCheck((size_t)max_batch * sizeof(int64_t));
    l->segs = mallocCheck((size_t)max_batch * sizeof(segment_t));
    l->vsegs = mallocCheck((size_t)max_batch * sizeof(segment_t));
    int64_t dim = ds->feature_dim > ds->visual.dim ? ds->feature_dim : ds->visual.dim;
    l->mean = mallocCheck((size_t)dim * sizeof(double));
}

static void ensure(float **buf, int64_t *cap, int64_t need) {
    if (need <= *cap) return;
    free(*buf);
    *buf = mallocCheck((size_t)(need ? need : 1) * sizeof(float));
    *cap = need;
}

// Copies `have` frames into `want` frames (repeating a short segment), then optionally
// subtracts the mean frame.
static void place(float *dst, const float *src, int64_t want, int64_t have, int64_t F, int cmn, double *mean) {
    for (int64_t t = 0; t < want; t += have) {
        int64_t m = want - t < have ? want - t : have;
        memcpy(dst + t * F, src, (size_t)(m * F) * sizeof(float));
    }
    if (!cmn) return;
    for (int64_t j = 0; j < F; j++) mean[j] = 0.0;
    for (int64_t t = 0; t < want; t++)
        for (int64_t j = 0; j < F; j++) mean[j] += dst[t * F + j];
    for (int64_t j = 0; j < F; j++) mean[j] /= (double)want;
    for (int64_t t = 0; t < want; t++)
        for (int64_t j = 0; j < F; j++) dst[t * F + j] -= (float)mean[j];
}

const batch_t *loader_load(loader_t *l, int64_t epoch, const int64_t *index, int n) {
    const dataset_t *ds = l->ds;
    const int64_t F = ds->feature_dim, Fv = ds->visual.dim, r = l->spec.visual ? ds->visual_ratio : 1;
    const int64_t crop = l->spec.crop;
    batch_t *b = &l->batch;
    b->n = n;
    b->frame_off[0] = b->vframe_off[0] = 0;
    int64_t raw = 0, vraw = 0;
    for (int i = 0; i < n; i++) {
        int64_t u = index[i], len = dataset_frames(ds, u);
        segment_t s = {u, 0, len};
        int64_t want = crop > 0 ? crop : len;
        if (want < l->spec.min_frames) want = l->spec.min_frames;
        want = (want + r - 1) / r * r;  // whole visual frames
        if (crop > 0 && len >= crop) {
            // Crop starts on visual frame boundaries (r = 1 without the visual stream).
            rng_t g = rng_init(l->seed, RNG_PURPOSE_CROP, (uint64_t)epoch, (uint64_t)u);
            s.start = r * (int64_t)rng_below(&g, (uint64_t)((len - crop) / r + 1));
            s.count = crop;
        }
        l->segs[i] = s;
        raw += s.count;
        b->frame_off[i + 1] = b->frame_off[i] + want;
        if (l->spec.visual) {
            int64_t vlen = stream_frames(&ds->visual, u), vcount = s.count / r;
            if (vcount < 1) vcount = 1;
            if (vcount > vlen - s.start / r) vcount = vlen - s.start / r;
            l->vsegs[i] = (segment_t){u, s.start / r, vcount};
            vraw += vcount;
            b->vframe_off[i + 1] = b->vframe_off[i] + want / r;
        }
        b->labels[i] = ds->labels[u];
        b->index[i] = u;
    }
    ensure(&b->x, &l->x_cap, b->frame_off[n] * F);
    ensure(&l->raw, &l->raw_cap, raw * F);
    dataset_read(l->ds, &ds->audio, n, l->segs, l->raw);
    const float *src = l->raw;
    for (int i = 0; i < n; i++) {
        int64_t want = b->frame_off[i + 1] - b->frame_off[i];
        place(b->x + b->frame_off[i] * F, src, want, l->segs[i].count, F, l->spec.cmn, l->mean);
        src += l->segs[i].count * F;
    }
    if (l->spec.visual) {
        ensure(&b->vx, &l->vx_cap, b->vframe_off[n] * Fv);
        ensure(&l->vraw, &l->vraw_cap, vraw * Fv);
        dataset_read(l->ds, &ds->visual, n, l->vsegs, l->vraw);
        src = l->vraw;
        for (int i = 0; i < n; i++) {
            int64_t want = b->vframe_off[i + 1] - b->vframe_off[i];
            place(b->vx + b->vframe_off[i] * Fv, src, want, l->vsegs[i].count, Fv, l->spec.cmn, l->mean);
            src += l->vsegs[i].count * Fv;
        }
    }
    return b;
}

void loader_free(loader_t *l) {
    batch_t *b = &l->batch;
    free(b->frame_off);
    free(b->vframe_off);
    free(b->labels);
    free(b->index);
    free(b->x);
    free(b->vx);
    free(l->segs);
    free(l->vsegs);
    free(l->raw);
    free(l->vraw);
    free(l->mean);
    memset(l, 0, sizeof *l);
}
