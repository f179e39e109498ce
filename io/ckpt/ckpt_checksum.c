#include "io/ckpt/ckpt_checksum.h"

#include "io/common/h5util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define ATTR_MAX_BYTES (1 << 20)          // attributes are small; a larger one is not ours
#define BLOCK_BYTES    ((size_t)8 << 20)  // datasets are hashed in blocks of rows

typedef struct {
    XXH3_state_t *h;
    char *err;
    size_t cap;
} walk_t;

static void put_u64(walk_t *w, uint64_t v) { XXH3_64bits_update(w->h, &v, sizeof v); }
static void put_str(walk_t *w, const char *s) {
    size_t n = strlen(s);
    put_u64(w, n);
    XXH3_64bits_update(w->h, s, n);
}

static int fail(walk_t *w, const char *fmt, const char *name) {
    snprintf(w->err, w->cap, fmt, name);
    return -1;
}

// Strings: each one's length and bytes, whatever the storage (fixed or variable length).
static int put_strings(walk_t *w, hid_t obj, int is_attr, hid_t ft, hsize_t n, const char *name) {
    int vlen = H5Tis_variable_str(ft) > 0;
    size_t width = vlen ? sizeof(char *) : H5Tget_size(ft) + 1;
    if (n * width > ATTR_MAX_BYTES * 64) return fail(w, "'%s' holds more strings than a checkpoint has", name);
    hid_t mt = H5Tcopy(H5T_C_S1);
    H5Tset_size(mt, vlen ? H5T_VARIABLE : width);
    H5Tset_cset(mt, H5Tget_cset(ft));
    H5Tset_strpad(mt, H5T_STR_NULLTERM);
    char *buf = calloc(n ? n : 1, width);
    int rc = -1;
    if (buf && (is_attr ? H5Aread(obj, mt, buf) : H5Dread(obj, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf)) >= 0) {
        for (hsize_t i = 0; i < n; i++) {
            const char *s = vlen ? ((char **)buf)[i] : buf + i * width;
            put_str(w, s ? s : "");
        }
        if (vlen) {
            hid_t sp = is_attr ? H5Aget_space(obj) : H5Dget_space(obj);
            H5Dvlen_reclaim(mt, sp, H5P_DEFAULT, buf);
            H5Sclose(sp);
        }
        rc = 0;
    } else {
        fail(w, "'%s' cannot be read", name);
    }
    free(buf);
    H5Tclose(mt);
    return rc;
}

// Numbers in the machine's native form of their file type, in blocks of rows.
static int put_numbers(walk_t *w, hid_t obj, int is_attr, hid_t ft, const h5_info_t *in, const char *name) {
    hid_t mt = H5Tget_native_type(ft, H5T_DIR_ASCEND);
    if (mt < 0) return fail(w, "'%s' has a number type this machine cannot hold", name);
    size_t row = H5Tget_size(mt);
    hsize_t rows = in->rank > 0 ? in->dims[0] : 1, total;
    int overflow = 0;
    for (int d = 1; d < in->rank; d++) overflow |= __builtin_mul_overflow(row, in->dims[d], &row);
    if (overflow || __builtin_mul_overflow(rows, row, &total)) {
        H5Tclose(mt);
        return fail(w, "'%s' declares more values than fit in memory", name);
    }
    hsize_t per = row >= BLOCK_BYTES ? 1 : BLOCK_BYTES / (row ? row : 1);
    if (per > rows) per = rows;
    if (is_attr && total > ATTR_MAX_BYTES) {
        H5Tclose(mt);
        return fail(w, "attribute '%s' is larger than a checkpoint's attributes are", name);
    }
    void *buf = malloc(per * row > 0 ? per * row : 1);
    int rc = buf ? 0 : fail(w, "'%s': out of memory hashing it", name);
    if (rc == 0 && (is_attr || in->rank == 0)) {
        if ((is_attr ? H5Aread(obj, mt, buf) : H5Dread(obj, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf)) < 0)
            rc = fail(w, "'%s' cannot be read", name);
        else
            XXH3_64bits_update(w->h, buf, total);
    } else if (rc == 0) {
        hid_t fs = H5Dget_space(obj);
        for (hsize_t r0 = 0; rc == 0 && r0 < rows; r0 += per) {
            hsize_t off[H5U_MAX_RANK] = {r0}, cnt[H5U_MAX_RANK];
            for (int d = 0; d < in->rank; d++) cnt[d] = in->dims[d];
            cnt[0] = rows - r0 < per ? rows - r0 : per;
            hid_t ms = H5Screate_simple(in->rank, cnt, NULL);
            if (H5Sselect_hyperslab(fs, H5S_SELECT_SET, off, NULL, cnt, NULL) < 0 ||
                H5Dread(obj, mt, ms, fs, H5P_DEFAULT, buf) < 0)
                rc = fail(w, "'%s' cannot be read", name);
            else
                XXH3_64bits_update(w->h, buf, cnt[0] * row);
            H5Sclose(ms);
        }
        H5Sclose(fs);
    }
    free(buf);
    H5Tclose(mt);
    return rc;
}

// One attribute or dataset: kind, name, class, element size and sign, dims, values.
static int put_object(walk_t *w, char kind, hid_t obj, const char *name) {
    int is_attr = kind == 'A';
    hid_t ft = is_attr ? H5Aget_type(obj) : H5Dget_type(obj);
    hid_t sp = is_attr ? H5Aget_space(obj) : H5Dget_space(obj);
    h5_info_t in = {0};
    in.rank = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    int rc =
        ft < 0 || in.rank < 0 || in.rank > H5U_MAX_RANK ? fail(w, "'%s' has an unreadable type or shape", name) : 0;
    if (rc == 0) {
        H5Sget_simple_extent_dims(sp, in.dims, NULL);
        in.cls = H5Tget_class(ft);
        in.npoints = 1;
        for (int d = 0; d < in.rank; d++) in.npoints *= in.dims[d];
        put_u64(w, (uint64_t)kind);
        put_str(w, name);
        put_u64(w, (uint64_t)in.cls);
        put_u64(w, in.cls == H5T_STRING ? 0 : H5Tget_size(ft));
        put_u64(w, in.cls == H5T_INTEGER ? (uint64_t)H5Tget_sign(ft) : 0);
        put_u64(w, (uint64_t)in.rank);
        for (int d = 0; d < in.rank; d++) put_u64(w, in.dims[d]);
        if (in.cls == H5T_STRING)
            rc = put_strings(w, obj, is_attr, ft, in.npoints, name);
        else if (in.cls == H5T_INTEGER || in.cls == H5T_FLOAT)
            rc = put_numbers(w, obj, is_attr, ft, &in, name);
        else
            rc = fail(w, "'%s' is neither numbers nor strings", name);
    }
    if (sp >= 0) H5Sclose(sp);
    if (ft >= 0) H5Tclose(ft);
    return rc;
}

typedef struct {
    walk_t *w;
    int root;
} attr_ctx_t;

static herr_t visit_attr(hid_t loc, const char *name, const H5A_info_t *info, void *data) {
    (void)info;
    attr_ctx_t *c = data;
    if (c->root && strcmp(name, "checksum") == 0) return 0;
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    if (a < 0) return fail(c->w, "attribute '%s' cannot be opened", name);
    int rc = put_object(c->w, 'A', a, name);
    H5Aclose(a);
    return rc;
}

static int put_attrs(walk_t *w, hid_t obj, int root) {
    attr_ctx_t c = {w, root};
    hsize_t idx = 0;
    if (H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, &idx, visit_attr, &c) < 0) {
        if (!w->err[0]) snprintf(w->err, w->cap, "the attributes cannot be listed");
        return -1;
    }
    return 0;
}

static herr_t visit_link(hid_t root, const char *name, const H5L_info_t *info, void *data) {
    walk_t *w = data;
    if (info->type != H5L_TYPE_HARD) return fail(w, "'%s' is a soft or external link", name);
    H5O_info_t oi;
    if (H5Oget_info_by_name(root, name, &oi, H5P_DEFAULT) < 0) return fail(w, "'%s' cannot be opened", name);
    hid_t obj = H5Oopen(root, name, H5P_DEFAULT);
    if (obj < 0) return fail(w, "'%s' cannot be opened", name);
    int rc = 0;
    if (oi.type == H5O_TYPE_DATASET) {
        h5_info_t in;
        if (h5_dataset_info(root, name, &in) != H5U_OK || !in.stored)
            rc = fail(w, "dataset '%s' declares values it does not store", name);
        else
            rc = put_object(w, 'D', obj, name);
    } else if (oi.type == H5O_TYPE_GROUP) {
        put_u64(w, 'G');
        put_str(w, name);
    } else {
        rc = fail(w, "'%s' is a named type, not data", name);
    }
    if (rc == 0) rc = put_attrs(w, obj, 0);
    H5Oclose(obj);
    return rc;
}

int ckpt_checksum_v2(hid_t f, uint64_t *sum, char *err, size_t cap) {
    err[0] = 0;
    walk_t w = {XXH3_createState(), err, cap};
    if (!w.h || XXH3_64bits_reset(w.h) != XXH_OK) {
        XXH3_freeState(w.h);
        snprintf(err, cap, "out of memory for the checksum");
        return -1;
    }
    int rc = put_attrs(&w, f, 1);
    if (rc == 0 && H5Lvisit(f, H5_INDEX_NAME, H5_ITER_INC, visit_link, &w) < 0) {
        if (!err[0]) snprintf(err, cap, "the file's objects cannot be listed");
        rc = -1;
    }
    *sum = XXH3_64bits_digest(w.h);
    XXH3_freeState(w.h);
    return rc;
}

static uint64_t fnv1a(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001B3ull;
    }
    return h;
}

uint64_t ckpt_checksum_v1(const ckpt_meta_t *m, const ckpt_tensors_t *t, const float *opt, size_t opt_n) {
    uint64_t h = 0xCBF29CE484222325ull;
    int64_t pos[4] = {m->epoch, m->samples_in_epoch, m->global_step, m->opt_step};
    h = fnv1a(h, pos, sizeof pos);
    h = fnv1a(h, t->param_data, (size_t)t->params->total * sizeof(float));
    h = fnv1a(h, t->state_data, (size_t)t->state->total * sizeof(float));
    h = fnv1a(h, opt, opt_n * sizeof(float));
    return h;
}
