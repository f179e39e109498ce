// Writes deliberately broken feature datasets for the bad-input tests:
//   make_bad_data KIND OUT.h5
// KIND: no-features features-1d dim-mismatch offsets-not-increasing labels-out-of-range
//       nan-features wrong-format missing-labels labels-length one-huge-utterance
//   make_bad_data corrupt-ckpt CKPT.h5   changes one parameter in place, checksum untouched
//   make_bad_data ulp-features DATA.h5   moves every feature one ulp in place, up and down in turn:
//       the smallest change a dataset can take, against which tools/gpu_check.sh measures how
//       far a model's own rounding sensitivity moves one training step
#include "io/common/h5util.h"
#include "io/dataset/dataset.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int ulp_features(const char *path) {
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t d = f < 0 ? -1 : H5Dopen2(f, "features", H5P_DEFAULT);
    if (d < 0) return 1;
    hid_t s = H5Dget_space(d);
    const hssize_t n = H5Sget_simple_extent_npoints(s);
    float *x = n > 0 ? malloc(sizeof *x * (size_t)n) : NULL;
    int rc = !x || H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, x) < 0;
    for (hssize_t i = 0; !rc && i < n; i++) x[i] = nextafterf(x[i], i % 2 ? INFINITY : -INFINITY);
    rc = rc || H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, x) < 0;
    free(x);
    H5Sclose(s);
    H5Dclose(d);
    return (H5Fclose(f) < 0) || rc;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: make_bad_data KIND OUT.h5\n");
        return 2;
    }
    const char *kind = argv[1], *path = argv[2];
    if (strcmp(kind, "ulp-features") == 0) return ulp_features(path);
    if (strcmp(kind, "corrupt-ckpt") == 0) {  // silent data corruption of a stored parameter
        hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
        hid_t d = f < 0 ? -1 : H5Dopen2(f, "params", H5P_DEFAULT);
        if (d < 0) return 1;
        hid_t fs = H5Dget_space(d);
        hsize_t off = 1, one = 1;
        hid_t ms = H5Screate_simple(1, &one, NULL);
        H5Sselect_hyperslab(fs, H5S_SELECT_SET, &off, NULL, &one, NULL);
        float v;
        H5Dread(d, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, &v);
        v += 1.0f;
        H5Dwrite(d, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, &v);
        H5Sclose(ms);
        H5Sclose(fs);
        H5Dclose(d);
        H5Fclose(f);
        return 0;
    }
    enum { N = 8, T = 10, F = 4 };
    float x[N * T * F];
    for (int i = 0; i < N * T * F; i++) x[i] = (float)(i % 17) * 0.1f;
    int32_t lab[N];
    for (int i = 0; i < N; i++) lab[i] = i % 2;
    int64_t off[N + 1];
    for (int i = 0; i <= N; i++) off[i] = i * T;

    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (f < 0) return 1;
    h5_attr_write_str(f, "spkddp_format", strcmp(kind, "wrong-format") == 0 ? "something" : DATASET_FORMAT, path);
    h5_attr_write_i64(f, "version", DATASET_VERSION, path);
    h5_attr_write_i64(f, "feature_dim", strcmp(kind, "dim-mismatch") == 0 ? F + 1 : F, path);
    h5_attr_write_i64(f, "num_speakers", 2, path);
    hsize_t d2[2] = {N * T, F}, d1 = N * T * F, dn = N, dn1 = N + 1;
    if (strcmp(kind, "nan-features") == 0) x[5 * T * F + 3 * F + 2] = NAN;  // utterance 5, frame 3, dim 2
    if (strcmp(kind, "one-huge-utterance") == 0)  // finite, but utterance 5's logits overflow: one bad step
        for (int i = 5 * T * F; i < 6 * T * F; i++) x[i] = 3e38f;
    if (strcmp(kind, "features-1d") == 0)
        h5_write_array(f, "features", H5T_NATIVE_FLOAT, 1, &d1, x, path);
    else if (strcmp(kind, "no-features") != 0)
        h5_write_array(f, "features", H5T_NATIVE_FLOAT, 2, d2, x, path);
    if (strcmp(kind, "offsets-not-increasing") == 0) off[4] = off[3];
    h5_write_array(f, "offsets", H5T_NATIVE_INT64, 1, &dn1, off, path);
    if (strcmp(kind, "labels-out-of-range") == 0) lab[6] = 7;
    if (strcmp(kind, "labels-length") == 0) dn = N - 1;
    if (strcmp(kind, "missing-labels") != 0) h5_write_array(f, "labels", H5T_NATIVE_INT32, 1, &dn, lab, path);
    H5Fclose(f);
    return 0;
}
