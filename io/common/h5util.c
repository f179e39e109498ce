#include "io/common/h5util.h"

#include "kernels/base/check.h"
#include "kernels/base/env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void h5_quiet(void) {
    if (!spk_env_switch("SPKDDP_H5_DEBUG")) H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

static herr_t innermost(unsigned n, const H5E_error2_t *e, void *out) {
    (void)n;
    if (e->desc) snprintf(out, 512, "%s", e->desc);
    return 0;
}

void h5_error_reason(char *out, size_t cap) {
    char desc[512] = "";
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, innermost, desc);  // the last one visited is the deepest
    const char *best = NULL;
    for (int e = 1; e < 134; e++) {  // the errno strings, longest match first (EIO is in many)
        const char *s = strerror(e);
        if (strstr(desc, s) && (!best || strlen(s) > strlen(best))) best = s;
    }
    if (best)
        snprintf(out, cap, "%s", best);
    else
        snprintf(out, cap, "%s", desc[0] ? desc : "HDF5 gave no reason");
}

int h5_exists(hid_t loc, const char *name) { return H5Lexists(loc, name, H5P_DEFAULT) > 0; }

int h5_attr_exists(hid_t loc, const char *name) { return H5Aexists(loc, name) > 0; }

static void attr_write(hid_t loc, const char *name, hid_t type, const void *value, const char *what) {
    hid_t space = h5Check(H5Screate(H5S_SCALAR), "%s: cannot create a dataspace", what);
    if (H5Aexists(loc, name) > 0) h5Check(H5Adelete(loc, name), "%s: cannot replace attribute '%s'", what, name);
    hid_t a = h5Check(H5Acreate2(loc, name, type, space, H5P_DEFAULT, H5P_DEFAULT), "%s: cannot create attribute '%s'",
                      what, name);
    h5Check(H5Awrite(a, type, value), "%s: cannot write attribute '%s'", what, name);
    H5Aclose(a);
    H5Sclose(space);
}

void h5_attr_write_str(hid_t loc, const char *name, const char *value, const char *what) {
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, strlen(value) + 1);
    H5Tset_strpad(t, H5T_STR_NULLTERM);
    attr_write(loc, name, t, value, what);
    H5Tclose(t);
}

void h5_attr_write_i64(hid_t loc, const char *name, int64_t value, const char *what) {
    attr_write(loc, name, H5T_NATIVE_INT64, &value, what);
}

void h5_attr_write_f64(hid_t loc, const char *name, double value, const char *what) {
    attr_write(loc, name, H5T_NATIVE_DOUBLE, &value, what);
}

const char *h5_status_str(int status) {
    switch (status) {
        case H5U_OK:
            return "is fine";
        case H5U_MISSING:
            return "is missing";
        case H5U_WRONG_TYPE:
            return "has the wrong type";
        case H5U_TOO_LONG:
            return "is too long";
        default:
            return "is unreadable";
    }
}

// Opens attribute `name` holding exactly one value; its file type in *ft.
static int attr_open_one(hid_t loc, const char *name, hid_t *a, hid_t *ft) {
    if (H5Aexists(loc, name) <= 0) return H5U_MISSING;
    *a = H5Aopen(loc, name, H5P_DEFAULT);
    if (*a < 0) return H5U_UNREADABLE;
    *ft = H5Aget_type(*a);
    hid_t sp = H5Aget_space(*a);
    hssize_t npoints = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
    if (sp >= 0) H5Sclose(sp);
    if (*ft >= 0 && npoints == 1) return H5U_OK;
    if (*ft >= 0) H5Tclose(*ft);
    H5Aclose(*a);
    return *ft < 0 ? H5U_UNREADABLE : H5U_WRONG_TYPE;
}

// A memory string type matching the file's character set (HDF5 converts neither way
// between ASCII and UTF-8); size H5T_VARIABLE or a byte count.
static hid_t mem_string_type(hid_t ft, size_t size) {
    hid_t mt = H5Tcopy(H5T_C_S1);
    H5Tset_size(mt, size);
    H5Tset_cset(mt, H5Tget_cset(ft));
    H5Tset_strpad(mt, H5T_STR_NULLTERM);
    return mt;
}

int h5_attr_read_str(hid_t loc, const char *name, char *out, size_t cap) {
    hid_t a, ft;
    int rc = attr_open_one(loc, name, &a, &ft);
    if (rc) return rc;
    rc = H5U_WRONG_TYPE;
    if (H5Tget_class(ft) == H5T_STRING && H5Tis_variable_str(ft) > 0) {
        hid_t mt = mem_string_type(ft, H5T_VARIABLE);
        char *s = NULL;
        if (H5Aread(a, mt, &s) < 0)
            rc = H5U_UNREADABLE;
        else
            rc = s && strlen(s) >= cap ? H5U_TOO_LONG : (snprintf(out, cap, "%s", s ? s : ""), H5U_OK);
        if (s) H5free_memory(s);
        H5Tclose(mt);
    } else if (H5Tget_class(ft) == H5T_STRING) {
        size_t n = H5Tget_size(ft);
        char *buf = calloc(n + 1, 1);
        hid_t mt = mem_string_type(ft, n + 1);
        if (!buf || H5Aread(a, mt, buf) < 0)
            rc = H5U_UNREADABLE;
        else
            rc = strlen(buf) >= cap ? H5U_TOO_LONG : (snprintf(out, cap, "%s", buf), H5U_OK);
        H5Tclose(mt);
        free(buf);
    }
    H5Tclose(ft);
    H5Aclose(a);
    return rc;
}

// Integers of any width into int64; unsigned 64-bit values above INT64_MAX do not fit.
static int read_integers(hid_t obj, hid_t ft, int is_attr, int64_t *out, size_t n) {
    if (H5Tget_class(ft) != H5T_INTEGER) return H5U_WRONG_TYPE;
    int wide_unsigned = H5Tget_sign(ft) == H5T_SGN_NONE && H5Tget_size(ft) >= sizeof(int64_t);
    hid_t mt = wide_unsigned ? H5T_NATIVE_UINT64 : H5T_NATIVE_INT64;
    herr_t r = is_attr ? H5Aread(obj, mt, out) : H5Dread(obj, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, out);
    if (r < 0) return H5U_UNREADABLE;
    for (size_t i = 0; wide_unsigned && i < n; i++)
        if ((uint64_t)out[i] > (uint64_t)INT64_MAX) return H5U_WRONG_TYPE;
    return H5U_OK;
}

int h5_attr_read_i64(hid_t loc, const char *name, int64_t *out) {
    hid_t a, ft;
    int rc = attr_open_one(loc, name, &a, &ft);
    if (rc) return rc;
    int64_t v = 0;
    rc = read_integers(a, ft, 1, &v, 1);
    if (rc == H5U_OK) *out = v;
    H5Tclose(ft);
    H5Aclose(a);
    return rc;
}

int h5_attr_read_f64(hid_t loc, const char *name, double *out) {
    hid_t a, ft;
    int rc = attr_open_one(loc, name, &a, &ft);
    if (rc) return rc;
    H5T_class_t cls = H5Tget_class(ft);
    double v = 0;
    rc = cls != H5T_INTEGER && cls != H5T_FLOAT  ? H5U_WRONG_TYPE
         : H5Aread(a, H5T_NATIVE_DOUBLE, &v) < 0 ? H5U_UNREADABLE
                                                 : H5U_OK;
    if (rc == H5U_OK) *out = v;
    H5Tclose(ft);
    H5Aclose(a);
    return rc;
}

void h5_write_array(hid_t loc, const char *name, hid_t type, int rank, const hsize_t *dims, const void *data,
                    const char *what) {
    hid_t space = h5Check(H5Screate_simple(rank, dims, NULL), "%s: cannot create dataspace for '%s'", what, name);
    hid_t d = h5Check(H5Dcreate2(loc, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                      "%s: cannot create dataset '%s'", what, name);
    h5Check(H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), "%s: cannot write dataset '%s'", what, name);
    H5Dclose(d);
    H5Sclose(space);
}

int h5_dataset_shape(hid_t loc, const char *name, hsize_t *dims, int max_rank) {
    if (!h5_exists(loc, name)) return -1;
    hid_t d = H5Dopen2(loc, name, H5P_DEFAULT);
    if (d < 0) return -1;
    hid_t sp = H5Dget_space(d);
    int rank = H5Sget_simple_extent_ndims(sp);
    if (rank > max_rank)
        rank = max_rank + 1;  // caller sees "too many dimensions"
    else
        H5Sget_simple_extent_dims(sp, dims, NULL);
    H5Sclose(sp);
    H5Dclose(d);
    return rank;
}

void h5_read_array(hid_t loc, const char *name, hid_t type, void *out, const char *what) {
    hid_t d = h5Check(H5Dopen2(loc, name, H5P_DEFAULT), "%s: cannot open dataset '%s'", what, name);
    h5Check(H5Dread(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out), "%s: cannot read dataset '%s'", what, name);
    H5Dclose(d);
}

// Unwritten space reads back as the fill value: for features, labels or parameters that is
// never data, and declared but unstored sizes are how a small file claims to hold terabytes.
// (H5Dget_space_status alone will not do: HDF5 1.10 calls a chunked dataset whose edge
// chunks overhang its extent partly allocated.)
static int all_stored(hid_t d, const h5_info_t *info) {
    hid_t dcpl = H5Dget_create_plist(d);
    if (dcpl < 0) return 0;
    H5D_layout_t layout = H5Pget_layout(dcpl);
    int stored = 0;
    if (layout == H5D_COMPACT) {
        stored = 1;
    } else if (layout == H5D_CONTIGUOUS) {
        H5D_space_status_t st;
        stored = H5Dget_space_status(d, &st) >= 0 && st == H5D_SPACE_STATUS_ALLOCATED;
    } else if (layout == H5D_CHUNKED) {
        hsize_t chunk[H5U_MAX_RANK], want = 1, have = 0;
        if (H5Pget_chunk(dcpl, H5U_MAX_RANK, chunk) == info->rank) {
            for (int i = 0; i < info->rank; i++) want *= chunk[i] ? (info->dims[i] + chunk[i] - 1) / chunk[i] : 0;
            hid_t sp = H5Dget_space(d);  // (1.10 does not take H5S_ALL here)
            stored = want > 0 && sp >= 0 && H5Dget_num_chunks(d, sp, &have) >= 0 && have == want;
            if (sp >= 0) H5Sclose(sp);
        }
    }
    H5Pclose(dcpl);
    return stored;
}

int h5_dataset_info(hid_t loc, const char *name, h5_info_t *info) {
    memset(info, 0, sizeof *info);
    if (!h5_exists(loc, name)) return H5U_MISSING;
    H5O_info_t oi;
    if (H5Oget_info_by_name(loc, name, &oi, H5P_DEFAULT) < 0) return H5U_UNREADABLE;
    if (oi.type != H5O_TYPE_DATASET) return H5U_WRONG_TYPE;
    hid_t d = H5Dopen2(loc, name, H5P_DEFAULT);
    if (d < 0) return H5U_UNREADABLE;
    hid_t ft = H5Dget_type(d), sp = H5Dget_space(d);
    int rc = ft < 0 || sp < 0 ? H5U_UNREADABLE : H5U_OK;
    if (rc == H5U_OK) {
        info->rank = H5Sget_simple_extent_ndims(sp);
        if (info->rank < 0 || info->rank > H5U_MAX_RANK) rc = H5U_WRONG_TYPE;
    }
    if (rc == H5U_OK) {
        H5Sget_simple_extent_dims(sp, info->dims, NULL);
        info->cls = H5Tget_class(ft);
        info->is_signed = info->cls == H5T_INTEGER && H5Tget_sign(ft) != H5T_SGN_NONE;
        info->type_size = H5Tget_size(ft);
        hssize_t np = H5Sget_simple_extent_npoints(sp);
        info->npoints = np > 0 ? (hsize_t)np : 0;
        info->stored = info->npoints == 0 || all_stored(d, info);
    }
    if (sp >= 0) H5Sclose(sp);
    if (ft >= 0) H5Tclose(ft);
    H5Dclose(d);
    return rc;
}

int h5_read_i64s(hid_t loc, const char *name, int64_t *out, size_t n) {
    hid_t d = H5Dopen2(loc, name, H5P_DEFAULT);
    if (d < 0) return H5U_MISSING;
    hid_t ft = H5Dget_type(d);
    int rc = ft < 0 ? H5U_UNREADABLE : read_integers(d, ft, 0, out, n);
    if (ft >= 0) H5Tclose(ft);
    H5Dclose(d);
    return rc;
}

// Fixed-length strings where they cost at most twice the strings' own bytes: they live in the
// dataset itself, where a damaged byte damages one string, while variable-length ones live in the
// file's global heap, whose damaged object sizes HDF5 1.10 reads past its buffers (a crash, not
// an error). Readers take either (h5_read_strings).
void h5_write_strings(hid_t loc, const char *name, const char *const *strs, int64_t n, const char *what) {
    size_t width = 1, total = 0;
    for (int64_t i = 0; i < n; i++) {
        const size_t len = strlen(strs[i]) + 1;
        width = len > width ? len : width;
        total += len;
    }
    const int fixed = (double)width * (double)n <= 2.0 * (double)total + 4096.0;
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, fixed ? width : H5T_VARIABLE);
    H5Tset_strpad(t, H5T_STR_NULLTERM);
    hsize_t dims[1] = {(hsize_t)n};
    char *packed = NULL;
    if (fixed) {
        packed = callocCheck((size_t)(n ? n : 1), width);
        for (int64_t i = 0; i < n; i++) memcpy(packed + (size_t)i * width, strs[i], strlen(strs[i]));
    }
    h5_write_array(loc, name, t, 1, dims, fixed ? (const void *)packed : (const void *)strs, what);
    free(packed);
    H5Tclose(t);
}

static char *strdup_checked(const char *s) {
    size_t n = strlen(s) + 1;
    return memcpy(mallocCheck(n), s, n);
}

char **h5_read_strings(hid_t loc, const char *name, int64_t n) {
    hsize_t dims[2];
    if (h5_dataset_shape(loc, name, dims, 1) != 1 || (int64_t)dims[0] != n) return NULL;
    hid_t d = H5Dopen2(loc, name, H5P_DEFAULT);
    if (d < 0) return NULL;
    hid_t ft = H5Dget_type(d);
    char **out = callocCheck((size_t)(n ? n : 1), sizeof(char *));
    int ok = ft >= 0 && H5Tget_class(ft) == H5T_STRING;
    if (ok && H5Tis_variable_str(ft) > 0) {
        hid_t mt = mem_string_type(ft, H5T_VARIABLE);
        char **tmp = callocCheck((size_t)(n ? n : 1), sizeof(char *));
        ok = H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, tmp) >= 0;
        for (int64_t i = 0; ok && i < n; i++) out[i] = strdup_checked(tmp[i] ? tmp[i] : "");
        if (ok) {
            hid_t sp = H5Dget_space(d);
            H5Dvlen_reclaim(mt, sp, H5P_DEFAULT, tmp);
            H5Sclose(sp);
        }
        free(tmp);
        H5Tclose(mt);
    } else if (ok) {  // fixed-length strings
        size_t len = H5Tget_size(ft);
        char *buf = callocCheck((size_t)(n ? n : 1), len + 1);
        hid_t mt = mem_string_type(ft, len + 1);
        ok = H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0;
        for (int64_t i = 0; ok && i < n; i++) out[i] = strdup_checked(buf + (size_t)i * (len + 1));
        H5Tclose(mt);
        free(buf);
    }
    if (ft >= 0) H5Tclose(ft);
    H5Dclose(d);
    if (!ok) {
        h5_free_strings(out, n);
        return NULL;
    }
    return out;
}

void h5_free_strings(char **strs, int64_t n) {
    if (!strs) return;
    for (int64_t i = 0; i < n; i++) free(strs[i]);
    free(strs);
}

hid_t h5_mem_create(const char *what) {
    hid_t fapl = h5Check(H5Pcreate(H5P_FILE_ACCESS), "%s: cannot create file access properties", what);
    h5Check(H5Pset_fapl_core(fapl, 1 << 20, 0), "%s: cannot select HDF5's in-memory driver", what);
    hid_t f = h5Check(H5Fcreate("spkddp-in-memory.h5", H5F_ACC_TRUNC, H5P_DEFAULT, fapl),
                      "%s: cannot create the file in memory", what);
    H5Pclose(fapl);
    return f;
}

int h5_mem_image(hid_t f, void **buf, size_t *n) {
    *buf = NULL;
    *n = 0;
    if (H5Fflush(f, H5F_SCOPE_GLOBAL) < 0) return -1;
    ssize_t size = H5Fget_file_image(f, NULL, 0);
    if (size <= 0) return -1;
    *buf = malloc((size_t)size);
    if (!*buf || H5Fget_file_image(f, *buf, (size_t)size) != size) {
        free(*buf);
        *buf = NULL;
        return -1;
    }
    *n = (size_t)size;
    return 0;
}

void h5_library(char *out, size_t cap) {
    unsigned major = 0, minor = 0, release = 0;
    H5get_libversion(&major, &minor, &release);
#ifdef H5_HAVE_PARALLEL
    const char *kind = "parallel";
#else
    const char *kind = "serial";
#endif
    snprintf(out, cap, "HDF5 %u.%u.%u (%s)", major, minor, release, kind);
}
