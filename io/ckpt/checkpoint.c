#include "io/ckpt/checkpoint.h"

#include "io/ckpt/ckpt_checksum.h"
#include "io/common/atomic_file.h"
#include "io/common/h5util.h"
#include "io/dataset/dataset.h"
#include "kernels/base/check.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CKPT_MAX_TENSORS 65536
#define CKPT_MAX_VALUES  ((int64_t)1 << 40)  // per table; more than any node holds
#define CKPT_MAX_DIM     (((int64_t)1 << 31) - 1)

// The integer attributes, in both formats, and those format 2 added.
typedef struct {
    const char *name;
    size_t off;
} field_t;
#define FIELD(f) \
    { #f, offsetof(ckpt_meta_t, f) }
static const field_t INT_FIELDS[] = {
    FIELD(epoch),       FIELD(samples_in_epoch), FIELD(step_in_epoch), FIELD(global_step),
    FIELD(opt_step),    FIELD(world_size),       FIELD(seed),          FIELD(feature_dim),
    FIELD(num_classes), FIELD(visual_dim),       FIELD(visual_ratio),  FIELD(ep_correct),
    FIELD(ep_count),
};
static const field_t INT_FIELDS_V2[] = {FIELD(run_id), FIELD(global_batch), FIELD(data_fingerprint)};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static int64_t *field(ckpt_meta_t *m, const field_t *f) { return (int64_t *)((char *)m + f->off); }

// ---- write --------------------------------------------------------------------------------

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

static void write_meta(hid_t f, const ckpt_meta_t *m, const char *what) {
    h5_attr_write_str(f, "spkddp_format", CKPT_FORMAT, what);
    h5_attr_write_i64(f, "version", CKPT_VERSION, what);
    h5_attr_write_str(f, "model", m->model, what);
    h5_attr_write_str(f, "optimizer", m->optimizer, what);
    for (size_t i = 0; i < COUNT(INT_FIELDS); i++)
        h5_attr_write_i64(f, INT_FIELDS[i].name, *field((ckpt_meta_t *)m, &INT_FIELDS[i]), what);
    for (size_t i = 0; i < COUNT(INT_FIELDS_V2); i++)
        h5_attr_write_i64(f, INT_FIELDS_V2[i].name, *field((ckpt_meta_t *)m, &INT_FIELDS_V2[i]), what);
    h5_attr_write_f64(f, "ep_loss_sum", m->ep_loss_sum, what);
    h5_attr_write_f64(f, "ep_seconds", m->ep_seconds, what);
    h5_attr_write_f64(f, "ep_grad_norm_sum", m->ep_grad_norm_sum, what);
    h5_attr_write_f64(f, "ep_grad_norm_max", m->ep_grad_norm_max, what);
    h5_attr_write_i64(f, "ep_skipped", m->ep_skipped, what);
    h5_attr_write_str(f, "config", m->config, what);
}

// The whole file built in memory, so HDF5 never holds a half-written file on disk, and
// written atomically to path_out.
static void write_file(const char *path_out, const ckpt_meta_t *meta, const ckpt_tensors_t *t, atomic_mode_t mode) {
    h5_quiet();
    hid_t f = h5_mem_create(path_out);
    hsize_t n = (hsize_t)t->params->total;
    h5_write_array(f, "params", H5T_IEEE_F32LE, 1, &n, t->param_data, path_out);
    write_table(f, "param", t->params, path_out);
    if (t->state->total > 0) {
        hsize_t ns = (hsize_t)t->state->total;
        h5_write_array(f, "state", H5T_IEEE_F32LE, 1, &ns, t->state_data, path_out);
        write_table(f, "state", t->state, path_out);
    }
    if (t->opt_slots > 0) {
        hsize_t od[2] = {(hsize_t)t->opt_slots, n};
        h5_write_array(f, "optimizer_slots", H5T_IEEE_F32LE, 2, od, t->opt_data, path_out);
    }
    write_meta(f, meta, path_out);
    char err[1024];
    uint64_t sum;
    if (ckpt_checksum_v2(f, &sum, err, sizeof err) != 0)
        spk_die(SPK_EXIT_FAILURE, "%s: cannot checksum: %s", path_out, err);
    int64_t s;
    memcpy(&s, &sum, sizeof s);
    h5_attr_write_i64(f, "checksum", s, path_out);
    void *image;
    size_t bytes;
    if (h5_mem_image(f, &image, &bytes) != 0)
        spk_die(SPK_EXIT_FAILURE, "%s: HDF5 cannot hand over the file built in memory", path_out);
    h5Check(H5Fclose(f), "%s: cannot close the file built in memory", path_out);
    int rc = atomic_write_file(path_out, image, bytes, mode, err, sizeof err);
    free(image);
    if (rc != 0 && errno == EEXIST)
        spk_die(
            SPK_EXIT_CKPT,
            "%s; this run did not write it (is the directory another run's, or one resumed from an older checkpoint?)",
            err);
    if (rc != 0) spk_die(SPK_EXIT_FAILURE, "%s", err);
}

void ckpt_write(const char *dir, const ckpt_meta_t *meta, const ckpt_tensors_t *t, char *path_out, size_t cap) {
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        spk_die(SPK_EXIT_FAILURE, "%s: cannot create the checkpoint directory (%s)", dir, strerror(errno));
    snprintf(path_out, cap, "%s/ckpt-%012lld.h5", dir, (long long)meta->global_step);
    write_file(path_out, meta, t, ATOMIC_NO_REPLACE);
}

void ckpt_write_path(const char *path, const ckpt_meta_t *meta, const ckpt_tensors_t *t) {
    write_file(path, meta, t, ATOMIC_REPLACE);
}

uint64_t ckpt_new_run_id(void) {
    uint64_t id = 0;
    if (getrandom(&id, sizeof id, 0) != (ssize_t)sizeof id)
        id = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ull ^ (uint64_t)getpid();
    return id ? id : 1;
}

int ckpt_config_value(const char *config, const char *key, char *out, size_t cap) {
    const size_t len = strlen(key);
    for (const char *p = config; p && *p;) {
        const char *nl = strchr(p, '\n');
        const size_t line = nl ? (size_t)(nl - p) : strlen(p);
        if (line > len && strncmp(p, key, len) == 0 && p[len] == '=') {
            size_t vlen = line - len - 1;
            if (vlen >= cap) vlen = cap - 1;
            memcpy(out, p + len + 1, vlen);
            out[vlen] = 0;
            return 0;
        }
        p = nl ? nl + 1 : NULL;
    }
    return -1;
}

// ---- read ---------------------------------------------------------------------------------

#define FAIL(code, ...)                     \
    do {                                    \
        snprintf(err, errcap, __VA_ARGS__); \
        return (code);                      \
    } while (0)

// Every number that sizes something or counts something stays in its range, so a file that
// passes its checksum but was written wrongly still cannot drive an allocation or a loop.
static int check_meta(const ckpt_meta_t *m, const char *path, char *err, size_t errcap) {
    const struct {
        const char *name;
        int64_t v, lo, hi;
    } r[] = {
        {"epoch", m->epoch, 0, INT64_MAX / 2},
        {"samples_in_epoch", m->samples_in_epoch, 0, INT64_MAX / 2},
        {"step_in_epoch", m->step_in_epoch, 0, INT64_MAX / 2},
        {"global_step", m->global_step, 0, INT64_MAX / 2},
        {"opt_step", m->opt_step, 0, INT64_MAX / 2},
        {"world_size", m->world_size, 1, 1 << 24},
        {"feature_dim", m->feature_dim, 1, DATASET_MAX_DIM},
        {"num_classes", m->num_classes, 1, DATASET_MAX_SPEAKERS},
        {"visual_dim", m->visual_dim, 0, DATASET_MAX_DIM},
        {"visual_ratio", m->visual_ratio, m->visual_dim > 0 ? 1 : 0, 1 << 16},
        {"ep_count", m->ep_count, 0, INT64_MAX / 2},
        {"ep_correct", m->ep_correct, 0, m->ep_count},
        {"global_batch", m->global_batch, 0, INT64_MAX / 2},
        {"ep_skipped", m->ep_skipped, 0, INT64_MAX / 2},
    };
    for (size_t i = 0; i < COUNT(r); i++)
        if (r[i].v < r[i].lo || r[i].v > r[i].hi)
            FAIL(SPK_EXIT_CKPT, "%s: checkpoint attribute '%s' = %lld is outside [%lld, %lld]", path, r[i].name,
                 (long long)r[i].v, (long long)r[i].lo, (long long)r[i].hi);
    if (!isfinite(m->ep_loss_sum))
        FAIL(SPK_EXIT_CKPT, "%s: checkpoint attribute 'ep_loss_sum' is not a finite number", path);
    if (!(m->ep_seconds >= 0 && isfinite(m->ep_seconds)))
        FAIL(SPK_EXIT_CKPT, "%s: checkpoint attribute 'ep_seconds' is not a finite number of seconds", path);
    if (!(m->ep_grad_norm_sum >= 0 && isfinite(m->ep_grad_norm_sum)) ||
        !(m->ep_grad_norm_max >= 0 && isfinite(m->ep_grad_norm_max)))
        FAIL(SPK_EXIT_CKPT, "%s: checkpoint attribute 'ep_grad_norm_sum' or 'ep_grad_norm_max' is not a finite norm",
             path);
    if (!m->model[0]) FAIL(SPK_EXIT_CKPT, "%s: checkpoint attribute 'model' is empty", path);
    return 0;
}

// The two attributes that say how to read the rest.
static int read_format(hid_t f, const char *path, ckpt_meta_t *m, char *err, size_t errcap) {
    char fmt[64];
    int64_t version = 0;
    memset(m, 0, sizeof *m);
    if (h5_attr_read_str(f, "spkddp_format", fmt, sizeof fmt) != 0 || strcmp(fmt, CKPT_FORMAT) != 0)
        FAIL(SPK_EXIT_CKPT, "%s: not an spkddp checkpoint (attribute 'spkddp_format')", path);
    if (h5_attr_read_i64(f, "version", &version) != 0 || version < CKPT_VERSION_OLDEST || version > CKPT_VERSION)
        FAIL(SPK_EXIT_CKPT,
             "%s: checkpoint format version %lld, this spkddp reads versions %d to %d (attribute 'version')", path,
             (long long)version, CKPT_VERSION_OLDEST, CKPT_VERSION);
    m->version = version;
    return 0;
}

static int read_meta(hid_t f, const char *path, ckpt_meta_t *m, char *err, size_t errcap) {
    const int64_t version = m->version;
    int rc;
    for (size_t i = 0; i < COUNT(INT_FIELDS); i++)
        if ((rc = h5_attr_read_i64(f, INT_FIELDS[i].name, field(m, &INT_FIELDS[i]))) != 0)
            FAIL(SPK_EXIT_CKPT, "%s: checkpoint attribute '%s' %s (an integer)", path, INT_FIELDS[i].name,
                 h5_status_str(rc));
    for (size_t i = 0; version >= 2 && i < COUNT(INT_FIELDS_V2); i++)
        if ((rc = h5_attr_read_i64(f, INT_FIELDS_V2[i].name, field(m, &INT_FIELDS_V2[i]))) != 0)
            FAIL(SPK_EXIT_CKPT, "%s: checkpoint attribute '%s' %s (an integer)", path, INT_FIELDS_V2[i].name,
                 h5_status_str(rc));
    const struct {
        const char *name;
        double *v;
    } reals[] = {{"ep_loss_sum", &m->ep_loss_sum}, {"ep_seconds", &m->ep_seconds}};
    for (size_t i = 0; i < COUNT(reals); i++)
        if ((rc = h5_attr_read_f64(f, reals[i].name, reals[i].v)) != 0)
            FAIL(SPK_EXIT_CKPT, "%s: checkpoint attribute '%s' %s (a number)", path, reals[i].name, h5_status_str(rc));
    // Added later within format 2: absent from older files, which read as 0.
    const struct {
        const char *name;
        double *v;
    } optional[] = {{"ep_grad_norm_sum", &m->ep_grad_norm_sum}, {"ep_grad_norm_max", &m->ep_grad_norm_max}};
    for (size_t i = 0; i < COUNT(optional); i++)
        if ((rc = h5_attr_read_f64(f, optional[i].name, optional[i].v)) != 0 && rc != H5U_MISSING)
            FAIL(SPK_EXIT_CKPT, "%s: checkpoint attribute '%s' %s (a number)", path, optional[i].name,
                 h5_status_str(rc));
    if ((rc = h5_attr_read_i64(f, "ep_skipped", &m->ep_skipped)) != 0 && rc != H5U_MISSING)
        FAIL(SPK_EXIT_CKPT, "%s: checkpoint attribute 'ep_skipped' %s (an integer)", path, h5_status_str(rc));
    const struct {
        const char *name;
        char *v;
        size_t cap;
    } strs[] = {{"model", m->model, sizeof m->model},
                {"optimizer", m->optimizer, sizeof m->optimizer},
                {"config", m->config, sizeof m->config}};
    for (size_t i = 0; i < COUNT(strs); i++)
        if ((rc = h5_attr_read_str(f, strs[i].name, strs[i].v, strs[i].cap)) != 0)
            FAIL(SPK_EXIT_CKPT, "%s: checkpoint attribute '%s' %s (a string of at most %zu bytes)", path, strs[i].name,
                 h5_status_str(rc), strs[i].cap - 1);
    return check_meta(m, path, err, errcap);
}

// <prefix>_names (one string per tensor) and <prefix>_layout (int64 [count, 6]: offset, ndim,
// shape) into p. Both absent: an empty table.
static int read_table(hid_t f, const char *path, const char *prefix, param_table_t *p, char *err, size_t errcap) {
    char lname[64], nname[64];
    snprintf(lname, sizeof lname, "%s_layout", prefix);
    snprintf(nname, sizeof nname, "%s_names", prefix);
    memset(p, 0, sizeof *p);
    h5_info_t li, ni;
    int lrc = h5_dataset_info(f, lname, &li), nrc = h5_dataset_info(f, nname, &ni);
    if (lrc == H5U_MISSING && nrc == H5U_MISSING) return 0;
    if (lrc != H5U_OK || li.rank != 2 || li.dims[1] != 6 || li.cls != H5T_INTEGER || !li.stored)
        FAIL(SPK_EXIT_CKPT, "%s: dataset '%s' must be stored integers of shape [tensors, 6]", path, lname);
    if (nrc != H5U_OK || ni.rank != 1 || ni.cls != H5T_STRING)
        FAIL(SPK_EXIT_CKPT, "%s: dataset '%s' must hold one string per tensor", path, nname);
    if (ni.dims[0] != li.dims[0])
        FAIL(SPK_EXIT_CKPT, "%s: '%s' names %llu tensors but '%s' lays out %llu", path, nname,
             (unsigned long long)ni.dims[0], lname, (unsigned long long)li.dims[0]);
    if (li.dims[0] > CKPT_MAX_TENSORS)
        FAIL(SPK_EXIT_CKPT, "%s: '%s' lays out more than %d tensors", path, lname, CKPT_MAX_TENSORS);
    const int n = (int)li.dims[0];
    int64_t *layout = mallocCheck((size_t)n * 6 * sizeof(int64_t));
    char **names = h5_read_strings(f, nname, n);
    int rc = 0;
    if (!names || h5_read_i64s(f, lname, layout, (size_t)n * 6) != H5U_OK) {
        snprintf(err, errcap, "%s: '%s' or '%s' cannot be read", path, nname, lname);
        rc = SPK_EXIT_CKPT;
    }
    for (int i = 0; i < n && rc == 0; i++) {
        const int64_t *row = &layout[i * 6];
        int64_t numel = 1;
        int ok = names[i][0] && strlen(names[i]) < PARAM_NAME_MAX && row[1] >= 1 && row[1] <= PARAM_MAX_DIMS &&
                 row[0] == p->total;
        for (int d = 0; ok && d < row[1]; d++)
            ok = row[2 + d] >= 1 && row[2 + d] <= CKPT_MAX_DIM && !__builtin_mul_overflow(numel, row[2 + d], &numel);
        if (ok) ok = numel <= CKPT_MAX_VALUES - p->total;
        if (!ok) {
            snprintf(err, errcap,
                     "%s: '%s' row %d (tensor '%.64s'): offset %lld, %lld dimensions, shape [%lld, %lld, %lld, %lld] "
                     "is not a valid layout",
                     path, lname, i, names[i], (long long)row[0], (long long)row[1], (long long)row[2],
                     (long long)row[3], (long long)row[4], (long long)row[5]);
            rc = SPK_EXIT_CKPT;
            break;
        }
        param_table_add(p, names[i], (int)row[1], &row[2]);
    }
    h5_free_strings(names, n);
    free(layout);
    if (rc) param_table_free(p);
    return rc;
}

// A stored float dataset of exactly the given shape (d1 = 0: 1-D).
static int float_dataset_fits(hid_t f, const char *name, hsize_t d0, hsize_t d1) {
    h5_info_t in;
    return h5_dataset_info(f, name, &in) == H5U_OK && in.cls == H5T_FLOAT && in.stored && in.rank == (d1 ? 2 : 1) &&
           in.dims[0] == d0 && (!d1 || in.dims[1] == d1);
}

static int read_floats(hid_t f, const char *name, float *out) {
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    int ok = d >= 0 && H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) >= 0;
    if (d >= 0) H5Dclose(d);
    return ok ? 0 : -1;
}

// An open checkpoint whose metadata and layout have been checked (format 2: checksummed too).
typedef struct {
    hid_t f;
    ckpt_meta_t *meta;
    param_table_t params, state;
    int slots;
} opened_t;

static void close_ckpt(opened_t *o) {
    if (o->f >= 0) H5Fclose(o->f);
    param_table_free(&o->params);
    param_table_free(&o->state);
    o->f = -1;
}

// Everything but the floats of the open file o->f.
static int check_ckpt(opened_t *o, const char *path, char *err, size_t errcap) {
    int rc = read_format(o->f, path, o->meta, err, errcap);
    if (rc == 0 && o->meta->version >= 2) {  // checksum first: what follows parses verified bytes
        int64_t stored;
        uint64_t sum;
        char why[512];
        if (h5_attr_read_i64(o->f, "checksum", &stored) != 0)
            FAIL(SPK_EXIT_CKPT, "%s: attribute 'checksum' is missing", path);
        if (ckpt_checksum_v2(o->f, &sum, why, sizeof why) != 0)
            FAIL(SPK_EXIT_CKPT, "%s: cannot be checksummed: %s", path, why);
        if (memcmp(&stored, &sum, sizeof sum) != 0)
            FAIL(SPK_EXIT_CKPT, "%s: checksum mismatch: the checkpoint is corrupt", path);
    }
    if (rc == 0) rc = read_meta(o->f, path, o->meta, err, errcap);
    if (rc == 0) rc = read_table(o->f, path, "param", &o->params, err, errcap);
    if (rc == 0) rc = read_table(o->f, path, "state", &o->state, err, errcap);
    if (rc) return rc;
    if (!float_dataset_fits(o->f, "params", (hsize_t)o->params.total, 0))
        FAIL(SPK_EXIT_CKPT, "%s: dataset 'params' is missing or is not the %lld stored floats 'param_layout' lays out",
             path, (long long)o->params.total);
    if (o->state.total > 0 && !float_dataset_fits(o->f, "state", (hsize_t)o->state.total, 0))
        FAIL(SPK_EXIT_CKPT, "%s: dataset 'state' is missing or is not the %lld stored floats 'state_layout' lays out",
             path, (long long)o->state.total);
    h5_info_t oi;
    if (h5_dataset_info(o->f, "optimizer_slots", &oi) == H5U_MISSING) return 0;
    if (oi.rank != 2 || oi.dims[0] < 1 || oi.dims[0] > CKPT_MAX_SLOTS ||
        !float_dataset_fits(o->f, "optimizer_slots", oi.dims[0], (hsize_t)o->params.total))
        FAIL(SPK_EXIT_CKPT, "%s: dataset 'optimizer_slots' must be 1 to %d stored rows of the %lld parameters", path,
             CKPT_MAX_SLOTS, (long long)o->params.total);
    o->slots = (int)oi.dims[0];
    return 0;
}

static int open_ckpt(const char *path, ckpt_meta_t *meta, opened_t *o, char *err, size_t errcap) {
    memset(o, 0, sizeof *o);
    o->f = -1;
    o->meta = meta;
    h5_quiet();
    if (access(path, R_OK) != 0) FAIL(SPK_EXIT_CKPT, "%s: cannot read the checkpoint (%s)", path, strerror(errno));
    o->f = H5Fis_hdf5(path) > 0 ? H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT) : -1;
    if (o->f < 0) FAIL(SPK_EXIT_CKPT, "%s: not an HDF5 file (or a truncated one)", path);
    return check_ckpt(o, path, err, errcap);
}

// The floats into t (whose layout matches the file's), and format 1's checksum.
static int read_stored(const opened_t *o, const char *path, const ckpt_tensors_t *t, char *err, size_t errcap) {
    if (t->opt_slots > 0 && o->slots != t->opt_slots)
        FAIL(SPK_EXIT_CKPT, "%s: the checkpoint has %d optimizer slots ('%s'), this run's optimizer needs %d", path,
             o->slots, o->meta->optimizer, t->opt_slots);
    if (read_floats(o->f, "params", t->param_data) != 0 ||
        (t->state->total > 0 && read_floats(o->f, "state", t->state_data) != 0))
        FAIL(SPK_EXIT_CKPT, "%s: datasets 'params'/'state' cannot be read", path);
    if (o->meta->version >= 2) {  // checksummed when opened
        if (t->opt_slots > 0 && read_floats(o->f, "optimizer_slots", t->opt_data) != 0)
            FAIL(SPK_EXIT_CKPT, "%s: dataset 'optimizer_slots' cannot be read", path);
        return 0;
    }
    // Format 1's checksum covers the optimizer slots, so a reader that does not want them
    // (inference) still reads them, into scratch.
    size_t opt_n = (size_t)o->slots * (size_t)o->params.total;
    float *opt = t->opt_slots > 0 ? t->opt_data : mallocCheck((opt_n ? opt_n : 1) * sizeof(float));
    int rc = o->slots > 0 && read_floats(o->f, "optimizer_slots", opt) != 0 ? -1 : 0;
    int64_t stored;
    uint64_t want = ckpt_checksum_v1(o->meta, t, opt, opt_n);
    if (opt != t->opt_data) free(opt);
    if (rc) FAIL(SPK_EXIT_CKPT, "%s: dataset 'optimizer_slots' cannot be read", path);
    if (h5_attr_read_i64(o->f, "checksum", &stored) != 0)
        FAIL(SPK_EXIT_CKPT, "%s: attribute 'checksum' is missing", path);
    if (memcmp(&stored, &want, sizeof want) != 0)
        FAIL(SPK_EXIT_CKPT, "%s: checksum mismatch: the checkpoint is corrupt", path);
    return 0;
}

// NaN or Inf in a stored buffer: a checkpoint of a run that had diverged, which the trainer
// never writes; loading it would only feed NaN to the model. Names the tensor.
static int find_nonfinite(const char *path, const char *what, const param_table_t *p, const float *x, int64_t n,
                          char *err, size_t errcap) {
    for (int64_t i = 0; i < n; i++) {
        if (isfinite(x[i])) continue;
        const int64_t j = i % (p->total ? p->total : 1);
        int k = 0;
        while (k + 1 < p->count && p->t[k + 1].offset <= j) k++;
        FAIL(SPK_EXIT_CKPT, "%s: dataset '%s' holds NaN or Inf (tensor '%s', value %lld)", path, what,
             p->count ? p->t[k].name : "?", (long long)(j - (p->count ? p->t[k].offset : 0)));
    }
    return 0;
}

// read_stored, and every value finite.
static int read_tensors(const opened_t *o, const char *path, const ckpt_tensors_t *t, char *err, size_t errcap) {
    int rc = read_stored(o, path, t, err, errcap);
    if (rc == 0) rc = find_nonfinite(path, "params", t->params, t->param_data, t->params->total, err, errcap);
    if (rc == 0) rc = find_nonfinite(path, "state", t->state, t->state_data, t->state->total, err, errcap);
    if (rc == 0)
        rc = find_nonfinite(path, "optimizer_slots", t->params, t->opt_data, (int64_t)t->opt_slots * t->params->total,
                            err, errcap);
    return rc;
}
static int table_mismatch(const char *path, const char *what, const param_table_t *have, const param_table_t *want,
                          char *err, size_t errcap) {
    for (int i = 0; i < want->count && i < have->count; i++) {
        const param_tensor_t *a = &have->t[i], *b = &want->t[i];
        int same = strcmp(a->name, b->name) == 0 && a->ndim == b->ndim;
        for (int d = 0; same && d < a->ndim; d++) same = a->shape[d] == b->shape[d];
        if (!same)
            FAIL(SPK_EXIT_CKPT,
                 "%s: incompatible model: %s '%s' (%lld values) in the checkpoint, '%s' (%lld values) in this model",
                 path, what, a->name, (long long)a->numel, b->name, (long long)b->numel);
    }
    if (have->count != want->count)
        FAIL(SPK_EXIT_CKPT, "%s: incompatible model: %d %s tensors in the checkpoint, %d in this model", path,
             have->count, what, want->count);
    return 0;
}

int ckpt_load(const char *path, const char *expect_model, ckpt_meta_t *meta, const ckpt_tensors_t *t, char *err,
              size_t errcap) {
    opened_t o;
    int rc = open_ckpt(path, meta, &o, err, errcap);
    if (rc == 0 && strcmp(meta->model, expect_model) != 0) {
        snprintf(err, errcap, "%s: incompatible model: the checkpoint holds model '%s', this run has --model %s", path,
                 meta->model, expect_model);
        rc = SPK_EXIT_CKPT;
    }
    if (rc == 0) rc = table_mismatch(path, "parameter", &o.params, t->params, err, errcap);
    if (rc == 0) rc = table_mismatch(path, "state", &o.state, t->state, err, errcap);
    if (rc == 0) rc = read_tensors(&o, path, t, err, errcap);
    close_ckpt(&o);
    return rc;
}

int ckpt_peek(const char *path, ckpt_meta_t *meta, param_table_t *params, param_table_t *state, int *opt_slots,
              char *err, size_t errcap) {
    opened_t o;
    int rc = open_ckpt(path, meta, &o, err, errcap);
    if (rc == 0) {
        *params = o.params;
        *state = o.state;
        *opt_slots = o.slots;
        memset(&o.params, 0, sizeof o.params);
        memset(&o.state, 0, sizeof o.state);
    }
    close_ckpt(&o);
    return rc;
}

// The floats of a checked checkpoint into buffers of its own layout: kept in img (which then
// owns o's tables), or dropped when img is NULL.
static int read_own_layout(opened_t *o, const char *path, char *err, size_t errcap, ckpt_image_t *img) {
    float *pd = mallocCheck(((size_t)o->params.total + 1) * sizeof(float));
    float *sd = mallocCheck(((size_t)o->state.total + 1) * sizeof(float));
    float *od = mallocCheck(((size_t)o->slots * (size_t)o->params.total + 1) * sizeof(float));
    ckpt_tensors_t t = {&o->params, pd, &o->state, sd, o->slots, od};
    int rc = read_tensors(o, path, &t, err, errcap);
    if (rc == 0 && img) {
        *img = (ckpt_image_t){o->meta, o->params, o->state, o->slots, pd, sd, od};
        memset(&o->params, 0, sizeof o->params);
        memset(&o->state, 0, sizeof o->state);
        return 0;
    }
    free(pd);
    free(sd);
    free(od);
    return rc;
}

int ckpt_image_load(const char *path, ckpt_image_t *img, char *err, size_t errcap) {
    memset(img, 0, sizeof *img);
    ckpt_meta_t *meta = callocCheck(1, sizeof *meta);
    opened_t o;
    int rc = open_ckpt(path, meta, &o, err, errcap);
    if (rc == 0) rc = read_own_layout(&o, path, err, errcap, img);
    close_ckpt(&o);
    if (rc) free(meta);
    return rc;
}

void ckpt_image_free(ckpt_image_t *img) {
    param_table_free(&img->params);
    param_table_free(&img->state);
    free(img->param_data);
    free(img->state_data);
    free(img->opt_data);
    free(img->meta);
    memset(img, 0, sizeof *img);
}

int ckpt_verify(const char *path, ckpt_meta_t *meta, char *err, size_t errcap) {
    ckpt_meta_t *m = meta ? meta : mallocCheck(sizeof *m);
    opened_t o;
    int rc = open_ckpt(path, m, &o, err, errcap);
    if (rc == 0) rc = read_own_layout(&o, path, err, errcap, NULL);
    close_ckpt(&o);
    if (m != meta) free(m);
    return rc;
}

int ckpt_verify_file(hid_t f, const char *path, ckpt_meta_t *meta, char *err, size_t errcap) {
    opened_t o = {.f = f, .meta = meta};
    int rc = check_ckpt(&o, path, err, errcap);
    if (rc == 0) rc = read_own_layout(&o, path, err, errcap, NULL);
    param_table_free(&o.params);
    param_table_free(&o.state);
    return rc;
}
