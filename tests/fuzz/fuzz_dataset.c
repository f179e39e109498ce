// libFuzzer target: the feature-dataset reader (dataset_check, the rank-0 half of
// dataset_open) on datasets built from the input (fuzz_build.h). It must either accept the
// file with every promise of io/dataset/dataset.h holding, or refuse it with one sentence naming the
// file -- never crash, never read out of bounds.
#include "io/dataset/dataset.h"
#include "tests/fuzz/fuzz_build.h"

#include <math.h>
#include <stdio.h>

enum { MAX_N = 12, MAX_LEN = 12, MAX_F = 6 };

// One stream: features and (variable length) offsets in group g ("" or "visual/").
static void build_stream(fz_t *in, hid_t f, const char *g, int64_t n, int64_t dim, const int64_t *len, int variable) {
    char name[64];
    static float x[MAX_N * MAX_LEN * MAX_F];
    int64_t off[MAX_N + 1] = {0};
    for (int64_t i = 0; i < n; i++) off[i + 1] = off[i] + len[i];
    int rank = variable ? 2 : 3;
    hsize_t dims[4] = {(hsize_t)n, (hsize_t)len[0], (hsize_t)dim, 1};
    if (variable) dims[0] = (hsize_t)off[n], dims[1] = (hsize_t)dim;
    int shape = fz_pick(in, 8);  // 0-3 as built, else one dimension or the rank changed
    if (shape == 4) dims[0] = (hsize_t)fz_int(in, (int64_t)dims[0]);
    if (shape == 5) dims[rank - 1] = (hsize_t)fz_int(in, dim);
    if (shape == 6) rank = 1 + fz_pick(in, 4);
    const hid_t ftypes[] = {H5T_IEEE_F32LE, H5T_IEEE_F64LE, H5T_STD_I32LE, H5T_IEEE_F32BE};
    snprintf(name, sizeof name, "%sfeatures", g);
    if (shape != 7)
        fz_dataset(f, name, ftypes[fz_pick(in, 4)], H5T_NATIVE_FLOAT, rank, dims, x, sizeof x / sizeof x[0],
                   fz_pick(in, FZ_STORAGES));
    if (!variable) return;
    for (int k = fz_pick(in, 4); k > 0; k--) {  // edits of the offsets
        int64_t i = fz_pick(in, (int)n + 1);
        off[i] = fz_int(in, off[i]);
    }
    hsize_t on = (hsize_t)n + 1;
    int len_pick = fz_pick(in, 6);
    if (len_pick == 4) on = (hsize_t)fz_int(in, (int64_t)on) & 0xff;
    snprintf(name, sizeof name, "%soffsets", g);
    if (len_pick != 5)
        fz_dataset(f, name, fz_num_type(in, H5T_STD_I64LE), H5T_NATIVE_INT64, 1, &on, off, (size_t)n + 1,
                   fz_pick(in, FZ_STORAGES));
}

static void build(fz_t *in, hid_t f) {
    const int64_t n = fz_pick(in, 7) == 6 ? 0 : 1 + fz_pick(in, MAX_N);
    const int64_t dim = 1 + fz_pick(in, MAX_F), speakers = 1 + fz_pick(in, 4);
    const int variable = fz_pick(in, 3) != 2;
    int64_t len[MAX_N + 1], vlen[MAX_N + 1];
    for (int64_t i = 0; i < MAX_N; i++) len[i] = variable ? 1 + fz_pick(in, MAX_LEN) : MAX_LEN / 2;

    const char *formats[] = {"features", "features", "feature", "checkpoint"};
    int fs = fz_pick(in, 6);
    if (fs < 4)
        fz_attr_str(f, "spkddp_format", formats[fs], fs == 1);
    else if (fs == 4)
        fz_attr_i64(f, "spkddp_format", H5T_STD_I64LE, 1);
    int vs = fz_pick(in, 5);
    if (vs < 3)
        fz_attr_i64(f, "version", fz_num_type(in, H5T_STD_I64LE), vs == 0 ? 1 : fz_int(in, 1));
    else if (vs == 3)
        fz_attr_str(f, "version", "1", 0);
    if (fz_pick(in, 9) != 8) fz_attr_i64(f, "feature_dim", fz_num_type(in, H5T_STD_I64LE), fz_int(in, dim));
    if (fz_pick(in, 9) != 8) fz_attr_i64(f, "num_speakers", fz_num_type(in, H5T_STD_I64LE), fz_int(in, speakers));
    const double rates[] = {100, 50, 0, NAN, -5, INFINITY, 1e300};
    int rs = fz_pick(in, 9);
    if (rs > 0 && rs < 8) fz_attr_num(f, "frame_rate", H5T_IEEE_F64LE, rates[rs - 1]);
    if (rs == 8) fz_attr_str(f, "frame_rate", "100", 0);

    build_stream(in, f, "", n, dim, len, variable);

    int32_t lab[MAX_N] = {0};
    for (int64_t i = 0; i < n; i++) lab[i] = (int32_t)(i % speakers);
    for (int k = fz_pick(in, 3); k > 0; k--) lab[fz_pick(in, MAX_N)] = (int32_t)fz_int(in, 0);
    hsize_t ln = (hsize_t)n;
    if (fz_pick(in, 6) == 5) ln = (hsize_t)(fz_u8(in) % (MAX_N + 1));
    int lp = fz_pick(in, 10);
    if (lp < 9)
        fz_dataset(f, "labels", fz_num_type(in, H5T_STD_I32LE), H5T_NATIVE_INT32, lp == 8 ? 2 : 1, (hsize_t[]){ln, 1},
                   lab, MAX_N, fz_pick(in, FZ_STORAGES));

    const char *words[] = {"u0", "u1", "u2",  "u3",  "u4", "u5",  "u6", "u7",
                           "u8", "u9", "u10", "u11", "",   "a b", "u1", "\xc3\xa9\xc3\x9f"};
    const char *ids[MAX_N];
    for (int64_t i = 0; i < MAX_N; i++) ids[i] = words[i];
    for (int k = fz_pick(in, 3); k > 0; k--) ids[fz_pick(in, MAX_N)] = words[fz_pick(in, 16)];
    int ip = fz_pick(in, 6);
    if (ip < 3) fz_strings(f, "utt_ids", ids, MAX_N, (hsize_t)n, ip);
    if (ip == 3) fz_strings(f, "utt_ids", ids, MAX_N, (hsize_t)(fz_u8(in) % (MAX_N + 3)), 0);
    if (ip == 4) fz_dataset(f, "utt_ids", H5T_STD_I32LE, H5T_NATIVE_INT32, 1, &ln, lab, MAX_N, FZ_CONTIGUOUS);

    int vis = fz_pick(in, 4);
    if (vis == 3) fz_dataset(f, "visual", H5T_STD_I32LE, H5T_NATIVE_INT32, 1, &ln, lab, MAX_N, FZ_CONTIGUOUS);
    if (vis != 1 && vis != 2) return;
    hid_t g = H5Gcreate2(f, "visual", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const int64_t vdim = 1 + fz_pick(in, MAX_F), ratio = 1 + fz_pick(in, 4);
    if (fz_pick(in, 9) != 8) fz_attr_i64(g, "feature_dim", fz_num_type(in, H5T_STD_I64LE), fz_int(in, vdim));
    int vr = fz_pick(in, 9);
    if (vr == 0)
        fz_attr_num(g, "frame_rate", H5T_IEEE_F64LE, 100.0 / (double)ratio);
    else if (vr < 8)
        fz_attr_num(g, "frame_rate", H5T_IEEE_F64LE, rates[vr - 1] / 3);
    H5Gclose(g);
    for (int64_t i = 0; i < MAX_N; i++) vlen[i] = (len[i] + ratio - 1) / ratio + fz_pick(in, 2) - fz_pick(in, 2);
    for (int64_t i = 0; i < MAX_N; i++) vlen[i] = vlen[i] < 1 ? 1 : vlen[i];
    build_stream(in, f, "visual/", n, vdim, vlen, vis == 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_t in = {data, size};
    hid_t f = fz_file();
    build(&in, f);
    dataset_header_t h;
    char err[1024] = "";
    int rc = dataset_check(f, "fuzz.h5", &h, err, sizeof err);
    if (getenv("SPKDDP_FUZZ_SAY")) fprintf(stderr, "%s\n", rc ? err : "accepted");  // what a reproduced input does
    if (rc == 0) {
        const int64_t n = h.num_utts;
        FZ_REQUIRE(n >= 1 && n <= DATASET_MAX_UTTS && h.num_speakers >= 1 && h.num_speakers <= DATASET_MAX_SPEAKERS);
        FZ_REQUIRE(h.audio.dim >= 1 && h.audio.dim <= DATASET_MAX_DIM && h.offsets[0] == 0);
        for (int64_t i = 0; i < n; i++)
            FZ_REQUIRE(h.offsets[i + 1] > h.offsets[i] && h.labels[i] >= 0 && h.labels[i] < h.num_speakers);
        for (int64_t i = 0; h.has_visual && i < n; i++)
            FZ_REQUIRE(h.voffsets[i + 1] > h.voffsets[i] &&
                       h.voffsets[i + 1] - h.voffsets[i] >= (h.offsets[i + 1] - h.offsets[i]) / h.visual_ratio);
        dataset_header_free(&h);
    } else {
        FZ_REQUIRE(strncmp(err, "fuzz.h5: ", 9) == 0 && strlen(err) > 10 && !strchr(err, '\n'));
    }
    H5Fclose(f);
    return 0;
}
