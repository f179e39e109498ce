#include "io/scores/embeddings.h"

#include "io/common/atomic_file.h"
#include "io/common/h5util.h"
#include "io/dataset/dataset.h"
#include "io/dataset/utt_ids.h"
#include "kernels/base/check.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void embeddings_write(const char *path, const embeddings_t *e, const char *model) {
    h5_quiet();
    hid_t f = h5_mem_create(path);
    h5_attr_write_str(f, "spkddp_format", EMB_FORMAT, path);
    h5_attr_write_i64(f, "version", EMB_VERSION, path);
    h5_attr_write_i64(f, "emb_dim", e->dim, path);
    h5_attr_write_str(f, "model", model, path);
    hsize_t d2[2] = {(hsize_t)e->n, (hsize_t)e->dim}, d1 = (hsize_t)e->n;
    h5_write_array(f, "embeddings", H5T_IEEE_F32LE, 2, d2, e->emb, path);
    h5_write_array(f, "labels", H5T_STD_I32LE, 1, &d1, e->labels, path);
    h5_write_strings(f, "utt_ids", (const char *const *)e->utt_ids, e->n, path);
    void *image;
    size_t bytes;
    if (h5_mem_image(f, &image, &bytes) != 0)
        spk_die(SPK_EXIT_FAILURE, "%s: HDF5 cannot hand over the file built in memory", path);
    h5Check(H5Fclose(f), "%s: cannot close the file built in memory", path);
    char err[1024];
    int rc = atomic_write_file(path, image, bytes, ATOMIC_REPLACE, err, sizeof err);
    free(image);
    if (rc) spk_die(SPK_EXIT_FAILURE, "%s", err);
}

#define FAIL(...)                           \
    do {                                    \
        snprintf(err, errcap, __VA_ARGS__); \
        return SPK_EXIT_DATA;               \
    } while (0)

static int check_header(hid_t f, const char *path, embeddings_t *e, char *err, size_t errcap) {
    char fmt[64];
    int64_t version = 0, dim;
    if (h5_attr_read_str(f, "spkddp_format", fmt, sizeof fmt) != 0 || strcmp(fmt, EMB_FORMAT) != 0)
        FAIL("%s: not an spkddp embeddings file (attribute 'spkddp_format'; make one with spkddp embed)", path);
    if (h5_attr_read_i64(f, "version", &version) != 0 || version != EMB_VERSION)
        FAIL("%s: attribute 'version' must be the integer %d (embeddings format version %d)", path, EMB_VERSION,
             EMB_VERSION);
    h5_info_t in;
    int rc = h5_dataset_info(f, "embeddings", &in);
    if (rc == H5U_MISSING) FAIL("%s: dataset '/embeddings' (N, E) is missing", path);
    if (rc || in.rank != 2 || in.cls != H5T_FLOAT)
        FAIL("%s: dataset '/embeddings' must hold floating-point values of shape (N, E)", path);
    if (!in.stored)
        FAIL("%s: dataset '/embeddings' declares %llu values but does not store them all", path,
             (unsigned long long)in.npoints);
    if (in.dims[0] < 1 || in.dims[0] > (hsize_t)DATASET_MAX_UTTS)
        FAIL("%s: dataset '/embeddings' holds %llu embeddings", path, (unsigned long long)in.dims[0]);
    if (in.dims[1] < 1 || in.dims[1] > DATASET_MAX_DIM)
        FAIL("%s: dataset '/embeddings' has embeddings of dimension %llu", path, (unsigned long long)in.dims[1]);
    e->n = (int64_t)in.dims[0];
    e->dim = (int64_t)in.dims[1];
    if (h5_attr_exists(f, "emb_dim") && (h5_attr_read_i64(f, "emb_dim", &dim) != 0 || dim != e->dim))
        FAIL("%s: attribute 'emb_dim' differs from the %lld columns of '/embeddings'", path, (long long)e->dim);
    rc = h5_dataset_info(f, "utt_ids", &in);
    if (rc || in.rank != 1 || in.cls != H5T_STRING || (int64_t)in.dims[0] != e->n)
        FAIL("%s: dataset '/utt_ids' must be %lld strings, one per embedding", path, (long long)e->n);
    rc = h5_dataset_info(f, "labels", &in);
    if (rc == H5U_MISSING) return 0;
    if (rc || in.rank != 1 || in.cls != H5T_INTEGER || !in.stored || (int64_t)in.dims[0] != e->n)
        FAIL("%s: dataset '/labels' must be %lld stored integers, one per embedding", path, (long long)e->n);
    e->has_labels = 1;
    return 0;
}

static int read_arrays(hid_t f, const char *path, embeddings_t *e, char *err, size_t errcap) {
    hid_t d = H5Dopen2(f, "embeddings", H5P_DEFAULT);
    int ok = d >= 0 && H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, e->emb) >= 0;
    if (d >= 0) H5Dclose(d);
    if (!ok) FAIL("%s: dataset '/embeddings' cannot be read", path);
    e->utt_ids = h5_read_strings(f, "utt_ids", e->n);
    if (!e->utt_ids) FAIL("%s: dataset '/utt_ids' cannot be read", path);
    for (int64_t i = 0; i < e->n * e->dim; i++)
        if (!isfinite(e->emb[i]))
            FAIL("%s: '/embeddings' row %lld (utterance '%.200s') holds NaN or Inf", path, (long long)(i / e->dim),
                 e->utt_ids[i / e->dim]);
    utt_index_t ix;
    char why[600];
    int rc = utt_index_build(&ix, e->utt_ids, e->n, "'/utt_ids'", why, sizeof why);
    if (rc) FAIL("%s: %s", path, why);
    utt_index_free(&ix);
    if (!e->has_labels) return 0;
    int64_t *lab = mallocCheck((size_t)e->n * sizeof(int64_t));
    rc = h5_read_i64s(f, "labels", lab, (size_t)e->n);
    for (int64_t i = 0; i < e->n && !rc; i++) {
        if (lab[i] < 0 || lab[i] > INT32_MAX) rc = -1;
        e->labels[i] = (int32_t)lab[i];
    }
    free(lab);
    if (rc) FAIL("%s: '/labels' must hold speaker indices in [0, 2^31)", path);
    return 0;
}

int embeddings_read(const char *path, embeddings_t *e, char *err, size_t errcap) {
    memset(e, 0, sizeof *e);
    h5_quiet();
    if (access(path, R_OK) != 0) FAIL("%s: cannot read the embeddings file (%s)", path, strerror(errno));
    hid_t f = H5Fis_hdf5(path) > 0 ? H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT) : -1;
    if (f < 0) FAIL("%s: not an HDF5 file (or a truncated one)", path);
    int rc = check_header(f, path, e, err, errcap);
    if (rc == 0) {
        e->emb = mallocCheck((size_t)(e->n * e->dim) * sizeof(float));
        e->labels = callocCheck((size_t)e->n, sizeof(int32_t));
        rc = read_arrays(f, path, e, err, errcap);
    }
    H5Fclose(f);
    if (rc) embeddings_free(e);
    return rc;
}

void embeddings_free(embeddings_t *e) {
    free(e->emb);
    free(e->labels);
    h5_free_strings(e->utt_ids, e->n);
    memset(e, 0, sizeof *e);
}
