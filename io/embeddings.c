#include "io/embeddings.h"

#include "kernels/base/check.h"
#include "io/h5util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void embeddings_write(const char *path, const embeddings_t *e, const char *model) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    h5_quiet();
    hid_t f = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (f < 0) spk_die(SPK_EXIT_FAILURE, "%s: cannot create the embeddings file", tmp);
    h5_attr_write_str(f, "spkddp_format", EMB_FORMAT, path);
    h5_attr_write_i64(f, "version", EMB_VERSION, path);
    h5_attr_write_i64(f, "emb_dim", e->dim, path);
    h5_attr_write_str(f, "model", model, path);
    hsize_t d2[2] = {(hsize_t)e->n, (hsize_t)e->dim}, d1 = (hsize_t)e->n;
    h5_write_array(f, "embeddings", H5T_IEEE_F32LE, 2, d2, e->emb, path);
    h5_write_array(f, "labels", H5T_STD_I32LE, 1, &d1, e->labels, path);
    h5_write_strings(f, "utt_ids", (const char *const *)e->utt_ids, e->n, path);
    h5Check(H5Fclose(f), "%s: cannot finish the embeddings file", tmp);
    if (rename(tmp, path) != 0) spk_die(SPK_EXIT_FAILURE, "%s: cannot rename into place (%s)", path, strerror(errno));
}

int embeddings_read(const char *path, embeddings_t *e, char *err, size_t errcap) {
    memset(e, 0, sizeof *e);
    h5_quiet();
    if (access(path, R_OK) != 0) {
        snprintf(err, errcap, "%s: cannot read the embeddings file (%s)", path, strerror(errno));
        return SPK_EXIT_DATA;
    }
    hid_t f = H5Fis_hdf5(path) > 0 ? H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT) : -1;
    if (f < 0) {
        snprintf(err, errcap, "%s: not an HDF5 file", path);
        return SPK_EXIT_DATA;
    }
    char fmt[64];
    hsize_t dims[2];
    int rc = SPK_EXIT_DATA;
    if (h5_attr_read_str(f, "spkddp_format", fmt, sizeof fmt) != 0 || strcmp(fmt, EMB_FORMAT) != 0) {
        snprintf(err, errcap, "%s: not an spkddp embeddings file (attribute 'spkddp_format'; make one with spkddp embed)", path);
    } else if (h5_dataset_shape(f, "embeddings", dims, 2) != 2) {
        snprintf(err, errcap, "%s: dataset '/embeddings' (N, E) is missing", path);
    } else {
        e->n = (int64_t)dims[0];
        e->dim = (int64_t)dims[1];
        e->emb = mallocCheck((size_t)(e->n * e->dim) * sizeof(float));
        e->labels = callocCheck((size_t)(e->n ? e->n : 1), sizeof(int32_t));
        h5_read_array(f, "embeddings", H5T_NATIVE_FLOAT, e->emb, path);
        if (h5_exists(f, "labels")) h5_read_array(f, "labels", H5T_NATIVE_INT32, e->labels, path);
        e->utt_ids = h5_read_strings(f, "utt_ids", e->n);
        if (!e->utt_ids) snprintf(err, errcap, "%s: dataset '/utt_ids' is missing or has the wrong length", path);
        else rc = 0;
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
