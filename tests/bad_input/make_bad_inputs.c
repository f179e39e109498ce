// The malformed inputs of the bad-input battery (tests/bad_input/cases.txt):
//   make_bad_inputs base DIR    valid bases: DIR/base.h5 (variable length, /utt_ids),
//                               DIR/base_av.h5 (with a /visual stream), DIR/base6.h5 (fixed
//                               length, feature_dim 6)
//   (run_battery.sh adds DIR/good_ckpt.h5, DIR/good_emb.h5 and DIR/v1_ckpt.h5, a format 1
//   checkpoint from tests/fixtures)
//   make_bad_inputs mutate DIR  every bad variant, each DIR/<case>.h5 or .txt, made from those
// Checkpoint variants marked "sealed" get a valid checksum again, so the reader's structural
// checks are what must catch them, not the checksum.
#include "io/ckpt/ckpt_checksum.h"
#include "io/common/h5util.h"
#include "io/dataset/dataset.h"
#include "io/video/image_jpeg.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 8, F = 4, S = 2 };
static char dir[2048];

static const char *at(const char *name) {
    static char buf[4][4096];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static void die(const char *what) {
    fprintf(stderr, "make_bad_inputs: %s\n", what);
    exit(1);
}

// ---- editing helpers ------------------------------------------------------------------------

static void del(hid_t loc, const char *name) {
    if (H5Aexists(loc, name) > 0)
        H5Adelete(loc, name);
    else if (H5Lexists(loc, name, H5P_DEFAULT) > 0)
        H5Ldelete(loc, name, H5P_DEFAULT);
}

static void put(hid_t loc, const char *name, hid_t type, int rank, const hsize_t *dims, const void *data) {
    del(loc, name);
    h5_write_array(loc, name, type, rank, dims, data, name);
}

// A contiguous dataset that declares its size but was never written.
static void put_unstored(hid_t loc, const char *name, hid_t type, int rank, const hsize_t *dims) {
    del(loc, name);
    hid_t sp = H5Screate_simple(rank, dims, NULL);
    hid_t d = H5Dcreate2(loc, name, type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (d < 0) die(name);
    H5Dclose(d);
    H5Sclose(sp);
}

static void put_strings(hid_t loc, const char *name, const char **s, hsize_t n) {
    del(loc, name);
    h5_write_strings(loc, name, s, (int64_t)n, name);
}

static void set_u64(hid_t loc, const char *name, uint64_t v) {
    del(loc, name);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(loc, name, H5T_STD_U64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_UINT64, &v);
    H5Aclose(a);
    H5Sclose(sp);
}

static void copy_file(const char *from, const char *to, long limit) {
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    if (!a || !b) die(from);
    char buf[4096];
    size_t n;
    long done = 0;
    while ((n = fread(buf, 1, sizeof buf, a)) > 0 && (limit < 0 || done < limit)) {
        if (limit >= 0 && done + (long)n > limit) n = (size_t)(limit - done);
        fwrite(buf, 1, n, b);
        done += (long)n;
    }
    fclose(a);
    if (fclose(b) != 0) die(to);
}

static void write_text(const char *name, const char *text, size_t len) {
    FILE *f = fopen(at(name), "wb");
    if (!f || fwrite(text, 1, len, f) != len || fclose(f) != 0) die(name);
}

// The format 2 checksum, recomputed after an edit.
static void reseal(hid_t f) {
    uint64_t sum;
    char err[256];
    if (ckpt_checksum_v2(f, &sum, err, sizeof err) != 0) die(err);
    int64_t s;
    memcpy(&s, &sum, sizeof s);
    h5_attr_write_i64(f, "checksum", s, "reseal");
}

// ---- bases --------------------------------------------------------------------------------

static int64_t off[N + 1], voff[N + 1];
static float x[200 * F];
static int32_t lab[N];
static const char *ids[N] = {"u0", "u1", "u2", "u3", "u4", "u5", "u6", "u7"};

static void base_arrays(void) {
    off[0] = voff[0] = 0;
    for (int i = 0; i < N; i++) {
        off[i + 1] = off[i] + 10 + i;
        voff[i + 1] = voff[i] + (10 + i + 3) / 4;
        lab[i] = i % S;
    }
    for (int i = 0; i < 200 * F; i++) x[i] = (float)((i * 37) % 23) * 0.1f - 1.0f;
}

static void write_base(const char *name, int visual, int fixed_dim) {
    hid_t f = H5Fcreate(at(name), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (f < 0) die(name);
    int dim = fixed_dim ? fixed_dim : F;
    h5_attr_write_str(f, "spkddp_format", DATASET_FORMAT, name);
    h5_attr_write_i64(f, "version", DATASET_VERSION, name);
    h5_attr_write_i64(f, "feature_dim", dim, name);
    h5_attr_write_i64(f, "num_speakers", S, name);
    hsize_t dn = N, dn1 = N + 1;
    if (fixed_dim) {
        hsize_t d3[3] = {N, 10, (hsize_t)dim};
        h5_write_array(f, "features", H5T_NATIVE_FLOAT, 3, d3, x, name);
    } else {
        hsize_t d2[2] = {(hsize_t)off[N], F};
        h5_write_array(f, "features", H5T_NATIVE_FLOAT, 2, d2, x, name);
        h5_write_array(f, "offsets", H5T_NATIVE_INT64, 1, &dn1, off, name);
    }
    h5_write_array(f, "labels", H5T_NATIVE_INT32, 1, &dn, lab, name);
    h5_write_strings(f, "utt_ids", ids, N, name);
    if (visual) {
        hid_t g = H5Gcreate2(f, "visual", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        h5_attr_write_i64(g, "feature_dim", 3, name);
        h5_attr_write_f64(g, "frame_rate", 25.0, name);
        hsize_t v2[2] = {(hsize_t)voff[N], 3};
        h5_write_array(g, "features", H5T_NATIVE_FLOAT, 2, v2, x, name);
        h5_write_array(g, "offsets", H5T_NATIVE_INT64, 1, &dn1, voff, name);
        H5Gclose(g);
    }
    H5Fclose(f);
}

// ---- mutations ------------------------------------------------------------------------------

typedef void (*mutate_fn)(hid_t f);

// Datasets.
static void ds_no_format(hid_t f) { del(f, "spkddp_format"); }
static void ds_format_wrong(hid_t f) { h5_attr_write_str(f, "spkddp_format", "something", "x"); }
static void ds_format_int(hid_t f) { del(f, "spkddp_format"), h5_attr_write_i64(f, "spkddp_format", 1, "x"); }
static void ds_no_version(hid_t f) { del(f, "version"); }
static void ds_version_2(hid_t f) { h5_attr_write_i64(f, "version", 2, "x"); }
static void ds_version_str(hid_t f) { del(f, "version"), h5_attr_write_str(f, "version", "1", "x"); }
static void ds_no_feature_dim(hid_t f) { del(f, "feature_dim"); }
static void ds_feature_dim_0(hid_t f) { h5_attr_write_i64(f, "feature_dim", 0, "x"); }
static void ds_feature_dim_float(hid_t f) { del(f, "feature_dim"), h5_attr_write_f64(f, "feature_dim", 4.0, "x"); }
static void ds_feature_dim_huge(hid_t f) { h5_attr_write_i64(f, "feature_dim", 1 << 20, "x"); }
static void ds_no_num_speakers(hid_t f) { del(f, "num_speakers"); }
static void ds_num_speakers_0(hid_t f) { h5_attr_write_i64(f, "num_speakers", 0, "x"); }
static void ds_num_speakers_int32max(hid_t f) { h5_attr_write_i64(f, "num_speakers", INT32_MAX, "x"); }
static void ds_num_speakers_2_24(hid_t f) { h5_attr_write_i64(f, "num_speakers", DATASET_MAX_SPEAKERS, "x"); }
static void ds_num_speakers_u64(hid_t f) { set_u64(f, "num_speakers", (1ull << 63) + 5); }
static void ds_frame_rate_neg(hid_t f) { h5_attr_write_f64(f, "frame_rate", -100, "x"); }
static void ds_no_features(hid_t f) { del(f, "features"); }
static void ds_features_group(hid_t f) {
    del(f, "features"), H5Gclose(H5Gcreate2(f, "features", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
}
static void ds_features_1d(hid_t f) { put(f, "features", H5T_NATIVE_FLOAT, 1, (hsize_t[]){(hsize_t)off[N] * F}, x); }
static void ds_features_4d(hid_t f) {
    put(f, "features", H5T_NATIVE_FLOAT, 4, (hsize_t[]){1, (hsize_t)off[N], 1, F}, x);
}
static void ds_features_int(hid_t f) {
    int32_t *v = calloc((size_t)off[N] * F, sizeof *v);
    put(f, "features", H5T_NATIVE_INT32, 2, (hsize_t[]){(hsize_t)off[N], F}, v);
    free(v);
}
static void ds_features_dim_mismatch(hid_t f) {
    put(f, "features", H5T_NATIVE_FLOAT, 2, (hsize_t[]){(hsize_t)off[N] * F / 5, 5}, x);
}
// Claims 2^36 frames (1 TiB) in a file of a few KiB.
static void ds_features_unstored(hid_t f) {
    int64_t huge[N + 1];
    for (int i = 0; i <= N; i++) huge[i] = ((int64_t)1 << 36) / N * i;
    put_unstored(f, "features", H5T_IEEE_F32LE, 2, (hsize_t[]){(hsize_t)huge[N], F});
    put(f, "offsets", H5T_NATIVE_INT64, 1, (hsize_t[]){N + 1}, huge);
}
static void ds_fixed_zero_frames(hid_t f) { put(f, "features", H5T_NATIVE_FLOAT, 3, (hsize_t[]){N, 0, 6}, x); }
static void ds_fixed_zero_utts(hid_t f) { put(f, "features", H5T_NATIVE_FLOAT, 3, (hsize_t[]){0, 10, 6}, x); }
static void ds_no_offsets(hid_t f) { del(f, "offsets"); }
static void ds_offsets_2d(hid_t f) { put(f, "offsets", H5T_NATIVE_INT64, 2, (hsize_t[]){N + 1, 1}, off); }
static void ds_offsets_float(hid_t f) {
    double d[N + 1];
    for (int i = 0; i <= N; i++) d[i] = (double)off[i] + 0.5;
    put(f, "offsets", H5T_NATIVE_DOUBLE, 1, (hsize_t[]){N + 1}, d);
}
// No utterances: /offsets = [0] is the N+1 = 1 entries it should be.
static void ds_offsets_one_entry(hid_t f) {
    put(f, "features", H5T_NATIVE_FLOAT, 2, (hsize_t[]){0, F}, x);
    put(f, "offsets", H5T_NATIVE_INT64, 1, (hsize_t[]){1}, off);
    put(f, "labels", H5T_NATIVE_INT32, 1, (hsize_t[]){0}, lab);
    del(f, "utt_ids");
}
static void ds_offsets_not_zero(hid_t f) {
    int64_t o[N + 1];
    memcpy(o, off, sizeof o);
    o[0] = 5;
    put(f, "offsets", H5T_NATIVE_INT64, 1, (hsize_t[]){N + 1}, o);
}
static void ds_offsets_not_increasing(hid_t f) {
    int64_t o[N + 1];
    memcpy(o, off, sizeof o);
    o[4] = o[3];
    put(f, "offsets", H5T_NATIVE_INT64, 1, (hsize_t[]){N + 1}, o);
}
static void ds_offsets_end(hid_t f) {
    int64_t o[N + 1];
    memcpy(o, off, sizeof o);
    o[N] -= 1;
    put(f, "offsets", H5T_NATIVE_INT64, 1, (hsize_t[]){N + 1}, o);
}
static void ds_offsets_u64_huge(hid_t f) {
    uint64_t o[N + 1];
    for (int i = 0; i <= N; i++) o[i] = (uint64_t)off[i];
    o[N] = (1ull << 63) + 1;
    put(f, "offsets", H5T_NATIVE_UINT64, 1, (hsize_t[]){N + 1}, o);
}
static void ds_no_labels(hid_t f) { del(f, "labels"); }
static void ds_labels_2d(hid_t f) { put(f, "labels", H5T_NATIVE_INT32, 2, (hsize_t[]){N, 1}, lab); }
static void ds_labels_float(hid_t f) {
    double d[N];
    for (int i = 0; i < N; i++) d[i] = (i % 2) + 0.5;  // 0.5, 1.5, ...
    put(f, "labels", H5T_NATIVE_DOUBLE, 1, (hsize_t[]){N}, d);
}
static void ds_labels_length(hid_t f) { put(f, "labels", H5T_NATIVE_INT32, 1, (hsize_t[]){N - 1}, lab); }
static void ds_labels_negative(hid_t f) {
    int32_t l[N];
    memcpy(l, lab, sizeof l);
    l[2] = -1;
    put(f, "labels", H5T_NATIVE_INT32, 1, (hsize_t[]){N}, l);
}
static void ds_labels_too_big(hid_t f) {
    int32_t l[N];
    memcpy(l, lab, sizeof l);
    l[6] = S;
    put(f, "labels", H5T_NATIVE_INT32, 1, (hsize_t[]){N}, l);
}
static void ds_labels_int64_huge(hid_t f) {
    int64_t l[N] = {(int64_t)1 << 40};
    put(f, "labels", H5T_NATIVE_INT64, 1, (hsize_t[]){N}, l);
}
static void ds_labels_unstored(hid_t f) { put_unstored(f, "labels", H5T_STD_I32LE, 1, (hsize_t[]){N}); }
static void set_frame(hid_t f, float v) {
    float y[200 * F];
    memcpy(y, x, sizeof y);
    y[(off[5] + 3) * F + 2] = v;  // utterance 5, frame 3, dim 2
    put(f, "features", H5T_NATIVE_FLOAT, 2, (hsize_t[]){(hsize_t)off[N], F}, y);
}
static void ds_nan_features(hid_t f) { set_frame(f, NAN); }
// Finite, but every logit overflows: the loss is NaN, the run stops (exit 5).
static void ds_huge_values(hid_t f) {
    float y[200 * F];
    for (int i = 0; i < 200 * F; i++) y[i] = i % 2 ? 3e38f : -3e38f;
    put(f, "features", H5T_NATIVE_FLOAT, 2, (hsize_t[]){(hsize_t)off[N], F}, y);
}
static void ds_inf_features(hid_t f) { set_frame(f, -INFINITY); }
static void ds_utt_ids_length(hid_t f) { put_strings(f, "utt_ids", ids, N - 1); }
static void ds_utt_ids_dup(hid_t f) {
    const char *s[N] = {"u0", "u1", "u2", "u3", "u1", "u5", "u6", "u7"};
    put_strings(f, "utt_ids", s, N);
}
static void ds_utt_ids_space(hid_t f) {
    const char *s[N] = {"u0", "u1", "u2", "u 3", "u4", "u5", "u6", "u7"};
    put_strings(f, "utt_ids", s, N);
}
static void ds_utt_ids_empty(hid_t f) {
    const char *s[N] = {"", "u1", "u2", "u3", "u4", "u5", "u6", "u7"};
    put_strings(f, "utt_ids", s, N);
}
static void ds_utt_ids_int(hid_t f) { put(f, "utt_ids", H5T_NATIVE_INT32, 1, (hsize_t[]){N}, lab); }
static void ds_visual_not_group(hid_t f) { put(f, "visual", H5T_NATIVE_INT32, 1, (hsize_t[]){N}, lab); }
static void with_visual(hid_t f, void (*edit)(hid_t g)) {
    hid_t g = H5Gopen2(f, "visual", H5P_DEFAULT);
    edit(g);
    H5Gclose(g);
}
static void no_vdim(hid_t g) { del(g, "feature_dim"); }
static void vrate_0(hid_t g) { h5_attr_write_f64(g, "frame_rate", 0, "x"); }
static void vrate_nan(hid_t g) { h5_attr_write_f64(g, "frame_rate", NAN, "x"); }
static void no_vrate(hid_t g) { del(g, "frame_rate"); }
static void vrate_30(hid_t g) { h5_attr_write_f64(g, "frame_rate", 30, "x"); }
static void no_vfeatures(hid_t g) { del(g, "features"); }
static void vdim_mismatch(hid_t g) { h5_attr_write_i64(g, "feature_dim", 2, "x"); }
static void vcount(hid_t g) {
    int64_t v[N];
    memcpy(v, voff, sizeof v);
    v[N - 1] = voff[N];
    put(g, "offsets", H5T_NATIVE_INT64, 1, (hsize_t[]){N}, v);
}
static void vshort(hid_t g) {
    int64_t v[N + 1];
    for (int i = 0; i <= N; i++) v[i] = i * 2;  // 2 visual frames for >= 10 audio frames (need >= 2.5)
    hsize_t d2[2] = {2 * N, 3};
    put(g, "features", H5T_NATIVE_FLOAT, 2, d2, x);
    put(g, "offsets", H5T_NATIVE_INT64, 1, (hsize_t[]){N + 1}, v);
}
// The visual stream as pictures (18 x 18 RGB JPEG frames, docs/dataset-format.md), then edited
// by `how`; 0: utterance 5's frames are junk bytes (each a 4-byte length of 8 and 8 bytes that
// are no JPEG), the others' are sound.
static void pictures(hid_t g, int how) {
    del(g, "features");
    h5_attr_write_i64(g, "feature_dim", 18 * 18 * 3, "x");
    h5_attr_write_str(g, "encoding", how == 1 ? "png" : "jpeg", "x");
    h5_attr_write_i64(g, "image_size", how == 2 ? 19 : 18, "x");
    h5_attr_write_i64(g, "image_channels", how == 3 ? 2 : 3, "x");
    static uint8_t pix[18 * 18 * 3], bytes[1 << 16];
    for (int j = 0; j < 18 * 18 * 3; j++) pix[j] = (uint8_t)(j * 7);
    jpeg_codec_t *c = jpeg_codec_create();
    const uint8_t *jpg;
    size_t len, used = 0;
    char err[256];
    if (!c || jpeg_encode(c, pix, 18, 3, 90, &jpg, &len, err, sizeof err) != 0) die("a JPEG picture");
    int64_t joff[N + 1] = {0};
    for (int i = 0; i < N; i++) {
        for (int64_t t = voff[i]; t < voff[i + 1]; t++) {
            const size_t n = i == 5 ? 8 : len;
            if (used + 4 + n > sizeof bytes) die("picture bytes");
            bytes[used] = (uint8_t)n, bytes[used + 1] = (uint8_t)(n >> 8), bytes[used + 2] = bytes[used + 3] = 0;
            if (i == 5)
                memset(bytes + used + 4, 0x5a, n);
            else
                memcpy(bytes + used + 4, jpg, n);
            used += 4 + n;
        }
        joff[i + 1] = (int64_t)used;
    }
    jpeg_codec_free(c);
    if (how != 4) put(g, "jpeg", H5T_NATIVE_UINT8, 1, (hsize_t[]){(hsize_t)used}, bytes);
    put(g, "jpeg_offsets", H5T_NATIVE_INT64, 1, (hsize_t[]){how == 5 ? N : N + 1}, joff);
}
static void pic_encoding(hid_t g) { pictures(g, 1); }
static void pic_shape(hid_t g) { pictures(g, 2); }
static void pic_channels(hid_t g) { pictures(g, 3); }
static void pic_no_jpeg(hid_t g) { pictures(g, 4); }
static void pic_offsets(hid_t g) { pictures(g, 5); }
static void pic_damaged(hid_t g) { pictures(g, 0); }
#define VISUAL(name, edit) \
    static void name(hid_t f) { with_visual(f, edit); }
VISUAL(ds_visual_no_dim, no_vdim)
VISUAL(ds_visual_rate_0, vrate_0)
VISUAL(ds_visual_rate_nan, vrate_nan)
VISUAL(ds_visual_no_rate, no_vrate)
VISUAL(ds_visual_rate_30, vrate_30)
VISUAL(ds_visual_no_features, no_vfeatures)
VISUAL(ds_visual_dim_mismatch, vdim_mismatch)
VISUAL(ds_visual_count, vcount)
VISUAL(ds_visual_short, vshort)
VISUAL(ds_pictures_encoding, pic_encoding)
VISUAL(ds_pictures_shape, pic_shape)
VISUAL(ds_pictures_channels, pic_channels)
VISUAL(ds_pictures_no_jpeg, pic_no_jpeg)
VISUAL(ds_pictures_offsets, pic_offsets)
VISUAL(ds_pictures_damaged, pic_damaged)

// Checkpoints (from good_ckpt.h5, a linear model: fc.weight [2, 4], fc.bias [2]).
static void ck_no_format(hid_t f) { del(f, "spkddp_format"); }
static void ck_version_3(hid_t f) { h5_attr_write_i64(f, "version", 3, "x"); }
static void ck_no_checksum(hid_t f) { del(f, "checksum"); }
// The lowest bit of the second parameter.
static void ck_param_flip(hid_t f) {
    hsize_t n;
    float p[64];
    if (h5_dataset_shape(f, "params", &n, 1) != 1 || n > 64) die("params of more than 64 floats");
    h5_read_array(f, "params", H5T_NATIVE_FLOAT, p, "x");
    uint32_t bits;
    memcpy(&bits, &p[1], 4);
    bits ^= 1;
    memcpy(&p[1], &bits, 4);
    put(f, "params", H5T_IEEE_F32LE, 1, &n, p);
}
static void ck_v1_param_flip(hid_t f) { ck_param_flip(f); }
static void ck_ep_loss_flip(hid_t f) {
    double v;
    h5_attr_read_f64(f, "ep_loss_sum", &v);
    uint64_t bits;
    memcpy(&bits, &v, 8);
    bits ^= 1ull << 52;  // the lowest exponent bit: 1.27 becomes 0.63 or 2.5
    memcpy(&v, &bits, 8);
    h5_attr_write_f64(f, "ep_loss_sum", v, "x");
}
static void ck_seed_changed(hid_t f) { h5_attr_write_i64(f, "seed", 5, "x"); }
static void ck_world_size_changed(hid_t f) { h5_attr_write_i64(f, "world_size", 3, "x"); }
static void ck_config_changed(hid_t f) {
    char c[CKPT_CONFIG_MAX];
    h5_attr_read_str(f, "config", c, sizeof c);
    c[0] = c[0] == 'x' ? 'y' : 'x';
    h5_attr_write_str(f, "config", c, "x");
}
static void ck_extra_dataset(hid_t f) { put(f, "extra", H5T_NATIVE_INT32, 1, (hsize_t[]){N}, lab); }
static void ck_names_longer(hid_t f) {
    const char *s[3] = {"fc.weight", "fc.bias", "fc.extra"};
    put_strings(f, "param_names", s, 3);
    reseal(f);
}
static void ck_names_shorter(hid_t f) {
    const char *s[1] = {"fc.weight"};
    put_strings(f, "param_names", s, 1);
    reseal(f);
}
static void layout(hid_t f, const int64_t *rows, hsize_t n, hsize_t cols) {
    put(f, "param_layout", H5T_NATIVE_INT64, 2, (hsize_t[]){n, cols}, rows);
    reseal(f);
}
static void ck_layout_huge(hid_t f) {
    layout(f, (int64_t[]){0, 2, (int64_t)1 << 40, (int64_t)1 << 40, 0, 0, 8, 1, 2, 0, 0, 0}, 2, 6);
}
static void ck_layout_ndim0(hid_t f) { layout(f, (int64_t[]){0, 0, 2, 4, 0, 0, 8, 1, 2, 0, 0, 0}, 2, 6); }
static void ck_layout_negative(hid_t f) { layout(f, (int64_t[]){0, 2, -2, -4, 0, 0, 8, 1, 2, 0, 0, 0}, 2, 6); }
static void ck_layout_wrong_cols(hid_t f) { layout(f, (int64_t[]){0, 2, 2, 4, 0, 8, 1, 2, 0, 0}, 2, 5); }
static void ck_long_name(hid_t f) {
    const char *s[2] = {"fc.weight.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "fc.bias"};
    put_strings(f, "param_names", s, 2);
    reseal(f);
}
static void ck_params_short(hid_t f) {
    float p[10] = {0};
    put(f, "params", H5T_IEEE_F32LE, 1, (hsize_t[]){9}, p);
    reseal(f);
}
static void ck_params_int(hid_t f) {
    int32_t p[10] = {0};
    put(f, "params", H5T_NATIVE_INT32, 1, (hsize_t[]){10}, p);
    reseal(f);
}
static void ck_no_params(hid_t f) {
    del(f, "params");
    reseal(f);
}
static void ck_slots_bad(hid_t f) {
    float p[22] = {0};
    put(f, "optimizer_slots", H5T_IEEE_F32LE, 2, (hsize_t[]){2, 11}, p);
    reseal(f);
}
static void ck_nan_param(hid_t f) {
    float p[10];
    h5_read_array(f, "params", H5T_NATIVE_FLOAT, p, "x");
    p[9] = NAN;
    put(f, "params", H5T_IEEE_F32LE, 1, (hsize_t[]){10}, p);
    reseal(f);
}
static void sealed_i64(hid_t f, const char *name, int64_t v) {
    h5_attr_write_i64(f, name, v, "x");
    reseal(f);
}
static void ck_world_size_0(hid_t f) { sealed_i64(f, "world_size", 0); }
static void ck_ep_correct_gt_count(hid_t f) {
    int64_t count;
    h5_attr_read_i64(f, "ep_count", &count);
    sealed_i64(f, "ep_correct", count + 1);
}
static void ck_num_classes_huge(hid_t f) { sealed_i64(f, "num_classes", INT32_MAX); }
static void ck_feature_dim_0(hid_t f) { sealed_i64(f, "feature_dim", 0); }
static void ck_negative_step(hid_t f) { sealed_i64(f, "global_step", -3); }
static void ck_model_empty(hid_t f) {
    h5_attr_write_str(f, "model", "", "x");
    reseal(f);
}
static void ck_config_not_string(hid_t f) {
    del(f, "config");
    sealed_i64(f, "config", 1);
}
static void ck_soft_link(hid_t f) { H5Lcreate_soft("/params", f, "alias", H5P_DEFAULT, H5P_DEFAULT); }
// A valid dataset of the same shape with other labels: resuming good_ckpt.h5 on it is refused.
static void ck_other_data(hid_t f) {
    int32_t l[N];
    for (int i = 0; i < N; i++) l[i] = (lab[i] + 1) % S;
    put(f, "labels", H5T_NATIVE_INT32, 1, (hsize_t[]){N}, l);
}

// Embeddings (from good_emb.h5: N rows of the linear model's 2-dim embedding, ids u0..u7).
static void em_no_format(hid_t f) { del(f, "spkddp_format"); }
static void em_version_2(hid_t f) { h5_attr_write_i64(f, "version", 2, "x"); }
static void em_no_embeddings(hid_t f) { del(f, "embeddings"); }
static hsize_t emb_dim(hid_t f) {
    hsize_t d[2] = {0, 0};
    if (h5_dataset_shape(f, "embeddings", d, 2) != 2 || d[0] != N || d[1] > 64)
        die("good_emb.h5 is not N x E, E <= 64");
    return d[1];
}
static void em_1d(hid_t f) { put(f, "embeddings", H5T_NATIVE_FLOAT, 1, (hsize_t[]){N * emb_dim(f)}, x); }
static void em_int(hid_t f) {
    put(f, "embeddings", H5T_NATIVE_INT32, 2, (hsize_t[]){N, emb_dim(f)}, (int32_t[64 * N]){0});
}
static void em_set(hid_t f, float v) {
    const hsize_t E = emb_dim(f);
    float e[64 * N];
    h5_read_array(f, "embeddings", H5T_NATIVE_FLOAT, e, "x");
    e[2 * E + E - 1] = v;  // utterance u2
    put(f, "embeddings", H5T_IEEE_F32LE, 2, (hsize_t[]){N, E}, e);
}
static void em_nan_row(hid_t f) { em_set(f, NAN); }
static void em_inf_row(hid_t f) { em_set(f, INFINITY); }
static void em_no_utt_ids(hid_t f) { del(f, "utt_ids"); }
static void em_utt_ids_length(hid_t f) { put_strings(f, "utt_ids", ids, N - 1); }
static void em_utt_ids_dup(hid_t f) { ds_utt_ids_dup(f); }
static void em_utt_ids_space(hid_t f) { ds_utt_ids_space(f); }
static void em_labels_long(hid_t f) {
    int32_t l[4 * N] = {0};
    put(f, "labels", H5T_NATIVE_INT32, 1, (hsize_t[]){4 * N}, l);  // four times the rows: was read into N
}
static void em_labels_float(hid_t f) { ds_labels_float(f); }
static void em_labels_negative(hid_t f) { ds_labels_negative(f); }
static void em_zero_rows(hid_t f) {
    put(f, "embeddings", H5T_NATIVE_FLOAT, 2, (hsize_t[]){0, emb_dim(f)}, x);
    put_strings(f, "utt_ids", ids, 0);
    del(f, "labels");
}
static void em_zero_dim(hid_t f) { put(f, "embeddings", H5T_NATIVE_FLOAT, 2, (hsize_t[]){N, 0}, x); }
static void em_emb_dim_attr(hid_t f) { h5_attr_write_i64(f, "emb_dim", (int64_t)emb_dim(f) + 1, "x"); }
static void em_unstored(hid_t f) { put_unstored(f, "embeddings", H5T_IEEE_F32LE, 2, (hsize_t[]){N, emb_dim(f)}); }
static void em_no_labels(hid_t f) { del(f, "labels"); }
static void em_one_speaker(hid_t f) { put(f, "labels", H5T_NATIVE_INT32, 1, (hsize_t[]){N}, (int32_t[N]){0}); }
static void em_cohort_one(hid_t f) {  // one row: no spread to normalise by
    const hsize_t E = emb_dim(f);
    float e[64 * N];
    h5_read_array(f, "embeddings", H5T_NATIVE_FLOAT, e, "x");
    put(f, "embeddings", H5T_IEEE_F32LE, 2, (hsize_t[]){1, E}, e);
    put_strings(f, "utt_ids", ids, 1);
    del(f, "labels");
}
static void em_cohort_dim(hid_t f) {
    const hsize_t E = emb_dim(f) + 1;
    put(f, "embeddings", H5T_NATIVE_FLOAT, 2, (hsize_t[]){N, E}, x);
    h5_attr_write_i64(f, "emb_dim", (int64_t)E, "x");
}

typedef struct {
    const char *name;
    const char *base;
    mutate_fn fn;
} mutation_t;

#define M(base, fn) \
    { #fn, base, fn }
static const mutation_t MUTATIONS[] = {
    M("base.h5", ds_no_format),
    M("base.h5", ds_format_wrong),
    M("base.h5", ds_format_int),
    M("base.h5", ds_no_version),
    M("base.h5", ds_version_2),
    M("base.h5", ds_version_str),
    M("base.h5", ds_no_feature_dim),
    M("base.h5", ds_feature_dim_0),
    M("base.h5", ds_feature_dim_float),
    M("base.h5", ds_feature_dim_huge),
    M("base.h5", ds_no_num_speakers),
    M("base.h5", ds_num_speakers_0),
    M("base.h5", ds_num_speakers_int32max),
    M("base.h5", ds_num_speakers_2_24),
    M("base.h5", ds_num_speakers_u64),
    M("base.h5", ds_frame_rate_neg),
    M("base.h5", ds_no_features),
    M("base.h5", ds_features_group),
    M("base.h5", ds_features_1d),
    M("base.h5", ds_features_4d),
    M("base.h5", ds_features_int),
    M("base.h5", ds_features_dim_mismatch),
    M("base.h5", ds_features_unstored),
    M("base6.h5", ds_fixed_zero_frames),
    M("base6.h5", ds_fixed_zero_utts),
    M("base.h5", ds_no_offsets),
    M("base.h5", ds_offsets_2d),
    M("base.h5", ds_offsets_float),
    M("base.h5", ds_offsets_one_entry),
    M("base.h5", ds_offsets_not_zero),
    M("base.h5", ds_offsets_not_increasing),
    M("base.h5", ds_offsets_end),
    M("base.h5", ds_offsets_u64_huge),
    M("base.h5", ds_no_labels),
    M("base.h5", ds_labels_2d),
    M("base.h5", ds_labels_float),
    M("base.h5", ds_labels_length),
    M("base.h5", ds_labels_negative),
    M("base.h5", ds_labels_too_big),
    M("base.h5", ds_labels_int64_huge),
    M("base.h5", ds_labels_unstored),
    M("base.h5", ds_nan_features),
    M("base.h5", ds_huge_values),
    M("base.h5", ds_inf_features),
    M("base.h5", ds_utt_ids_length),
    M("base.h5", ds_utt_ids_dup),
    M("base.h5", ds_utt_ids_space),
    M("base.h5", ds_utt_ids_empty),
    M("base.h5", ds_utt_ids_int),
    M("base.h5", ds_visual_not_group),
    M("base_av.h5", ds_visual_no_dim),
    M("base_av.h5", ds_visual_rate_0),
    M("base_av.h5", ds_visual_rate_nan),
    M("base_av.h5", ds_visual_no_rate),
    M("base_av.h5", ds_visual_rate_30),
    M("base_av.h5", ds_visual_no_features),
    M("base_av.h5", ds_visual_dim_mismatch),
    M("base_av.h5", ds_visual_count),
    M("base_av.h5", ds_visual_short),
    M("base_av.h5", ds_pictures_encoding),
    M("base_av.h5", ds_pictures_shape),
    M("base_av.h5", ds_pictures_channels),
    M("base_av.h5", ds_pictures_no_jpeg),
    M("base_av.h5", ds_pictures_offsets),
    M("base_av.h5", ds_pictures_damaged),

    M("good_ckpt.h5", ck_no_format),
    M("good_ckpt.h5", ck_version_3),
    M("good_ckpt.h5", ck_no_checksum),
    M("good_ckpt.h5", ck_param_flip),
    M("good_ckpt.h5", ck_ep_loss_flip),
    M("good_ckpt.h5", ck_seed_changed),
    M("good_ckpt.h5", ck_world_size_changed),
    M("good_ckpt.h5", ck_config_changed),
    M("good_ckpt.h5", ck_extra_dataset),
    M("good_ckpt.h5", ck_names_longer),
    M("good_ckpt.h5", ck_names_shorter),
    M("good_ckpt.h5", ck_layout_huge),
    M("good_ckpt.h5", ck_layout_ndim0),
    M("good_ckpt.h5", ck_layout_negative),
    M("good_ckpt.h5", ck_layout_wrong_cols),
    M("good_ckpt.h5", ck_long_name),
    M("good_ckpt.h5", ck_params_short),
    M("good_ckpt.h5", ck_params_int),
    M("good_ckpt.h5", ck_no_params),
    M("good_ckpt.h5", ck_slots_bad),
    M("good_ckpt.h5", ck_nan_param),
    M("good_ckpt.h5", ck_world_size_0),
    M("good_ckpt.h5", ck_ep_correct_gt_count),
    M("good_ckpt.h5", ck_num_classes_huge),
    M("good_ckpt.h5", ck_feature_dim_0),
    M("good_ckpt.h5", ck_negative_step),
    M("good_ckpt.h5", ck_model_empty),
    M("good_ckpt.h5", ck_config_not_string),
    M("good_ckpt.h5", ck_soft_link),
    M("v1_ckpt.h5", ck_v1_param_flip),
    M("base.h5", ck_other_data),

    M("good_emb.h5", em_no_format),
    M("good_emb.h5", em_version_2),
    M("good_emb.h5", em_no_embeddings),
    M("good_emb.h5", em_1d),
    M("good_emb.h5", em_int),
    M("good_emb.h5", em_nan_row),
    M("good_emb.h5", em_inf_row),
    M("good_emb.h5", em_no_utt_ids),
    M("good_emb.h5", em_utt_ids_length),
    M("good_emb.h5", em_utt_ids_dup),
    M("good_emb.h5", em_utt_ids_space),
    M("good_emb.h5", em_labels_long),
    M("good_emb.h5", em_labels_float),
    M("good_emb.h5", em_labels_negative),
    M("good_emb.h5", em_zero_rows),
    M("good_emb.h5", em_zero_dim),
    M("good_emb.h5", em_emb_dim_attr),
    M("good_emb.h5", em_unstored),
    M("good_emb.h5", em_no_labels),
    M("good_emb.h5", em_one_speaker),
    M("good_emb.h5", em_cohort_dim),
    M("good_emb.h5", em_cohort_one),
};

// Files that are not HDF5 at all, and text inputs (trial lists, Kaldi lists).
static void write_other_files(void) {
    write_text("ds_text.h5", "this is not HDF5\n", 17);
    write_text("ds_empty.h5", "", 0);
    copy_file(at("base.h5"), at("ds_truncated.h5"), 1500);
    write_text("ck_text.h5", "this is not HDF5\n", 17);
    copy_file(at("good_ckpt.h5"), at("ck_truncated.h5"), 3000);
    write_text("em_text.h5", "\x89HDF\r\n\x1a\n but not really", 24);

    const char *trials[][2] = {
        {"tr_empty.txt", ""},
        {"tr_blank_lines.txt", "\n\n  \n"},
        {"tr_two_words.txt", "u0 u1\n"},
        {"tr_four_words.txt", "u0 u1 target yes\n"},
        {"tr_bad_label.txt", "u0 u1 same\n"},
        {"tr_unknown_utt.txt", "u0 u1 nontarget\nu0 nobody target\n"},
        {"tr_only_target.txt", "u0 u2 target\nu1 u3 target\n"},
        {"tr_only_nontarget.txt", "u0 u1 nontarget\nu2 u3 nontarget\n"},
        {"tr_self.txt", "u0 u2 target\nu1 u1 target\nu0 u1 nontarget\n"},
        {"tr_repeat_pair.txt", "u0 u2 target\nu0 u1 nontarget\nu2 u0 target\n"},
        {"tr_crlf_only_target.txt", "u0 u2 target\r\nu1 u3 target\r\n"},
        {"tr_mixed_formats.txt", "u0 u2 target\n0 u0 u1\n"},
    };
    for (size_t i = 0; i < sizeof trials / sizeof trials[0]; i++)
        write_text(trials[i][0], trials[i][1], strlen(trials[i][1]));
    write_text("tr_nul_byte.txt", "u0 u2 target\nu0 u1 non\0target\n", 30);
    char longid[1100];
    memset(longid, 'u', 1000);
    snprintf(longid + 1000, sizeof longid - 1000, " u1 target\n");
    write_text("tr_long_id.txt", longid, strlen(longid));
    unsigned char bin[64];
    for (int i = 0; i < 64; i++) bin[i] = (unsigned char)(0x80 + (i * 7) % 0x7f);
    write_text("tr_binary.txt", (const char *)bin, sizeof bin);

    const char *configs[][2] = {
        {"cf_unknown_key.yaml", "data: in/base.h5\nlrr: 0.1\n"},
        {"cf_bad_value.yaml", "data: in/base.h5\n# the run\nepochs: 0\n"},
        {"cf_syntax.yaml", "data: in/base.h5\n  epochs: 2\n"},
        {"cf_nested.yaml", "data: in/base.h5\nmodel:\n  name: ecapa\n"},
        {"cf_score_key.yaml", "emb: in/good_emb.h5\ntrials: in/good_trials.txt\nlr: 0.1\n"},
    };
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++)
        write_text(configs[i][0], configs[i][1], strlen(configs[i][1]));

    const char *scores[][2] = {
        {"sl_good.txt", "u0 u1 0.1 nontarget\nu0 u2 0.9 target\nu1 u3 0.7 target\nu2 u3 0.2 nontarget\n"},
        {"sl_bad_number.txt", "u0 u1 0.1 nontarget\nu0 u2 x target\n"},
        {"sl_mixed_labels.txt", "u0 u1 0.1 nontarget\nu0 u2 0.9\n"},
        {"sl_one_class.txt", "u0 u1 0.1 target\nu0 u2 0.9 target\n"},
        {"sl_utt2dur_short.txt", "u0 3.5\nu1 2.0\n"},
        {"sl_bad_model.yaml", "format: spkddp-calibration\nversion: 1\noffset: 0.5\n"},
        {"sl_field_negative.yaml",
         "format: spkddp-calibration\nversion: 1\nfield: -3\nprior: 0.5\noffset: 0\nscale: 1\n"},
        {"sl_huge_weights.yaml",
         "format: spkddp-calibration\nversion: 1\nfield: 3\nprior: 0.5\noffset: 0\nscale: "
         "1\nlog-min-duration: 1e308\nlog-max-duration: -1e308\n"},
        {"sl_utt2dur.txt", "u0 3.5\nu1 2.0\nu2 100\nu3 4.0\n"},
        {"sl_huge_score.txt", "u0 u1 0.1 nontarget\nu0 u2 1e200 target\nu1 u3 0.7 target\nu2 u3 0.2 nontarget\n"},
    };
    for (size_t i = 0; i < sizeof scores / sizeof scores[0]; i++)
        write_text(scores[i][0], scores[i][1], strlen(scores[i][1]));

    const char *lists[][2] = {
        {"ls_wav_empty.scp", ""},
        {"ls_wav_one_word.scp", "a\n"},
        {"ls_wav_dup.scp", "a WAV\na WAV\n"},
        {"ls_wav_pipe.scp", "a false |\n"},
        {"ls_wav_blank_line.scp", "a WAV\n\nb WAV\n"},
        {"ls_wav_missing_audio.scp", "a /nonexistent/a.wav\n"},
        {"ls_wav_not_audio.scp", "a TEXT\n"},
        {"ls_u2s_three_words.txt", "a spk1 extra\n"},
        {"ls_u2s_missing_utt.txt", "b spk1\n"},
        {"ls_u2s_extra_utt.txt", "a spk1\nb spk2\n"},
        {"ls_u2s_ok.txt", "a spk1\n"},
    };
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++)
        write_text(lists[i][0], lists[i][1], strlen(lists[i][1]));
}

int main(int argc, char **argv) {
    if (argc != 3 || (strcmp(argv[1], "base") != 0 && strcmp(argv[1], "mutate") != 0)) {
        fprintf(stderr, "usage: make_bad_inputs base|mutate DIR\n");
        return 2;
    }
    snprintf(dir, sizeof dir, "%s", argv[2]);
    h5_quiet();
    base_arrays();
    if (strcmp(argv[1], "base") == 0) {
        write_base("base.h5", 0, 0);
        write_base("base_av.h5", 1, 0);
        write_base("base6.h5", 0, 6);
        return 0;
    }
    for (size_t i = 0; i < sizeof MUTATIONS / sizeof MUTATIONS[0]; i++) {
        const mutation_t *m = &MUTATIONS[i];
        char name[128];
        snprintf(name, sizeof name, "%s.h5", m->name);
        copy_file(at(m->base), at(name), -1);
        hid_t f = H5Fopen(at(name), H5F_ACC_RDWR, H5P_DEFAULT);
        if (f < 0) die(name);
        m->fn(f);
        if (H5Fclose(f) < 0) die(name);
    }
    write_other_files();
    printf("make_bad_inputs: %zu malformed HDF5 files and the text inputs in %s\n",
           sizeof MUTATIONS / sizeof MUTATIONS[0], dir);
    return 0;
}
