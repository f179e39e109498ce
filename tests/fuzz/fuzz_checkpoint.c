// libFuzzer target: the checkpoint reader (ckpt_verify_file: format, checksum, metadata,
// layouts, every float) on checkpoints built from the input (fuzz_build.h). Most inputs get
// a valid format 2 checksum again after their edits, so the structural checks behind it are
// what the fuzzer explores. The reader must accept (every promise of io/ckpt/checkpoint.h holding)
// or refuse with one sentence naming the file.
#include "io/ckpt/checkpoint.h"
#include "io/ckpt/ckpt_checksum.h"
#include "io/dataset/dataset.h"
#include "tests/fuzz/fuzz_build.h"

#include <math.h>
#include <stdio.h>

enum { MAX_T = 4 };

static const char *NAMES[] = {"fc.weight",
                              "fc.bias",
                              "bn.weight",
                              "emb",
                              "",
                              "fc.weight",
                              "a.name.longer.than.sixty.four.characters.which.no.tensor.of.ours.has.ever"};

// <prefix>_names and <prefix>_layout for t tensors of small shapes; returns the float count.
static int64_t build_table(fz_t *in, hid_t f, const char *prefix, int t) {
    const char *names[MAX_T + 1] = {0};
    int64_t layout[(MAX_T + 1) * 6] = {0}, total = 0;
    for (int i = 0; i < t; i++) {
        names[i] = NAMES[fz_pick(in, 8) % 7];
        int64_t *row = &layout[i * 6];
        row[0] = total;
        row[1] = 1 + fz_pick(in, 2);
        row[2] = 1 + fz_pick(in, 3);
        row[3] = row[1] == 2 ? 1 + fz_pick(in, 3) : 0;
        total += row[2] * (row[1] == 2 ? row[3] : 1);
    }
    for (int k = fz_pick(in, 3); k > 0; k--) {  // edits of the layout
        int cell = fz_pick(in, t * 6);
        layout[cell] = fz_int(in, layout[cell]);
    }
    char name[64];
    hsize_t nn = (hsize_t)t, ld[2] = {(hsize_t)t, 6};
    int shape = fz_pick(in, 8);
    names[t] = "extra";
    if (shape == 5) nn = (hsize_t)(t + 1 - 2 * fz_pick(in, 2));
    if (shape == 6) ld[1] = 5;
    snprintf(name, sizeof name, "%s_names", prefix);
    if (shape != 7) fz_strings(f, name, names, (size_t)t + 1, nn, fz_pick(in, 3));
    snprintf(name, sizeof name, "%s_layout", prefix);
    fz_dataset(f, name, fz_num_type(in, H5T_STD_I64LE), H5T_NATIVE_INT64, 2, ld, layout, (size_t)(t + 1) * 6,
               fz_pick(in, FZ_STORAGES));
    return total;
}

static void build_floats(fz_t *in, hid_t f, const char *name, hsize_t rows, hsize_t n) {
    static float x[64];
    for (int i = 0; i < 64; i++) x[i] = 0.01f * (float)i;
    if (fz_pick(in, 8) == 7) x[fz_pick(in, 64)] = fz_pick(in, 2) ? NAN : INFINITY;
    int shape = fz_pick(in, 8);
    hsize_t dims[2] = {rows ? rows : n, n};
    if (shape == 5) dims[0] = (hsize_t)fz_int(in, (int64_t)dims[0]);
    if (shape != 7)
        fz_dataset(f, name, fz_pick(in, 6) == 5 ? H5T_STD_I32LE : H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, rows ? 2 : 1, dims,
                   x, 64, fz_pick(in, FZ_STORAGES));
}

static void build(fz_t *in, hid_t f) {
    const char *formats[] = {"checkpoint", "checkpoint", "features"};
    int fs = fz_pick(in, 4);
    if (fs < 3) fz_attr_str(f, "spkddp_format", formats[fs], fs == 1);
    int vs = fz_pick(in, 6);
    if (vs < 4) fz_attr_i64(f, "version", fz_num_type(in, H5T_STD_I64LE), vs == 0 ? 2 : vs == 1 ? 1 : fz_int(in, 2));
    if (vs == 4) fz_attr_str(f, "version", "2", 0);
    const struct {
        const char *name;
        int64_t valid;
    } ints[] = {{"epoch", 0},       {"samples_in_epoch", 8}, {"step_in_epoch", 1}, {"global_step", 3},
                {"opt_step", 3},    {"world_size", 2},       {"seed", 7},          {"feature_dim", 4},
                {"num_classes", 2}, {"visual_dim", 0},       {"visual_ratio", 0},  {"ep_correct", 1},
                {"ep_count", 8},    {"run_id", 5},           {"global_batch", 8},  {"data_fingerprint", 9}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (fz_pick(in, 17) != 16)
            fz_attr_i64(f, ints[i].name, fz_num_type(in, H5T_STD_I64LE), fz_int(in, ints[i].valid));
    const double reals[] = {1.5, NAN, -INFINITY, -1, 0};
    if (fz_pick(in, 9) != 8) fz_attr_num(f, "ep_loss_sum", H5T_IEEE_F64LE, reals[fz_pick(in, 8) % 5]);
    if (fz_pick(in, 9) != 8) fz_attr_num(f, "ep_seconds", H5T_IEEE_F64LE, reals[fz_pick(in, 8) % 5]);
    static char longtext[20000];
    memset(longtext, 'k', sizeof longtext - 1);
    const char *texts[] = {"linear", "", "model=linear\nlr=0.1\n", longtext + 19900, longtext};
    const char *strs[] = {"model", "optimizer", "config"};
    for (int i = 0; i < 3; i++) {
        int p = fz_pick(in, 8);
        if (p < 7)
            fz_attr_str(f, strs[i], texts[p % 5], p == 6 ? 2 : p == 5);
        else
            fz_attr_i64(f, strs[i], H5T_STD_I64LE, 1);
    }
    const int64_t total = build_table(in, f, "param", 1 + fz_pick(in, MAX_T));
    build_floats(in, f, "params", 0, (hsize_t)total);
    if (fz_pick(in, 3) == 1) build_floats(in, f, "state", 0, (hsize_t)build_table(in, f, "state", 1 + fz_pick(in, 2)));
    int slots = fz_pick(in, 4);
    if (slots) build_floats(in, f, "optimizer_slots", (hsize_t)(slots == 3 ? 9 : slots), (hsize_t)total);
    int extra = fz_pick(in, 6);
    if (extra == 1) fz_attr_i64(f, "unexpected", H5T_STD_I64LE, 1);
    if (extra == 2) H5Gclose(H5Gcreate2(f, "group", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    if (extra == 3) H5Lcreate_soft("/params", f, "alias", H5P_DEFAULT, H5P_DEFAULT);
    if (extra == 4) H5Lcreate_hard(f, "params", f, "params_again", H5P_DEFAULT, H5P_DEFAULT);
    int seal = fz_pick(in, 5);
    uint64_t sum = 0;
    char err[256];
    if (seal < 3 && ckpt_checksum_v2(f, &sum, err, sizeof err) == 0)
        fz_attr_i64(f, "checksum", H5T_STD_I64LE, (int64_t)sum);
    if (seal == 3) fz_attr_i64(f, "checksum", H5T_STD_I64LE, fz_int(in, 0));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_t in = {data, size};
    hid_t f = fz_file();
    build(&in, f);
    static ckpt_meta_t meta;
    char err[1024] = "";
    int rc = ckpt_verify_file(f, "fuzz.h5", &meta, err, sizeof err);
    if (getenv("SPKDDP_FUZZ_SAY")) fprintf(stderr, "%s\n", rc ? err : "accepted");  // what a reproduced input does
    if (rc == 0) {
        FZ_REQUIRE(meta.version >= CKPT_VERSION_OLDEST && meta.version <= CKPT_VERSION && meta.model[0]);
        FZ_REQUIRE(meta.world_size >= 1 && meta.feature_dim >= 1 && meta.num_classes >= 1 &&
                   meta.num_classes <= DATASET_MAX_SPEAKERS);
        FZ_REQUIRE(meta.ep_correct >= 0 && meta.ep_correct <= meta.ep_count && isfinite(meta.ep_loss_sum));
    } else {
        FZ_REQUIRE(strncmp(err, "fuzz.h5: ", 9) == 0 && strlen(err) > 10);
    }
    H5Fclose(f);
    return 0;
}
