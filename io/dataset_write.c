#include "io/dataset_write.h"

#include "kernels/base/check.h"
#include "io/dataset.h"
#include "io/h5util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Chunks of about 256 KiB: small enough that a rank reading random utterances does not
// drag in much it does not need, large enough to keep metadata small.
#define CHUNK_BYTES (256 * 1024)

// A chunked float32 dataset: (N, T, F) when fixed_frames > 0, else (rows, F).
static hid_t create_features(hid_t loc, const char *name, const char *path, int64_t num_utts, int64_t fixed_frames,
                             int64_t rows, int64_t dim) {
    hsize_t dims[3], chunk[3];
    int rank;
    hsize_t frame_bytes = (hsize_t)dim * sizeof(float);
    if (fixed_frames > 0) {
        rank = 3;
        dims[0] = (hsize_t)num_utts; dims[1] = (hsize_t)fixed_frames; dims[2] = (hsize_t)dim;
        hsize_t utt_bytes = (hsize_t)fixed_frames * frame_bytes;
        chunk[0] = utt_bytes >= CHUNK_BYTES ? 1 : CHUNK_BYTES / utt_bytes;
        if (chunk[0] > dims[0]) chunk[0] = dims[0];
        chunk[1] = dims[1]; chunk[2] = dims[2];
    } else {
        rank = 2;
        dims[0] = (hsize_t)rows; dims[1] = (hsize_t)dim;
        chunk[0] = frame_bytes >= CHUNK_BYTES ? 1 : CHUNK_BYTES / frame_bytes;
        if (chunk[0] > dims[0]) chunk[0] = dims[0];
        chunk[1] = dims[1];
    }
    hid_t space = h5Check(H5Screate_simple(rank, dims, NULL), "%s: cannot create dataspace", path);
    hid_t dcpl = h5Check(H5Pcreate(H5P_DATASET_CREATE), "%s: cannot create properties", path);
    h5Check(H5Pset_chunk(dcpl, rank, chunk), "%s: cannot set chunking", path);
    hid_t d = h5Check(H5Dcreate2(loc, name, H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT),
                      "%s: cannot create '%s'", path, name);
    H5Pclose(dcpl);
    H5Sclose(space);
    return d;
}

void dataset_writer_create(dataset_writer_t *w, const char *path, int64_t num_utts, int64_t feature_dim,
                           int64_t num_speakers, int64_t fixed_frames, const int64_t *lengths) {
    memset(w, 0, sizeof *w);
    snprintf(w->path, sizeof w->path, "%s", path);
    snprintf(w->tmp_path, sizeof w->tmp_path, "%s.tmp", path);
    w->num_utts = num_utts;
    w->feature_dim = feature_dim;
    w->fixed_frames = fixed_frames;
    w->offsets = mallocCheck((size_t)(num_utts + 1) * sizeof(int64_t));
    w->offsets[0] = 0;
    for (int64_t i = 0; i < num_utts; i++)
        w->offsets[i + 1] = w->offsets[i] + (fixed_frames > 0 ? fixed_frames : lengths[i]);

    h5_quiet();
    w->file = H5Fcreate(w->tmp_path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (w->file < 0) spk_die(SPK_EXIT_FAILURE, "%s: cannot create the dataset file", w->tmp_path);
    h5_attr_write_str(w->file, "spkddp_format", DATASET_FORMAT, path);
    h5_attr_write_i64(w->file, "version", DATASET_VERSION, path);
    h5_attr_write_i64(w->file, "feature_dim", feature_dim, path);
    h5_attr_write_i64(w->file, "num_speakers", num_speakers, path);

    w->features = create_features(w->file, "features", path, num_utts, fixed_frames, w->offsets[num_utts], feature_dim);
}

// Frames of one utterance into (N, T, F) or (rows, F) at its offset.
static void put_rows(const dataset_writer_t *w, hid_t d, int fixed, int64_t utt, int64_t start, int64_t len, int64_t dim,
                     const float *frames) {
    hid_t fspace = H5Dget_space(d);
    hsize_t moff = (hsize_t)(len * dim);
    hid_t mspace = H5Screate_simple(1, &moff, NULL);
    if (fixed) {
        hsize_t off[3] = {(hsize_t)utt, 0, 0}, cnt[3] = {1, (hsize_t)len, (hsize_t)dim};
        H5Sselect_hyperslab(fspace, H5S_SELECT_SET, off, NULL, cnt, NULL);
    } else {
        hsize_t off[2] = {(hsize_t)start, 0}, cnt[2] = {(hsize_t)len, (hsize_t)dim};
        H5Sselect_hyperslab(fspace, H5S_SELECT_SET, off, NULL, cnt, NULL);
    }
    h5Check(H5Dwrite(d, H5T_NATIVE_FLOAT, mspace, fspace, H5P_DEFAULT, frames), "%s: cannot write utterance %lld",
            w->path, (long long)utt);
    H5Sclose(mspace);
    H5Sclose(fspace);
}

void dataset_writer_put(dataset_writer_t *w, int64_t utt, const float *frames) {
    put_rows(w, w->features, w->fixed_frames > 0, utt, w->offsets[utt], w->offsets[utt + 1] - w->offsets[utt],
             w->feature_dim, frames);
}

void dataset_writer_add_visual(dataset_writer_t *w, int64_t visual_dim, double frame_rate, double audio_rate,
                               const int64_t *lengths) {
    w->visual_dim = visual_dim;
    w->voffsets = mallocCheck((size_t)(w->num_utts + 1) * sizeof(int64_t));
    w->voffsets[0] = 0;
    for (int64_t i = 0; i < w->num_utts; i++) w->voffsets[i + 1] = w->voffsets[i] + lengths[i];
    h5_attr_write_f64(w->file, "frame_rate", audio_rate, w->path);
    hid_t g = h5Check(H5Gcreate2(w->file, "visual", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "%s: cannot create '/visual'",
                      w->path);
    h5_attr_write_i64(g, "feature_dim", visual_dim, w->path);
    h5_attr_write_f64(g, "frame_rate", frame_rate, w->path);
    H5Gclose(g);
    w->vfeatures = create_features(w->file, "visual/features", w->path, w->num_utts, 0, w->voffsets[w->num_utts], visual_dim);
}

void dataset_writer_put_visual(dataset_writer_t *w, int64_t utt, const float *frames) {
    put_rows(w, w->vfeatures, 0, utt, w->voffsets[utt], w->voffsets[utt + 1] - w->voffsets[utt], w->visual_dim, frames);
}

void dataset_writer_finish(dataset_writer_t *w, const int32_t *labels, const char *const *utt_ids,
                           const char *const *speakers, int64_t num_speakers) {
    hsize_t n = (hsize_t)w->num_utts, n1 = n + 1;
    h5_write_array(w->file, "labels", H5T_STD_I32LE, 1, &n, labels, w->path);
    if (w->fixed_frames == 0) h5_write_array(w->file, "offsets", H5T_STD_I64LE, 1, &n1, w->offsets, w->path);
    if (utt_ids) h5_write_strings(w->file, "utt_ids", utt_ids, w->num_utts, w->path);
    if (speakers) h5_write_strings(w->file, "speakers", speakers, num_speakers, w->path);
    if (w->visual_dim > 0) {
        h5_write_array(w->file, "visual/offsets", H5T_STD_I64LE, 1, &n1, w->voffsets, w->path);
        H5Dclose(w->vfeatures);
    }
    H5Dclose(w->features);
    h5Check(H5Fclose(w->file), "%s: cannot close the dataset file", w->tmp_path);
    if (rename(w->tmp_path, w->path) != 0)
        spk_die(SPK_EXIT_FAILURE, "%s: cannot rename into place (%s)", w->path, strerror(errno));
    free(w->offsets);
    free(w->voffsets);
    memset(w, 0, sizeof *w);
}
