// Checkpoints: round trip; the checksum covers every attribute and dataset; layouts that do
// not fit are refused with a sentence; format 1 files still load; a run deletes only what it
// wrote or adopted and never what does not verify; nothing is written over an existing file;
// a failed write leaves the directory as it was.
//   test_checkpoint FIXTURES_DIR
#include "io/ckpt/checkpoint.h"
#include "io/ckpt/ckpt_checksum.h"
#include "io/ckpt/ckpt_dir.h"
#include "io/common/atomic_file.h"
#include "io/common/h5util.h"
#include "tests/test_util.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char work[256];

typedef struct {
    param_table_t p, s;
    float pd[12], sd[3], od[24];
    ckpt_meta_t meta;
} fake_t;

static void fake_init(fake_t *m, uint64_t run_id, int64_t step) {
    memset(m, 0, sizeof *m);
    param_table_add(&m->p, "fc.weight", 2, (int64_t[]){2, 5});
    param_table_add(&m->p, "fc.bias", 1, (int64_t[]){2});
    param_table_add(&m->s, "bn.running_mean", 1, (int64_t[]){3});
    for (int i = 0; i < 12; i++) m->pd[i] = 0.25f * (float)i - 1.0f;
    for (int i = 0; i < 3; i++) m->sd[i] = (float)i;
    for (int i = 0; i < 24; i++) m->od[i] = 1e-3f * (float)i;
    snprintf(m->meta.model, sizeof m->meta.model, "linear");
    snprintf(m->meta.optimizer, sizeof m->meta.optimizer, "adam");
    snprintf(m->meta.config, sizeof m->meta.config, "model=linear\nlr=0.01\n");
    m->meta.global_step = m->meta.opt_step = step;
    m->meta.world_size = 2;
    m->meta.seed = 7;
    m->meta.feature_dim = 5;
    m->meta.num_classes = 2;
    m->meta.ep_loss_sum = 1.272;
    m->meta.ep_count = 16;
    m->meta.ep_correct = 9;
    m->meta.run_id = run_id;
    m->meta.global_batch = 8;
}

static ckpt_tensors_t tensors(fake_t *m) { return (ckpt_tensors_t){&m->p, m->pd, &m->s, m->sd, 2, m->od}; }

static void fake_free(fake_t *m) {
    param_table_free(&m->p);
    param_table_free(&m->s);
}

static void write_ckpt(const char *dir, uint64_t run_id, int64_t step, char *path, size_t cap) {
    fake_t m;
    fake_init(&m, run_id, step);
    ckpt_tensors_t t = tensors(&m);
    ckpt_write(dir, &m.meta, &t, path, cap);
    fake_free(&m);
}

static void copy_file(const char *from, const char *to) {
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    char buf[4096];
    size_t n;
    if (!a || !b) abort();
    while ((n = fread(buf, 1, sizeof buf, a)) > 0) fwrite(buf, 1, n, b);
    fclose(a);
    if (fclose(b) != 0) abort();
}

// Recomputes the format 2 checksum, as a careful forger (or a buggy writer) would.
static void reseal(const char *path) {
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    uint64_t sum;
    char err[256];
    EXPECT(f >= 0 && ckpt_checksum_v2(f, &sum, err, sizeof err) == 0, "reseal %s: %s", path, err);
    int64_t s;
    memcpy(&s, &sum, sizeof s);
    h5_attr_write_i64(f, "checksum", s, path);
    H5Fclose(f);
}

static void expect_refused(const char *path, const char *want, const char *why) {
    char err[1024] = "";
    int rc = ckpt_verify(path, NULL, err, sizeof err);
    EXPECT(rc == 4 && strstr(err, want), "%s: rc %d, '%s' does not say '%s'", why, rc, err, want);
}

static void test_round_trip(void) {
    char path[CKPT_PATH_MAX];
    write_ckpt(work, 11, 3, path, sizeof path);
    fake_t m, back;
    fake_init(&m, 11, 3);
    fake_init(&back, 0, 0);
    memset(back.pd, 0, sizeof back.pd);
    ckpt_tensors_t t = tensors(&back);
    char err[1024];
    EXPECT(ckpt_load(path, "linear", &back.meta, &t, err, sizeof err) == 0, "load: %s", err);
    EXPECT(memcmp(m.pd, back.pd, sizeof m.pd) == 0 && memcmp(m.od, back.od, sizeof m.od) == 0, "floats differ");
    EXPECT(back.meta.version == CKPT_VERSION && back.meta.run_id == 11 && back.meta.global_batch == 8 &&
               back.meta.ep_loss_sum == 1.272 && strcmp(back.meta.config, m.meta.config) == 0,
           "metadata differs");
    EXPECT(ckpt_load(path, "ecapa", &back.meta, &t, err, sizeof err) == 4 && strstr(err, "holds model 'linear'"), "%s",
           err);
    fake_free(&m);
    fake_free(&back);
}

// Changes one value of an attribute or the first element of a dataset, by class.
static void tamper(hid_t obj, int is_attr) {
    hid_t ft = is_attr ? H5Aget_type(obj) : H5Dget_type(obj);
    hid_t sp = is_attr ? H5Aget_space(obj) : H5Dget_space(obj);
    hssize_t n = H5Sget_simple_extent_npoints(sp);
    if (H5Tget_class(ft) == H5T_STRING) {
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, H5T_VARIABLE);
        char **s = calloc((size_t)n, sizeof *s);
        if (!H5Tis_variable_str(ft)) {  // fixed-length strings: the first one's first byte
            size_t len = H5Tget_size(ft);
            char *buf = calloc((size_t)n, len + 1);
            is_attr ? H5Aread(obj, ft, buf) : H5Dread(obj, ft, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
            buf[0] ^= 1;
            is_attr ? H5Awrite(obj, ft, buf) : H5Dwrite(obj, ft, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
            free(buf);
        } else {
            is_attr ? H5Aread(obj, mt, s) : H5Dread(obj, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, s);
            char *copy = strdup(s[0]);
            copy[0] ^= 1;
            char *old = s[0];
            s[0] = copy;
            is_attr ? H5Awrite(obj, mt, s) : H5Dwrite(obj, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, s);
            s[0] = old;
            H5Dvlen_reclaim(mt, sp, H5P_DEFAULT, s);
            free(copy);
        }
        free(s);
        H5Tclose(mt);
    } else {
        size_t size = H5Tget_size(ft);
        unsigned char *buf = calloc((size_t)n, size);
        is_attr ? H5Aread(obj, ft, buf) : H5Dread(obj, ft, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
        buf[0] ^= 1;  // the lowest bit of the first value
        is_attr ? H5Awrite(obj, ft, buf) : H5Dwrite(obj, ft, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
        free(buf);
    }
    H5Sclose(sp);
    H5Tclose(ft);
}

typedef struct {
    char names[64][64];
    int n;
} names_t;

static herr_t collect_attr(hid_t loc, const char *name, const H5A_info_t *info, void *data) {
    (void)loc, (void)info;
    names_t *c = data;
    if (strcmp(name, "checksum") != 0 && c->n < 64) snprintf(c->names[c->n++], 64, "%s", name);
    return 0;
}

static herr_t collect_link(hid_t loc, const char *name, const H5L_info_t *info, void *data) {
    (void)loc, (void)info;
    names_t *c = data;
    if (c->n < 64) snprintf(c->names[c->n++], 64, "%s", name);
    return 0;
}

// One flipped bit anywhere -- every attribute (the epoch accumulators, seed, world size,
// model, config included) and every dataset -- is found.
static void test_checksum_covers_everything(void) {
    char path[CKPT_PATH_MAX], copy[CKPT_PATH_MAX + 16];
    write_ckpt(work, 12, 4, path, sizeof path);
    snprintf(copy, sizeof copy, "%s/tampered.h5", work);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    names_t attrs = {0}, dsets = {0};
    hsize_t idx = 0;
    H5Aiterate2(f, H5_INDEX_NAME, H5_ITER_INC, &idx, collect_attr, &attrs);
    H5Literate(f, H5_INDEX_NAME, H5_ITER_INC, NULL, collect_link, &dsets);
    H5Fclose(f);
    EXPECT(attrs.n >= 23 && dsets.n == 7, "%d attributes, %d datasets", attrs.n, dsets.n);
    for (int k = 0; k < attrs.n + dsets.n; k++) {
        int is_attr = k < attrs.n;
        const char *name = is_attr ? attrs.names[k] : dsets.names[k - attrs.n];
        copy_file(path, copy);
        f = H5Fopen(copy, H5F_ACC_RDWR, H5P_DEFAULT);
        hid_t obj = is_attr ? H5Aopen(f, name, H5P_DEFAULT) : H5Dopen2(f, name, H5P_DEFAULT);
        tamper(obj, is_attr);
        is_attr ? H5Aclose(obj) : H5Dclose(obj);
        H5Fclose(f);
        char err[1024] = "";
        int rc = ckpt_verify(copy, NULL, err, sizeof err);
        // The two attributes that say what the file is are read before the checksum.
        int named = strcmp(name, "spkddp_format") == 0 || strcmp(name, "version") == 0;
        EXPECT(rc == 4 && (strstr(err, "checksum mismatch") || (named && strstr(err, name))),
               "a flipped bit in %s '%s' went unnoticed (rc %d: %s)", is_attr ? "attribute" : "dataset", name, rc, err);
    }
}

static void edit(const char *path, const char *dataset, hid_t type, int rank, const hsize_t *dims, const void *data) {
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    H5Ldelete(f, dataset, H5P_DEFAULT);
    if (type == H5T_C_S1)
        h5_write_strings(f, dataset, data, (int64_t)dims[0], path);
    else
        h5_write_array(f, dataset, type, rank, dims, data, path);
    H5Fclose(f);
    reseal(path);
}

// Layouts that do not describe the file's floats, even with a valid checksum.
static void test_bad_layouts(void) {
    char path[CKPT_PATH_MAX], bad[CKPT_PATH_MAX + 16];
    write_ckpt(work, 13, 5, path, sizeof path);
    snprintf(bad, sizeof bad, "%s/bad.h5", work);

    const char *three[] = {"fc.weight", "fc.bias", "extra"};
    copy_file(path, bad);
    edit(bad, "param_names", H5T_C_S1, 1, (hsize_t[]){3}, three);
    expect_refused(bad, "'param_names' names 3 tensors but 'param_layout' lays out 2", "names longer than layout");

    copy_file(path, bad);
    edit(bad, "param_names", H5T_C_S1, 1, (hsize_t[]){1}, three);
    expect_refused(bad, "'param_names' names 1 tensors but 'param_layout' lays out 2", "names shorter than layout");

    int64_t huge[12] = {0, 2, (int64_t)1 << 40, (int64_t)1 << 40, 0, 0, 0, 1, 2, 0, 0, 0};
    copy_file(path, bad);
    edit(bad, "param_layout", H5T_NATIVE_INT64, 2, (hsize_t[]){2, 6}, huge);
    expect_refused(bad, "'param_layout' row 0 (tensor 'fc.weight')", "a huge shape");

    int64_t overflow[12] = {0, 4, (int64_t)1 << 30, (int64_t)1 << 30, (int64_t)1 << 30, (int64_t)1 << 30, 0, 1, 2, 0,
                            0, 0};
    copy_file(path, bad);
    edit(bad, "param_layout", H5T_NATIVE_INT64, 2, (hsize_t[]){2, 6}, overflow);
    expect_refused(bad, "is not a valid layout", "a shape whose product overflows");

    int64_t ndim5[12] = {0, 5, 2, 5, 1, 1, 10, 1, 2, 0, 0, 0};
    copy_file(path, bad);
    edit(bad, "param_layout", H5T_NATIVE_INT64, 2, (hsize_t[]){2, 6}, ndim5);
    expect_refused(bad, "is not a valid layout", "5 dimensions");

    int64_t gap[12] = {0, 2, 2, 5, 0, 0, 11, 1, 2, 0, 0, 0};
    copy_file(path, bad);
    edit(bad, "param_layout", H5T_NATIVE_INT64, 2, (hsize_t[]){2, 6}, gap);
    expect_refused(bad, "row 1 (tensor 'fc.bias')", "offsets with a gap");

    char longname[80];
    memset(longname, 'w', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    const char *named[] = {longname, "fc.bias"};
    copy_file(path, bad);
    edit(bad, "param_names", H5T_C_S1, 1, (hsize_t[]){2}, named);
    expect_refused(bad, "is not a valid layout", "a name longer than a tensor name can be");

    float more[13] = {0};
    copy_file(path, bad);
    edit(bad, "params", H5T_NATIVE_FLOAT, 1, (hsize_t[]){13}, more);
    expect_refused(bad, "dataset 'params' is missing or is not the 12 stored floats", "params longer than the layout");

    float nan_at_3[12] = {0, 0, 0, NAN};
    copy_file(path, bad);
    edit(bad, "params", H5T_NATIVE_FLOAT, 1, (hsize_t[]){12}, nan_at_3);
    expect_refused(bad, "dataset 'params' holds NaN or Inf (tensor 'fc.weight', value 3)", "a NaN parameter");

    copy_file(path, bad);
    hid_t f = H5Fopen(bad, H5F_ACC_RDWR, H5P_DEFAULT);
    h5_attr_write_i64(f, "ep_correct", 17, bad);  // more correct than counted
    H5Fclose(f);
    reseal(bad);
    expect_refused(bad, "attribute 'ep_correct' = 17 is outside [0, 16]", "accumulators out of range");
}

// Format 1 (3490411 and earlier): loads, its checksum is verified.
static void test_format_1(const char *fixtures) {
    const char *names[] = {"ecapa_adam_step2.h5", "ecapa_adam_step6.h5", "linear_sgd_step2.h5", "linear_sgd_step6.h5"};
    for (int i = 0; i < 4; i++) {
        char path[CKPT_PATH_MAX], err[1024] = "";
        snprintf(path, sizeof path, "%s/%s", fixtures, names[i]);
        ckpt_meta_t *m = calloc(1, sizeof *m);
        EXPECT(ckpt_verify(path, m, err, sizeof err) == 0 && m->version == 1 && m->run_id == 0, "%s: %s", names[i],
               err);
        free(m);
    }
    char path[CKPT_PATH_MAX], bad[CKPT_PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/linear_sgd_step2.h5", fixtures);
    snprintf(bad, sizeof bad, "%s/v1_bad.h5", work);
    copy_file(path, bad);
    hid_t f = H5Fopen(bad, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, "params", H5P_DEFAULT);
    tamper(d, 0);
    H5Dclose(d);
    H5Fclose(f);
    expect_refused(bad, "checksum mismatch", "a format 1 file with a flipped parameter bit");
}

static int exists(const char *dir, int64_t step) {
    char p[CKPT_PATH_MAX];
    snprintf(p, sizeof p, "%s/ckpt-%012lld.h5", dir, (long long)step);
    return access(p, F_OK) == 0;
}

// Rotation deletes only what this run wrote or adopted; corrupt files never count.
static void test_rotation(void) {
    char dir[300], path[CKPT_PATH_MAX], junk[CKPT_PATH_MAX];
    snprintf(dir, sizeof dir, "%s/rot", work);
    write_ckpt(dir, 99, 1, path, sizeof path);  // another run's
    write_ckpt(dir, 99, 2, path, sizeof path);
    snprintf(junk, sizeof junk, "%s/ckpt-000000000003.h5", dir);  // corrupt, and newest so far
    FILE *f = fopen(junk, "w");
    fputs("not a checkpoint", f);
    fclose(f);

    ckpt_keeper_t k;
    ckpt_keeper_init(&k, 2);
    for (int64_t s = 4; s <= 6; s++) {
        write_ckpt(dir, 7, s, path, sizeof path);
        ckpt_keeper_add(&k, path);
    }
    EXPECT(exists(dir, 1) && exists(dir, 2) && exists(dir, 3), "a checkpoint this run did not write was deleted");
    EXPECT(!exists(dir, 4) && exists(dir, 5) && exists(dir, 6), "keep 2 of this run's: 4 goes, 5 and 6 stay");
    ckpt_keeper_free(&k);

    // A corrupt copy of this run's checkpoint is never adopted, so never deleted.
    char five[CKPT_PATH_MAX], four[CKPT_PATH_MAX];
    snprintf(five, sizeof five, "%s/ckpt-000000000005.h5", dir);
    snprintf(four, sizeof four, "%s/ckpt-000000000004.h5", dir);
    copy_file(five, four);
    hid_t h = H5Fopen(four, H5F_ACC_RDWR, H5P_DEFAULT);
    h5_attr_write_f64(h, "ep_loss_sum", 0.251, four);
    H5Fclose(h);

    // Resuming run 7 from step 5 adopts 5 only: 6 is newer, 4 does not verify, 1-2 are run 99's.
    ckpt_keeper_init(&k, 1);
    EXPECT(ckpt_keeper_adopt(&k, dir, 7, 5) == 1, "adopted %d", k.n);
    write_ckpt(dir, 7, 8, path, sizeof path);
    ckpt_keeper_add(&k, path);
    EXPECT(!exists(dir, 5) && exists(dir, 6) && exists(dir, 8) && exists(dir, 4), "adopted rotation went wrong");
    EXPECT(exists(dir, 1) && exists(dir, 2) && exists(dir, 3), "another run's or a corrupt checkpoint was deleted");
    ckpt_keeper_free(&k);

    // --resume auto: newest that verifies; only corrupt ones: -1 and the newest named.
    char latest[CKPT_PATH_MAX];
    EXPECT(ckpt_find_latest(dir, latest, sizeof latest) == 1 && strstr(latest, "ckpt-000000000008.h5"), "latest %s",
           latest);
    char only[300];
    snprintf(only, sizeof only, "%s/only_corrupt", work);
    mkdir(only, 0777);
    snprintf(path, sizeof path, "%s/ckpt-000000000009.h5", only);
    copy_file(junk, path);
    EXPECT(ckpt_find_latest(only, latest, sizeof latest) == -1 && strcmp(latest, path) == 0, "only corrupt: %s",
           latest);

    // An explicit branch moves the newer ones aside, deleting nothing.
    char err[512];
    EXPECT(ckpt_dir_set_aside(dir, 4, "abandoned", err, sizeof err) == 2, "set aside: %s", err);
    char moved[CKPT_PATH_MAX];
    snprintf(moved, sizeof moved, "%s/abandoned/ckpt-000000000008.h5", dir);
    EXPECT(!exists(dir, 6) && !exists(dir, 8) && access(moved, F_OK) == 0 && exists(dir, 4), "set aside went wrong");
}

// ckpt_write never replaces: the child dies with exit 4 and the file keeps its contents.
static void test_no_overwrite(void) {
    char dir[300], path[CKPT_PATH_MAX];
    snprintf(dir, sizeof dir, "%s/taken", work);
    write_ckpt(dir, 21, 3, path, sizeof path);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        freopen("/dev/null", "w", stderr);
        write_ckpt(dir, 22, 3, path, sizeof path);
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 4, "writing over a checkpoint: status %d", st);
    ckpt_meta_t *m = calloc(1, sizeof *m);
    char err[512];
    EXPECT(ckpt_verify(path, m, err, sizeof err) == 0 && m->run_id == 21, "the existing checkpoint changed");
    free(m);
}

// A write that fails part-way (here: the file-size limit, as a full disk would) leaves no temp
// file and no change at the target.
static void test_failed_write(void) {
    char path[300], tmp[400], err[512];
    snprintf(path, sizeof path, "%s/big.bin", work);
    atomic_temp_path(path, tmp, sizeof tmp);
    EXPECT(atomic_write_file(path, "old", 3, ATOMIC_REPLACE, err, sizeof err) == 0, "%s", err);
    size_t n = 1 << 20;
    char *buf = calloc(n, 1);
    struct rlimit old, small = {64 * 1024, 0};
    getrlimit(RLIMIT_FSIZE, &old);
    small.rlim_max = old.rlim_max;
    signal(SIGXFSZ, SIG_IGN);
    setrlimit(RLIMIT_FSIZE, &small);
    int rc = atomic_write_file(path, buf, n, ATOMIC_REPLACE, err, sizeof err);
    setrlimit(RLIMIT_FSIZE, &old);
    EXPECT(rc == -1 && strstr(err, "cannot write"), "rc %d: %s", rc, err);
    struct stat st;
    EXPECT(stat(tmp, &st) != 0 && stat(path, &st) == 0 && st.st_size == 3,
           "the temp file stayed or the target changed");
    free(buf);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_checkpoint FIXTURES_DIR\n");
        return 2;
    }
    h5_quiet();
    snprintf(work, sizeof work, "%s/spkddp_test_checkpoint_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(work)) return 1;
    test_round_trip();
    test_checksum_covers_everything();
    test_bad_layouts();
    test_format_1(argv[1]);
    test_rotation();
    test_no_overwrite();
    test_failed_write();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", work);
    if (test_failures == 0 && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", work);
    return test_report("test_checkpoint");
}
