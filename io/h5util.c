#include "io/h5util.h"

#include "kernels/base/check.h"

#include <stdlib.h>
#include <string.h>

void h5_quiet(void) {
    const char *dbg = getenv("SPKDDP_H5_DEBUG");
    if (!(dbg && dbg[0] == '1')) H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

int h5_exists(hid_t loc, const char *name) {
    return H5Lexists(loc, name, H5P_DEFAULT) > 0;
}

int h5_attr_exists(hid_t loc, const char *name) {
    return H5Aexists(loc, name) > 0;
}

static void attr_write(hid_t loc, const char *name, hid_t type, const void *value, const char *what) {
    hid_t space = h5Check(H5Screate(H5S_SCALAR), "%s: cannot create a dataspace", what);
    if (H5Aexists(loc, name) > 0) h5Check(H5Adelete(loc, name), "%s: cannot replace attribute '%s'", what, name);
    hid_t a = h5Check(H5Acreate2(loc, name, type, space, H5P_DEFAULT, H5P_DEFAULT),
                      "%s: cannot create attribute '%s'", what, name);
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

int h5_attr_read_str(hid_t loc, const char *name, char *out, size_t cap) {
    if (H5Aexists(loc, name) <= 0) return -1;
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    if (a < 0) return -1;
    hid_t ft = H5Aget_type(a);
    int rc = -1;
    if (H5Tget_class(ft) == H5T_STRING && !H5Tis_variable_str(ft)) {
        size_t n = H5Tget_size(ft);
        char *buf = calloc(n + 1, 1);
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, n + 1);
        if (buf && H5Aread(a, mt, buf) >= 0) {
            snprintf(out, cap, "%s", buf);
            rc = 0;
        }
        H5Tclose(mt);
        free(buf);
    }
    H5Tclose(ft);
    H5Aclose(a);
    return rc;
}

static int attr_read_num(hid_t loc, const char *name, hid_t type, void *out) {
    if (H5Aexists(loc, name) <= 0) return -1;
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    if (a < 0) return -1;
    hid_t ft = H5Aget_type(a);
    hid_t sp = H5Aget_space(a);
    H5T_class_t cls = H5Tget_class(ft);
    int ok = (cls == H5T_INTEGER || cls == H5T_FLOAT) && H5Sget_simple_extent_npoints(sp) == 1 &&
             H5Aread(a, type, out) >= 0;
    H5Sclose(sp);
    H5Tclose(ft);
    H5Aclose(a);
    return ok ? 0 : -1;
}

int h5_attr_read_i64(hid_t loc, const char *name, int64_t *out) {
    return attr_read_num(loc, name, H5T_NATIVE_INT64, out);
}

int h5_attr_read_f64(hid_t loc, const char *name, double *out) {
    return attr_read_num(loc, name, H5T_NATIVE_DOUBLE, out);
}

void h5_write_array(hid_t loc, const char *name, hid_t type, int rank, const hsize_t *dims,
                    const void *data, const char *what) {
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
    if (rank > max_rank) rank = max_rank + 1;  // caller sees "too many dimensions"
    else H5Sget_simple_extent_dims(sp, dims, NULL);
    H5Sclose(sp);
    H5Dclose(d);
    return rank;
}

void h5_read_array(hid_t loc, const char *name, hid_t type, void *out, const char *what) {
    hid_t d = h5Check(H5Dopen2(loc, name, H5P_DEFAULT), "%s: cannot open dataset '%s'", what, name);
    h5Check(H5Dread(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out), "%s: cannot read dataset '%s'", what, name);
    H5Dclose(d);
}

void h5_write_strings(hid_t loc, const char *name, const char *const *strs, int64_t n, const char *what) {
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    hsize_t dims[1] = {(hsize_t)n};
    h5_write_array(loc, name, t, 1, dims, strs, what);
    H5Tclose(t);
}

char **h5_read_strings(hid_t loc, const char *name, int64_t n) {
    hsize_t dims[2];
    if (h5_dataset_shape(loc, name, dims, 1) != 1 || (int64_t)dims[0] != n) return NULL;
    hid_t d = H5Dopen2(loc, name, H5P_DEFAULT);
    hid_t ft = H5Dget_type(d);
    char **out = callocCheck((size_t)(n ? n : 1), sizeof(char *));
    int ok = H5Tget_class(ft) == H5T_STRING;
    if (ok && H5Tis_variable_str(ft) > 0) {
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, H5T_VARIABLE);
        char **tmp = callocCheck((size_t)(n ? n : 1), sizeof(char *));
        ok = H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, tmp) >= 0;
        for (int64_t i = 0; ok && i < n; i++) out[i] = strdup(tmp[i] ? tmp[i] : "");
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
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, len + 1);
        ok = H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0;
        for (int64_t i = 0; ok && i < n; i++) out[i] = strdup(buf + (size_t)i * (len + 1));
        H5Tclose(mt);
        free(buf);
    }
    H5Tclose(ft);
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
