#include "io/checkpoint.h"

#include "kernels/base/check.h"
#include "io/h5util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// ---- checksum ---------------------------------------------------------------------------

static uint64_t fnv1a(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001B3ull;
    }
    return h;
}

// Over the position and every stored float; opt/opt_n are the optimizer slots actually in
// the file (a reader that does not want them still has to hash them).
static uint64_t checksum(const ckpt_meta_t *m, const ckpt_tensors_t *t, const float *opt, size_t opt_n) {
    uint64_t h = 0xCBF29CE484222325ull;
    int64_t pos[4] = {m->epoch, m->samples_in_epoch, m->global_step, m->opt_step};
    h = fnv1a(h, pos, sizeof pos);
    h = fnv1a(h, t->param_data, (size_t)t->params->total * sizeof(float));
    h = fnv1a(h, t->state_data, (size_t)t->state->total * sizeof(float));
    h = fnv1a(h, opt, opt_n * sizeof(float));
    return h;
}

// ---- layout tables ------------------------------------------------------------------------

static void write_table(hid_t f, const char *prefix, const param_table_t *p, const char *what) {
    char name[64];
    if (p->count == 0) return;
    const char **names = mallocCheck((size_t)p->count * sizeof(char *));
    int64_t *layout = callocCheck((size_t)p->count * 6, sizeof(int64_t));
    for (int i = 0; i < p->count; i++) {
        names[i] = p->t[i].name;
        layout[i * 6 + 0] = p->t[i].offset;
        layout[i * 6 + 1] = p->t[i].ndim;
        for (int d = 0; d < p->t[i].ndim; d++) layout[i * 6 + 2 + d] = p->t[i].shape[d];
    }
    snprintf(name, sizeof name, "%s_names", prefix);
    h5_write_strings(f, name, names, p->count, what);
    hsize_t dims[2] = {(hsize_t)p->count, 6};
    snprintf(name, sizeof name, "%s_layout", prefix);
    h5_write_array(f, name, H5T_STD_I64LE, 2, dims, layout, what);
    free(names);
    free(layout);
}

static int read_table(hid_t f, const char *prefix, param_table_t *p) {
    char name[64];
    memset(p, 0, sizeof *p);
    snprintf(name, sizeof name, "%s_layout", prefix);
    hsize_t dims[2];
    if (!h5_exists(f, name)) return 0;  // empty table
    if (h5_dataset_shape(f, name, dims, 2) != 2 || dims[1] != 6) return -1;
    int n = (int)dims[0];
    int64_t *layout = mallocCheck((size_t)n * 6 * sizeof(int64_t));
    char **names = callocCheck((size_t)n, sizeof(char *));
    hid_t st = H5Tcopy(H5T_C_S1);
    H5Tset_size(st, H5T_VARIABLE);
    int rc = -1;
    hid_t d = -1;
    snprintf(name, sizeof name, "%s_names", prefix);
    hid_t ld = H5Dopen2(f, name, H5P_DEFAULT);
    snprintf(name, sizeof name, "%s_layout", prefix);
    d = H5Dopen2(f, name, H5P_DEFAULT);
    if (ld >= 0 && d >= 0 && H5Dread(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, layout) >= 0 &&
        H5Dread(ld, st, H5S_ALL, H5S_ALL, H5P_DEFAULT, names) >= 0) {
        rc = 0;
        for (int i = 0; i < n && rc == 0; i++) {
            int ndim = (int)layout[i * 6 + 1];
            if (ndim < 1 || ndim > PARAM_MAX_DIMS || !names[i]) {
                rc = -1;
                break;
            }
            param_table_add(p, names[i], ndim, &layout[i * 6 + 2]);
            if (p->t[i].offset != layout[i * 6]) rc = -1;
        }
        hid_t sp = H5Dget_space(ld);
        H5Dvlen_reclaim(st, sp, H5P_DEFAULT, names);
        H5Sclose(sp);
    }
    if (ld >= 0) H5Dclose(ld);
    if (d >= 0) H5Dclose(d);
    H5Tclose(st);
    free(layout);
    free(names);
    return rc;
}

// ---- save -------------------------------------------------------------------------------

static void fsync_path(const char *path, int is_dir) {
    int fd = open(path, is_dir ? O_RDONLY | O_DIRECTORY : O_RDONLY);
    if (fd < 0) spk_die(SPK_EXIT_FAILURE, "%s: cannot open for fsync (%s)", path, strerror(errno));
    if (fsync(fd) != 0 && !(is_dir && (errno == EINVAL || errno == EROFS)))
        spk_die(SPK_EXIT_FAILURE, "%s: fsync failed (%s)", path, strerror(errno));
    close(fd);
}

static void write_meta(hid_t f, const ckpt_meta_t *m, uint64_t sum, const char *what) {
    h5_attr_write_str(f, "spkddp_format", CKPT_FORMAT, what);
    h5_attr_write_i64(f, "version", CKPT_VERSION, what);
    h5_attr_write_str(f, "model", m->model, what);
    h5_attr_write_str(f, "optimizer", m->optimizer, what);
    h5_attr_write_i64(f, "epoch", m->epoch, what);
    h5_attr_write_i64(f, "samples_in_epoch", m->samples_in_epoch, what);
    h5_attr_write_i64(f, "step_in_epoch", m->step_in_epoch, what);
    h5_attr_write_i64(f, "global_step", m->global_step, what);
    h5_attr_write_i64(f, "opt_step", m->opt_step, what);
    h5_attr_write_i64(f, "world_size", m->world_size, what);
    h5_attr_write_i64(f, "seed", m->seed, what);
    h5_attr_write_i64(f, "feature_dim", m->feature_dim, what);
    h5_attr_write_i64(f, "num_classes", m->num_classes, what);
    h5_attr_write_i64(f, "visual_dim", m->visual_dim, what);
    h5_attr_write_i64(f, "visual_ratio", m->visual_ratio, what);
    h5_attr_write_f64(f, "ep_loss_sum", m->ep_loss_sum, what);
    h5_attr_write_i64(f, "ep_correct", m->ep_correct, what);
    h5_attr_write_i64(f, "ep_count", m->ep_count, what);
    h5_attr_write_f64(f, "ep_seconds", m->ep_seconds, what);
    h5_attr_write_str(f, "config", m->config, what);
    int64_t s;
    memcpy(&s, &sum, sizeof s);
    h5_attr_write_i64(f, "checksum", s, what);
}

static int is_ckpt_name(const char *name, long long *step) {
    int len = 0;
    if (sscanf(name, "ckpt-%lld.h5%n", step, &len) == 1 && len == (int)strlen(name)) return 1;
    return 0;
}

typedef struct {
    long long step;
    char name[256];
} entry_t;

static int cmp_entry_desc(const void *a, const void *b) {
    long long x = ((const entry_t *)a)->step, y = ((const entry_t *)b)->step;
    return x < y ? 1 : x > y ? -1 : 0;
}

// Checkpoint files in dir, newest first. Returns count; *out is malloc'ed.
static int list_ckpts(const char *dir, entry_t **out) {
    *out = NULL;
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        long long step;
        if (!is_ckpt_name(e->d_name, &step) || strlen(e->d_name) >= 256) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            entry_t *g = realloc(*out, (size_t)cap * sizeof(entry_t));
            if (!g) spk_die(SPK_EXIT_FAILURE, "out of memory listing %s", dir);
            *out = g;
        }
        (*out)[n].step = step;
        snprintf((*out)[n].name, sizeof((*out)[n].name), "%s", e->d_name);
        n++;
    }
    closedir(d);
    qsort(*out, (size_t)n, sizeof(entry_t), cmp_entry_desc);
    return n;
}

void ckpt_save(const char *dir, const ckpt_meta_t *meta, const ckpt_tensors_t *t, int keep,
               char *path_out, size_t cap) {
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        spk_die(SPK_EXIT_FAILURE, "%s: cannot create the checkpoint directory (%s)", dir, strerror(errno));
    char tmp[4200];
    snprintf(path_out, cap, "%s/ckpt-%012lld.h5", dir, (long long)meta->global_step);
    snprintf(tmp, sizeof tmp, "%s/.ckpt-%012lld.h5.tmp", dir, (long long)meta->global_step);

    h5_quiet();
    hid_t f = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (f < 0) spk_die(SPK_EXIT_FAILURE, "%s: cannot create the checkpoint file", tmp);
    hsize_t n = (hsize_t)t->params->total;
    h5_write_array(f, "params", H5T_IEEE_F32LE, 1, &n, t->param_data, tmp);
    write_table(f, "param", t->params, tmp);
    if (t->state->total > 0) {
        hsize_t ns = (hsize_t)t->state->total;
        h5_write_array(f, "state", H5T_IEEE_F32LE, 1, &ns, t->state_data, tmp);
        write_table(f, "state", t->state, tmp);
    }
    if (t->opt_slots > 0) {
        hsize_t od[2] = {(hsize_t)t->opt_slots, n};
        h5_write_array(f, "optimizer_slots", H5T_IEEE_F32LE, 2, od, t->opt_data, tmp);
    }
    write_meta(f, meta, checksum(meta, t, t->opt_data, (size_t)t->opt_slots * (size_t)t->params->total), tmp);
    h5Check(H5Fclose(f), "%s: cannot finish the checkpoint file", tmp);
    fsync_path(tmp, 0);
    if (rename(tmp, path_out) != 0)
        spk_die(SPK_EXIT_FAILURE, "%s: cannot rename the checkpoint into place (%s)", path_out, strerror(errno));
    fsync_path(dir, 1);

    entry_t *list;
    int count = list_ckpts(dir, &list);
    for (int i = keep; i < count; i++) {
        char old[4400];
        snprintf(old, sizeof old, "%s/%s", dir, list[i].name);
        if (unlink(old) != 0) spk_warn("%s: cannot remove an old checkpoint (%s)", old, strerror(errno));
    }
    free(list);
}

// ---- load ------------------------------------------------------------------------------

#define FAIL(code, ...)                              \
    do {                                             \
        snprintf(err, errcap, __VA_ARGS__);          \
        rc = (code);                                 \
        goto done;                                   \
    } while (0)

static int read_meta(hid_t f, const char *path, ckpt_meta_t *m, char *err, size_t errcap) {
    int rc = 0;
    char fmt[64];
    int64_t version = 0;
    memset(m, 0, sizeof *m);
    if (h5_attr_read_str(f, "spkddp_format", fmt, sizeof fmt) != 0 || strcmp(fmt, CKPT_FORMAT) != 0)
        FAIL(SPK_EXIT_CKPT, "%s: not an spkddp checkpoint (attribute 'spkddp_format')", path);
    if (h5_attr_read_i64(f, "version", &version) != 0 || version != CKPT_VERSION)
        FAIL(SPK_EXIT_CKPT, "%s: checkpoint format version %lld, this spkddp reads version %d (attribute 'version')",
             path, (long long)version, CKPT_VERSION);
    struct { const char *name; int64_t *v; } ints[] = {
        {"epoch", &m->epoch}, {"samples_in_epoch", &m->samples_in_epoch}, {"step_in_epoch", &m->step_in_epoch},
        {"global_step", &m->global_step}, {"opt_step", &m->opt_step}, {"world_size", &m->world_size},
        {"seed", &m->seed}, {"ep_correct", &m->ep_correct}, {"ep_count", &m->ep_count},
        {"feature_dim", &m->feature_dim}, {"num_classes", &m->num_classes},
        {"visual_dim", &m->visual_dim}, {"visual_ratio", &m->visual_ratio},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (h5_attr_read_i64(f, ints[i].name, ints[i].v) != 0)
            FAIL(SPK_EXIT_CKPT, "%s: checkpoint attribute '%s' is missing", path, ints[i].name);
    if (h5_attr_read_f64(f, "ep_loss_sum", &m->ep_loss_sum) != 0 || h5_attr_read_f64(f, "ep_seconds", &m->ep_seconds) != 0 ||
        h5_attr_read_str(f, "model", m->model, sizeof m->model) != 0 ||
        h5_attr_read_str(f, "optimizer", m->optimizer, sizeof m->optimizer) != 0 ||
        h5_attr_read_str(f, "config", m->config, sizeof m->config) != 0)
        FAIL(SPK_EXIT_CKPT, "%s: checkpoint metadata is incomplete", path);
done:
    return rc;
}

static hid_t open_ro(const char *path, char *err, size_t errcap) {
    h5_quiet();
    if (access(path, R_OK) != 0) {
        snprintf(err, errcap, "%s: cannot read the checkpoint (%s)", path, strerror(errno));
        return -1;
    }
    hid_t f = H5Fis_hdf5(path) > 0 ? H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT) : -1;
    if (f < 0) snprintf(err, errcap, "%s: not an HDF5 file", path);
    return f;
}

static int table_mismatch(const char *path, const char *what, const param_table_t *have,
                          const param_table_t *want, char *err, size_t errcap) {
    for (int i = 0; i < want->count && i < have->count; i++) {
        const param_tensor_t *a = &have->t[i], *b = &want->t[i];
        int same = strcmp(a->name, b->name) == 0 && a->ndim == b->ndim;
        for (int d = 0; same && d < a->ndim; d++) same = a->shape[d] == b->shape[d];
        if (!same) {
            snprintf(err, errcap, "%s: incompatible model: %s '%s' (%lld values) in the checkpoint, '%s' (%lld values) in this model",
                     path, what, a->name, (long long)a->numel, b->name, (long long)b->numel);
            return 1;
        }
    }
    if (have->count != want->count) {
        snprintf(err, errcap, "%s: incompatible model: %d %s tensors in the checkpoint, %d in this model", path,
                 have->count, what, want->count);
        return 1;
    }
    return 0;
}

static int read_floats(hid_t f, const char *name, float *out, hsize_t expect0, hsize_t expect1) {
    hsize_t dims[2] = {0, 0};
    int r = h5_dataset_shape(f, name, dims, 2);
    if (r < 1 || dims[0] != expect0 || (r == 2 && dims[1] != expect1) || (r == 1 && expect1 != 0)) return -1;
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    int ok = d >= 0 && H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) >= 0;
    if (d >= 0) H5Dclose(d);
    return ok ? 0 : -1;
}

int ckpt_load(const char *path, const char *expect_model, ckpt_meta_t *meta, const ckpt_tensors_t *t,
              char *err, size_t errcap) {
    int rc = 0;
    param_table_t pt = {0}, stt = {0};
    float *opt = t->opt_data;
    hid_t f = open_ro(path, err, errcap);
    if (f < 0) return SPK_EXIT_CKPT;
    if ((rc = read_meta(f, path, meta, err, errcap))) goto done;
    if (strcmp(meta->model, expect_model) != 0)
        FAIL(SPK_EXIT_CKPT, "%s: incompatible model: the checkpoint holds model '%s', this run has --model %s", path,
             meta->model, expect_model);
    if (read_table(f, "param", &pt) != 0 || read_table(f, "state", &stt) != 0)
        FAIL(SPK_EXIT_CKPT, "%s: the parameter layout ('param_layout') is unreadable", path);
    if (table_mismatch(path, "parameter", &pt, t->params, err, errcap) ||
        table_mismatch(path, "state", &stt, t->state, err, errcap)) {
        rc = SPK_EXIT_CKPT;  // err already says which tensor
        goto done;
    }
    if (read_floats(f, "params", t->param_data, (hsize_t)t->params->total, 0) != 0)
        FAIL(SPK_EXIT_CKPT, "%s: dataset 'params' is missing or has the wrong size", path);
    if (t->state->total > 0 && read_floats(f, "state", t->state_data, (hsize_t)t->state->total, 0) != 0)
        FAIL(SPK_EXIT_CKPT, "%s: dataset 'state' is missing or has the wrong size", path);
    // Optimizer slots: into the caller's buffer when it wants them, else a scratch copy
    // that only feeds the checksum (inference needs no optimizer state).
    hsize_t od[2] = {0, 0};
    int slots = h5_dataset_shape(f, "optimizer_slots", od, 2) == 2 ? (int)od[0] : 0;
    if (t->opt_slots > 0 && slots != t->opt_slots)
        FAIL(SPK_EXIT_CKPT, "%s: the checkpoint has %d optimizer slots ('%s'), this run's optimizer needs %d", path, slots,
             meta->optimizer, t->opt_slots);
    size_t opt_n = (size_t)slots * (size_t)t->params->total;
    opt = t->opt_slots > 0 ? t->opt_data : mallocCheck((opt_n ? opt_n : 1) * sizeof(float));
    if (slots > 0 && read_floats(f, "optimizer_slots", opt, (hsize_t)slots, (hsize_t)t->params->total) != 0)
        FAIL(SPK_EXIT_CKPT, "%s: dataset 'optimizer_slots' does not fit the parameters", path);
    int64_t stored;
    uint64_t want;
    if (h5_attr_read_i64(f, "checksum", &stored) != 0) FAIL(SPK_EXIT_CKPT, "%s: attribute 'checksum' is missing", path);
    want = checksum(meta, t, opt, opt_n);
    if (memcmp(&stored, &want, sizeof want) != 0)
        FAIL(SPK_EXIT_CKPT, "%s: checksum mismatch: the checkpoint is corrupt", path);
done:
    if (opt != t->opt_data) free(opt);
    param_table_free(&pt);
    param_table_free(&stt);
    H5Fclose(f);
    return rc;
}

int ckpt_peek(const char *path, ckpt_meta_t *meta, param_table_t *params, param_table_t *state,
              int *opt_slots, char *err, size_t errcap) {
    int rc = 0;
    hid_t f = open_ro(path, err, errcap);
    if (f < 0) return SPK_EXIT_CKPT;
    if ((rc = read_meta(f, path, meta, err, errcap))) goto done;
    if (read_table(f, "param", params) != 0 || read_table(f, "state", state) != 0)
        FAIL(SPK_EXIT_CKPT, "%s: the parameter layout ('param_layout') is unreadable", path);
    hsize_t od[2] = {0, 0};
    *opt_slots = h5_dataset_shape(f, "optimizer_slots", od, 2) == 2 ? (int)od[0] : 0;
done:
    H5Fclose(f);
    return rc;
}

// A checkpoint is complete when it loads into buffers of its own layout with a valid checksum.
static int ckpt_verify(const char *path) {
    ckpt_meta_t *m = mallocCheck(sizeof *m);
    param_table_t p = {0}, s = {0};
    int slots = 0;
    char err[512];
    int ok = ckpt_peek(path, m, &p, &s, &slots, err, sizeof err) == 0;
    if (ok) {
        float *pd = mallocCheck((size_t)p.total * sizeof(float));
        float *sd = mallocCheck((size_t)s.total * sizeof(float));
        float *od = mallocCheck((size_t)slots * (size_t)p.total * sizeof(float));
        ckpt_tensors_t t = {&p, pd, &s, sd, slots, od};
        ok = ckpt_load(path, m->model, m, &t, err, sizeof err) == 0;
        free(pd);
        free(sd);
        free(od);
    }
    if (!ok) spk_warn("skipping %s: %s", path, err);
    param_table_free(&p);
    param_table_free(&s);
    free(m);
    return ok;
}

int ckpt_find_latest(const char *dir, char *path_out, size_t cap) {
    entry_t *list;
    int n = list_ckpts(dir, &list), found = 0;
    for (int i = 0; i < n && !found; i++) {
        snprintf(path_out, cap, "%s/%s", dir, list[i].name);
        found = ckpt_verify(path_out);
    }
    free(list);
    return found;
}
