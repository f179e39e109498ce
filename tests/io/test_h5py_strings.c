// Files written by h5py: a Python str becomes a variable-length UTF-8 string (attributes and
// datasets alike), a Python int an int64. Such datasets and embeddings files must read as
// if spkddp had written them. And spkddp's own string arrays: fixed-length where that costs at
// most twice their bytes (out of HDF5's global heap), else variable-length; both read back.
#include "io/common/h5util.h"
#include "io/dataset/dataset.h"
#include "io/scores/embeddings.h"
#include "tests/test_util.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static hid_t utf8_type(void) {
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    return t;
}

static void attr_str(hid_t loc, const char *name, const char *v) {
    hid_t t = utf8_type(), sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(loc, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, t, &v);
    H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(t);
}

static void strings(hid_t loc, const char *name, const char **v, hsize_t n) {
    hid_t t = utf8_type();
    h5_write_array(loc, name, t, 1, &n, v, name);
    H5Tclose(t);
}

// Whether dataset `name` holds variable-length strings.
static int variable(hid_t f, const char *name) {
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT), t = H5Dget_type(d);
    const int v = H5Tis_variable_str(t) > 0;
    H5Tclose(t);
    H5Dclose(d);
    return v;
}

static void own_strings(void) {
    static char longest[20000];
    memset(longest, 'x', sizeof longest - 1);
    const char *names[4] = {"classifier.weight", "", "blocks.0.conv.weight", "é-utt"};
    const char *skewed[4] = {"a", "b", longest, "c"};  // fixed width would take 4 x 20000 bytes
    hid_t f = h5_mem_create("own strings");
    h5_write_strings(f, "names", names, 4, "own strings");
    h5_write_strings(f, "skewed", skewed, 4, "own strings");
    h5_write_strings(f, "none", names, 0, "own strings");
    EXPECT(!variable(f, "names") && variable(f, "skewed") && !variable(f, "none"), "fixed, variable, fixed");
    char **a = h5_read_strings(f, "names", 4), **b = h5_read_strings(f, "skewed", 4);
    for (int i = 0; i < 4; i++) {
        EXPECT(a && strcmp(a[i], names[i]) == 0, "names[%d] reads back", i);
        EXPECT(b && strcmp(b[i], skewed[i]) == 0, "skewed[%d] reads back", i);
    }
    h5_free_strings(a, 4);
    h5_free_strings(b, 4);
    H5Fclose(f);
}

int main(void) {
    h5_quiet();
    enum { N = 3, F = 2 };
    float x[N * 4 * F];
    for (int i = 0; i < N * 4 * F; i++) x[i] = (float)i;
    int64_t labels[N] = {0, 1, 0};
    const char *ids[N] = {"spk0-é1", "spk1-ü1", "spk0-ß2"};  // UTF-8 ids

    hid_t f = h5_mem_create("h5py dataset");
    attr_str(f, "spkddp_format", "features");
    h5_attr_write_i64(f, "version", 1, "h5py");
    h5_attr_write_i64(f, "feature_dim", F, "h5py");
    h5_attr_write_i64(f, "num_speakers", 2, "h5py");
    hsize_t d3[3] = {N, 4, F}, dn = N;
    h5_write_array(f, "features", H5T_NATIVE_FLOAT, 3, d3, x, "h5py");
    h5_write_array(f, "labels", H5T_NATIVE_INT64, 1, &dn, labels, "h5py");  // numpy's default int64
    strings(f, "utt_ids", ids, N);
    char fmt[32] = "";
    EXPECT(h5_attr_read_str(f, "spkddp_format", fmt, sizeof fmt) == 0 && strcmp(fmt, "features") == 0,
           "vlen UTF-8 attribute: '%s'", fmt);
    char **back = h5_read_strings(f, "utt_ids", N);
    EXPECT(back && strcmp(back[1], ids[1]) == 0, "vlen UTF-8 dataset");
    h5_free_strings(back, N);
    dataset_header_t h;
    char err[1024] = "";
    EXPECT(dataset_check(f, "h5py.h5", &h, err, sizeof err) == 0 && h.num_utts == N && h.labels[1] == 1, "dataset: %s",
           err);
    if (!err[0]) dataset_header_free(&h);
    H5Fclose(f);

    char path[] = "/tmp/spkddp_h5py_emb_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    attr_str(f, "spkddp_format", "embeddings");
    h5_attr_write_i64(f, "version", 1, "h5py");
    attr_str(f, "model", "ecapa");
    hsize_t d2[2] = {N, F};
    h5_write_array(f, "embeddings", H5T_NATIVE_FLOAT, 2, d2, x, "h5py");
    strings(f, "utt_ids", ids, N);
    H5Fclose(f);
    embeddings_t e;
    EXPECT(embeddings_read(path, &e, err, sizeof err) == 0 && e.n == N && !e.has_labels &&
               strcmp(e.utt_ids[2], ids[2]) == 0,
           "embeddings: %s", err);
    embeddings_free(&e);
    unlink(path);
    own_strings();
    return test_report("test_h5py_strings");
}
