#include "io/dataset.h"

#include "app/check.h"
#include "io/h5util.h"
#include "kernels/spk_assert.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// Rank 0 checks the contract and reads the small metadata; the verdict and the arrays are
// broadcast, so a bad file gives one message and a clean exit on every rank.
typedef struct {
    int code;  // 0 = fine, else an spk_exit code
    char msg[900];
    int variable;
    int64_t num_utts, feature_dim, num_speakers, fixed_frames;
} header_t;

static int bad(header_t *h, int code, const char *fmt, const char *path, const char *field) {
    h->code = code;
    snprintf(h->msg, sizeof h->msg, fmt, path, field);
    return -1;
}

static int check_header(hid_t f, const char *path, header_t *h) {
    char fmt[64];
    int64_t version;
    if (h5_attr_read_str(f, "spkddp_format", fmt, sizeof fmt) != 0 || strcmp(fmt, DATASET_FORMAT) != 0)
        return bad(h, SPK_EXIT_DATA, "%s: root attribute '%s' must be the string \"features\"", path, "spkddp_format");
    if (h5_attr_read_i64(f, "version", &version) != 0 || version != DATASET_VERSION)
        return bad(h, SPK_EXIT_DATA, "%s: attribute '%s' must be 1 (this spkddp reads dataset format version 1)", path, "version");
    if (h5_attr_read_i64(f, "feature_dim", &h->feature_dim) != 0 || h->feature_dim <= 0)
        return bad(h, SPK_EXIT_DATA, "%s: attribute '%s' is missing or not a positive integer", path, "feature_dim");
    if (h5_attr_read_i64(f, "num_speakers", &h->num_speakers) != 0 || h->num_speakers <= 0)
        return bad(h, SPK_EXIT_DATA, "%s: attribute '%s' is missing or not a positive integer", path, "num_speakers");
    hsize_t dims[4];
    int rank = h5_dataset_shape(f, "features", dims, 3);
    if (rank < 0) return bad(h, SPK_EXIT_DATA, "%s: dataset '%s' is missing", path, "/features");
    if (rank != 2 && rank != 3)
        return bad(h, SPK_EXIT_DATA, "%s: dataset '%s' must have shape [N, T, F] or [total_frames, F]", path, "/features");
    hid_t d = H5Dopen2(f, "features", H5P_DEFAULT);
    hid_t t = H5Dget_type(d);
    int is_float = H5Tget_class(t) == H5T_FLOAT;
    H5Tclose(t);
    H5Dclose(d);
    if (!is_float) return bad(h, SPK_EXIT_DATA, "%s: dataset '%s' must hold floating-point values", path, "/features");
    if ((int64_t)dims[rank - 1] != h->feature_dim)
        return bad(h, SPK_EXIT_DATA, "%s: the last dimension of '%s' differs from attribute feature_dim", path, "/features");
    h->variable = rank == 2;
    if (h->variable) {
        hsize_t od[2];
        if (h5_dataset_shape(f, "offsets", od, 1) != 1 || od[0] < 2)
            return bad(h, SPK_EXIT_DATA, "%s: variable-length '/features' needs a 1-D dataset '%s' of N+1 int64", path, "/offsets");
        h->num_utts = (int64_t)od[0] - 1;
    } else {
        h->num_utts = (int64_t)dims[0];
        h->fixed_frames = (int64_t)dims[1];
        if (h->num_utts < 1 || h->fixed_frames < 1)
            return bad(h, SPK_EXIT_DATA, "%s: dataset '%s' is empty", path, "/features");
    }
    hsize_t ld[2];
    if (h5_dataset_shape(f, "labels", ld, 1) != 1)
        return bad(h, SPK_EXIT_DATA, "%s: dataset '%s' (int32 [N]) is missing or not 1-D", path, "/labels");
    if ((int64_t)ld[0] != h->num_utts)
        return bad(h, SPK_EXIT_DATA, "%s: '%s' has a different length than the number of utterances", path, "/labels");
    return 0;
}

static int check_arrays(const char *path, header_t *h, const int64_t *off, const int32_t *lab, int64_t rows) {
    if (h->variable) {
        if (off[0] != 0) return bad(h, SPK_EXIT_DATA, "%s: '%s' must start at 0", path, "/offsets");
        for (int64_t i = 0; i < h->num_utts; i++) {
            if (off[i + 1] <= off[i]) {
                h->code = SPK_EXIT_DATA;
                snprintf(h->msg, sizeof h->msg, "%s: '/offsets' is not strictly increasing at index %lld (%lld -> %lld)",
                         path, (long long)i, (long long)off[i], (long long)off[i + 1]);
                return -1;
            }
        }
        if (off[h->num_utts] != rows)
            return bad(h, SPK_EXIT_DATA, "%s: the last entry of '%s' differs from the number of rows of /features", path, "/offsets");
    }
    for (int64_t i = 0; i < h->num_utts; i++) {
        if (lab[i] < 0 || lab[i] >= h->num_speakers) {
            h->code = SPK_EXIT_DATA;
            snprintf(h->msg, sizeof h->msg, "%s: '/labels'[%lld] = %d is outside [0, num_speakers=%lld)", path,
                     (long long)i, lab[i], (long long)h->num_speakers);
            return -1;
        }
    }
    return 0;
}

void dataset_open(dataset_t *ds, const char *path, MPI_Comm comm) {
    int rank;
    mpiCheck(MPI_Comm_rank(comm, &rank));
    memset(ds, 0, sizeof *ds);
    snprintf(ds->path, sizeof ds->path, "%s", path);
    h5_quiet();

    header_t h = {0};
    if (rank == 0) {
        if (access(path, R_OK) != 0) {
            h.code = SPK_EXIT_DATA;
            snprintf(h.msg, sizeof h.msg, "%s: cannot read the dataset file (%s)", path, strerror(errno));
        } else if (H5Fis_hdf5(path) <= 0) {
            h.code = SPK_EXIT_DATA;
            snprintf(h.msg, sizeof h.msg, "%s: not an HDF5 file", path);
        }
    }
    mpiCheck(MPI_Bcast(&h, sizeof h, MPI_BYTE, 0, comm));
    if (h.code) spk_fail_all(h.code, "%s", h.msg);

    hid_t fapl = h5Check(H5Pcreate(H5P_FILE_ACCESS), "%s: cannot create file access properties", path);
    h5Check(H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL), "%s: cannot select the MPI-IO driver", path);
    ds->file = h5Check(H5Fopen(path, H5F_ACC_RDONLY, fapl), "%s: cannot open with MPI-IO", path);
    H5Pclose(fapl);

    int64_t rows = 0;
    if (rank == 0 && check_header(ds->file, path, &h) == 0) {
        ds->offsets = mallocCheck((size_t)(h.num_utts + 1) * sizeof(int64_t));
        ds->labels = mallocCheck((size_t)h.num_utts * sizeof(int32_t));
        h5_read_array(ds->file, "labels", H5T_NATIVE_INT32, ds->labels, path);
        if (h.variable) {
            hsize_t fd[2];
            h5_dataset_shape(ds->file, "features", fd, 2);
            rows = (int64_t)fd[0];
            h5_read_array(ds->file, "offsets", H5T_NATIVE_INT64, ds->offsets, path);
        }
        check_arrays(path, &h, ds->offsets, ds->labels, rows);
    }
    mpiCheck(MPI_Bcast(&h, sizeof h, MPI_BYTE, 0, comm));
    if (h.code) {
        H5Fclose(ds->file);
        spk_fail_all(h.code, "%s", h.msg);
    }
    ds->variable = h.variable;
    ds->num_utts = h.num_utts;
    ds->feature_dim = h.feature_dim;
    ds->num_speakers = h.num_speakers;
    if (rank != 0) {
        ds->offsets = mallocCheck((size_t)(h.num_utts + 1) * sizeof(int64_t));
        ds->labels = mallocCheck((size_t)h.num_utts * sizeof(int32_t));
    }
    if (h.variable) {
        mpiCheck(MPI_Bcast(ds->offsets, (int)(h.num_utts + 1), MPI_INT64_T, 0, comm));
    } else {
        for (int64_t i = 0; i <= h.num_utts; i++) ds->offsets[i] = i * h.fixed_frames;
    }
    mpiCheck(MPI_Bcast(ds->labels, (int)h.num_utts, MPI_INT32_T, 0, comm));

    ds->features = h5Check(H5Dopen2(ds->file, "features", H5P_DEFAULT), "%s: cannot open '/features'", path);
    ds->dxpl = h5Check(H5Pcreate(H5P_DATASET_XFER), "%s: cannot create transfer properties", path);
    h5Check(H5Pset_dxpl_mpio(ds->dxpl, H5FD_MPIO_COLLECTIVE), "%s: cannot request collective I/O", path);
}

// ---- reading ----------------------------------------------------------------------------

static const segment_t *sort_segs;
static int cmp_seg(const void *a, const void *b) {
    const segment_t *x = &sort_segs[*(const int64_t *)a], *y = &sort_segs[*(const int64_t *)b];
    if (x->utt != y->utt) return x->utt < y->utt ? -1 : 1;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    return 0;
}

static void reserve(dataset_t *ds, int n, int64_t frames) {
    if (n > ds->order_cap) {
        free(ds->order);
        free(ds->stage_at);
        ds->order_cap = n;
        ds->order = mallocCheck((size_t)n * sizeof(int64_t));
        ds->stage_at = mallocCheck((size_t)n * sizeof(int64_t));
    }
    int64_t need = frames * ds->feature_dim;
    if (need > ds->stage_cap) {
        free(ds->stage);
        ds->stage_cap = need;
        ds->stage = mallocCheck((size_t)need * sizeof(float));
    }
}

// Select one run of frames of one utterance in the file space (OR-ed into the selection).
static void select_run(dataset_t *ds, hid_t fspace, int64_t utt, int64_t start, int64_t count, int first) {
    H5S_seloper_t op = first ? H5S_SELECT_SET : H5S_SELECT_OR;
    if (ds->variable) {
        hsize_t off[2] = {(hsize_t)(ds->offsets[utt] + start), 0};
        hsize_t cnt[2] = {(hsize_t)count, (hsize_t)ds->feature_dim};
        h5Check(H5Sselect_hyperslab(fspace, op, off, NULL, cnt, NULL), "%s: cannot select frames", ds->path);
    } else {
        hsize_t off[3] = {(hsize_t)utt, (hsize_t)start, 0};
        hsize_t cnt[3] = {1, (hsize_t)count, (hsize_t)ds->feature_dim};
        h5Check(H5Sselect_hyperslab(fspace, op, off, NULL, cnt, NULL), "%s: cannot select frames", ds->path);
    }
}

void dataset_read(dataset_t *ds, int n, const segment_t *segs, float *out) {
    const int64_t F = ds->feature_dim;
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        const segment_t *s = &segs[i];
        SPK_ASSERT(s->utt >= 0 && s->utt < ds->num_utts && s->start >= 0 && s->count > 0 &&
                   s->start + s->count <= dataset_frames(ds, s->utt));
        total += s->count;
    }
    reserve(ds, n, total);

    // HDF5 fills the memory buffer in file order whatever order the hyperslabs were OR-ed
    // in, and merges overlaps. So: sort segments by file position, merge overlapping runs
    // of the same utterance (padding duplicates), read the runs, then copy each segment out.
    for (int i = 0; i < n; i++) ds->order[i] = i;
    sort_segs = segs;
    qsort(ds->order, (size_t)n, sizeof(int64_t), cmp_seg);

    hid_t fspace = h5Check(H5Dget_space(ds->features), "%s: cannot get the dataspace of /features", ds->path);
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
            if (run_utt >= 0) select_run(ds, fspace, run_utt, run_start, run_end - run_start, runs++ == 0);
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
    hid_t mspace = h5Check(H5Screate_simple(1, mdim ? &mdim : (hsize_t[]){1}, NULL), "%s: cannot create memory space", ds->path);
    if (runs == 0) H5Sselect_none(mspace);
    h5Check(H5Dread(ds->features, H5T_NATIVE_FLOAT, mspace, fspace, ds->dxpl, ds->stage),
            "%s: reading '/features' failed", ds->path);
    H5Sclose(mspace);
    H5Sclose(fspace);

    float *dst = out;
    for (int i = 0; i < n; i++) {
        const float *src = ds->stage + ds->stage_at[i] * F;
        int64_t m = segs[i].count * F;
        for (int64_t j = 0; j < m; j++) {
            if (!isfinite(src[j]))
                spk_die(SPK_EXIT_DATA, "%s: '/features' holds NaN or Inf in utterance %lld (frame %lld, dim %lld)",
                        ds->path, (long long)segs[i].utt, (long long)(segs[i].start + j / F), (long long)(j % F));
        }
        memcpy(dst, src, (size_t)m * sizeof(float));
        dst += m;
    }
}

void dataset_close(dataset_t *ds) {
    if (ds->dxpl > 0) H5Pclose(ds->dxpl);
    if (ds->features > 0) H5Dclose(ds->features);
    if (ds->file > 0) H5Fclose(ds->file);
    free(ds->offsets);
    free(ds->labels);
    free(ds->stage);
    free(ds->order);
    free(ds->stage_at);
    memset(ds, 0, sizeof *ds);
}
