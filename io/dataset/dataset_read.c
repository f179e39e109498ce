// Collective reads of frame segments through MPI-IO (io/dataset/dataset_read.h).
#include "io/dataset/dataset_read.h"

#include "kernels/base/check.h"
#include "kernels/base/spk_assert.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const segment_t *sort_segs;
static int cmp_seg(const void *a, const void *b) {
    const segment_t *x = &sort_segs[*(const int64_t *)a], *y = &sort_segs[*(const int64_t *)b];
    if (x->utt != y->utt) return x->utt < y->utt ? -1 : 1;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    return 0;
}

static void reserve(dataset_t *ds, int n, int64_t bytes) {
    if (n > ds->order_cap) {
        free(ds->order);
        free(ds->stage_at);
        ds->order_cap = n;
        ds->order = mallocCheck((size_t)n * sizeof(int64_t));
        ds->stage_at = mallocCheck((size_t)n * sizeof(int64_t));
    }
    if (bytes > ds->stage_cap) {
        free(ds->stage);
        ds->stage_cap = bytes;
        ds->stage = mallocCheck((size_t)bytes);
    }
}

// Select one run of frames of one utterance in the file space (OR-ed into the selection).
static void select_run(const dataset_t *ds, const stream_t *s, hid_t fspace, int64_t utt, int64_t start, int64_t count,
                       int first) {
    H5S_seloper_t op = first ? H5S_SELECT_SET : H5S_SELECT_OR;
    if (s->samples) {
        hsize_t off = (hsize_t)(s->offsets[utt] + start), cnt = (hsize_t)count;
        h5Check(H5Sselect_hyperslab(fspace, op, &off, NULL, &cnt, NULL), "%s: cannot select samples of '%s'", ds->path,
                s->name);
    } else if (s->variable) {
        hsize_t off[2] = {(hsize_t)(s->offsets[utt] + start), 0};
        hsize_t cnt[2] = {(hsize_t)count, (hsize_t)s->dim};
        h5Check(H5Sselect_hyperslab(fspace, op, off, NULL, cnt, NULL), "%s: cannot select frames of '%s'", ds->path,
                s->name);
    } else {
        hsize_t off[3] = {(hsize_t)utt, (hsize_t)start, 0};
        hsize_t cnt[3] = {1, (hsize_t)count, (hsize_t)s->dim};
        h5Check(H5Sselect_hyperslab(fspace, op, off, NULL, cnt, NULL), "%s: cannot select frames of '%s'", ds->path,
                s->name);
    }
}

// NaN or Inf in m floats stops the job, naming the utterance, frame and dimension.
static void check_finite(const dataset_t *ds, const stream_t *st, const segment_t *s, const float *x, int64_t m) {
    const int64_t F = st->dim;
    for (int64_t j = 0; j < m; j++)
        if (!isfinite(x[j]))
            spk_die(SPK_EXIT_DATA, "%s: '%s' holds NaN or Inf in utterance %lld (frame %lld, dim %lld)", ds->path,
                    st->name, (long long)s->utt, (long long)(s->start + j / F), (long long)(j % F));
}

void dataset_read(dataset_t *ds, const stream_t *st, int n, const segment_t *segs, void *out) {
    const int64_t F = st->dim;
    const size_t elem = H5Tget_size(st->mem_type), row_bytes = (size_t)F * elem;
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        const segment_t *s = &segs[i];
        SPK_ASSERT(s->utt >= 0 && s->utt < ds->num_utts && s->start >= 0 && s->count > 0 &&
                   s->start + s->count <= stream_frames(st, s->utt));
        total += s->count;
    }
    reserve(ds, n, total * (int64_t)row_bytes);

    // HDF5 fills the memory buffer in file order whatever order the hyperslabs were OR-ed
    // in, and merges overlaps. So: sort segments by file position, merge overlapping runs
    // of the same utterance (padding duplicates), read the runs, then copy each segment out.
    for (int i = 0; i < n; i++) ds->order[i] = i;
    sort_segs = segs;
    if (n > 0) qsort(ds->order, (size_t)n, sizeof(int64_t), cmp_seg);  // order is NULL before the first segment

    hid_t fspace = h5Check(H5Dget_space(st->features), "%s: cannot get the dataspace of '%s'", ds->path, st->name);
    int64_t staged = 0;  // frames in the stage buffer
    int runs = 0;
    int64_t run_utt = -1, run_start = 0, run_end = 0, run_at = 0;
    for (int k = 0; k <= n; k++) {
        const segment_t *s = k < n ? &segs[ds->order[k]] : NULL;
        if (s && s->utt == run_utt && s->start <= run_end) {  // extends the current run
            if (s->start + s->count > run_end) {
                staged += s->start + s->count - run_end;
                run_end = s->start + s->count;
            }
        } else {
            if (run_utt >= 0) select_run(ds, st, fspace, run_utt, run_start, run_end - run_start, runs++ == 0);
            if (!s) break;
            run_utt = s->utt;
            run_start = s->start;
            run_end = s->start + s->count;
            run_at = staged;
            staged += s->count;
        }
        ds->stage_at[ds->order[k]] = run_at + (s->start - run_start);
    }
    if (runs == 0) h5Check(H5Sselect_none(fspace), "%s: cannot select nothing", ds->path);
    hsize_t mdim = (hsize_t)(staged * F);
    hid_t mspace =
        h5Check(H5Screate_simple(1, mdim ? &mdim : (hsize_t[]){1}, NULL), "%s: cannot create memory space", ds->path);
    if (runs == 0) H5Sselect_none(mspace);
    h5Check(H5Dread(st->features, st->mem_type, mspace, fspace, ds->dxpl, ds->stage), "%s: reading '%s' failed",
            ds->path, st->name);
    H5Sclose(mspace);
    H5Sclose(fspace);

    char *dst = out;
    for (int i = 0; i < n; i++) {
        const char *src = ds->stage + ds->stage_at[i] * (int64_t)row_bytes;
        size_t bytes = (size_t)segs[i].count * row_bytes;
        if (st->mem_type == H5T_NATIVE_FLOAT) check_finite(ds, st, &segs[i], (const float *)src, segs[i].count * F);
        memcpy(dst, src, bytes);
        dst += bytes;
    }
}
