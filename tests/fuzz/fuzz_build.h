// Helpers for the structure-aware fuzz targets: the input bytes are read as a list of
// decisions (fz_pick) that build an HDF5 file in memory, so the fuzzer explores the files our
// readers meet -- wrong types, shapes, values, storage -- rather than HDF5's own parser.
// Every decision's choice 0 is the valid one, so an all-zero input builds a valid file.
// HDF5 calls here are unchecked on purpose: a file the library refuses to build is simply a
// different file.
#pragma once
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const uint8_t *p;
    size_t n;
} fz_t;

static inline uint8_t fz_u8(fz_t *in) {
    if (!in->n) return 0;
    in->n--;
    return *in->p++;
}
// A choice in [0, k); 0 = the valid one.
static inline int fz_pick(fz_t *in, int k) { return fz_u8(in) % k; }

// `valid` most of the time, else a value chosen to break limits.
static inline int64_t fz_int(fz_t *in, int64_t valid) {
    static const int64_t odd[] = {0,
                                  -1,
                                  1,
                                  2,
                                  3,
                                  INT32_MAX,
                                  (int64_t)1 << 31,
                                  (int64_t)1 << 40,
                                  INT64_MAX,
                                  INT64_MIN,
                                  65536,
                                  65537,
                                  (int64_t)1 << 24};
    int k = fz_pick(in, 24);
    if (k < 8) return valid;
    // Wrapping on purpose: valid may itself be an extreme drawn earlier.
    if (k == 8) return (int64_t)((uint64_t)valid + 1);
    if (k == 9) return (int64_t)((uint64_t)valid - 1);
    if (k == 10) return (int64_t)fz_u8(in) - 8;
    return odd[(k - 11) % (int)(sizeof odd / sizeof odd[0])];
}

// File types an attribute or dataset may be stored as; choice 0 is the given one.
static inline hid_t fz_num_type(fz_t *in, hid_t valid) {
    const hid_t t[] = {valid,        H5T_STD_I64LE,  H5T_STD_I32LE,  H5T_STD_U64LE,
                       H5T_STD_U8LE, H5T_IEEE_F64LE, H5T_IEEE_F32LE, H5T_STD_I64BE};
    return t[fz_pick(in, 8)];
}

// A scalar numeric attribute holding v (converted by HDF5, clipped if it must).
static inline void fz_attr_num(hid_t loc, const char *name, hid_t type, double v) {
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(loc, name, type, sp, H5P_DEFAULT, H5P_DEFAULT);
    if (a >= 0) H5Awrite(a, H5T_NATIVE_DOUBLE, &v), H5Aclose(a);
    H5Sclose(sp);
}

static inline void fz_attr_i64(hid_t loc, const char *name, hid_t type, int64_t v) {
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(loc, name, type, sp, H5P_DEFAULT, H5P_DEFAULT);
    if (a >= 0) H5Awrite(a, H5T_NATIVE_INT64, &v), H5Aclose(a);
    H5Sclose(sp);
}

// String attribute: style 0 fixed ASCII, 1 variable UTF-8 (h5py), 2 an array of two.
static inline void fz_attr_str(hid_t loc, const char *name, const char *v, int style) {
    hid_t t = H5Tcopy(H5T_C_S1);
    hsize_t two = 2;
    hid_t sp = style == 2 ? H5Screate_simple(1, &two, NULL) : H5Screate(H5S_SCALAR);
    if (style == 1)
        H5Tset_size(t, H5T_VARIABLE), H5Tset_cset(t, H5T_CSET_UTF8);
    else
        H5Tset_size(t, strlen(v) + 1);
    hid_t a = H5Acreate2(loc, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    if (a >= 0) {
        if (style == 1)
            H5Awrite(a, t, &v);
        else if (style == 2) {
            char *buf = calloc(2, strlen(v) + 1);
            memcpy(buf, v, strlen(v));
            H5Awrite(a, t, buf);
            free(buf);
        } else
            H5Awrite(a, t, v);
        H5Aclose(a);
    }
    H5Sclose(sp);
    H5Tclose(t);
}

// Storage of a dataset: written contiguous, chunked or compact, or declared but not written.
enum { FZ_CONTIGUOUS, FZ_CHUNKED, FZ_COMPACT, FZ_UNWRITTEN, FZ_CHUNKED_PARTLY, FZ_STORAGES };

// Writes `have` elements of data (memory type mtype) and zeros after them, whatever the dims.
static inline void fz_dataset(hid_t loc, const char *name, hid_t ftype, hid_t mtype, int rank, const hsize_t *dims,
                              const void *data, size_t have, int storage) {
    hsize_t n = 1;
    for (int d = 0; d < rank; d++) {
        if (dims[d] && n > ((hsize_t)1 << 40) / dims[d])
            n = (hsize_t)1 << 41;
        else
            n *= dims[d];
    }
    if (n > (1 << 16) && storage != FZ_UNWRITTEN) storage = FZ_UNWRITTEN;  // declared only: no memory needed
    hid_t sp = H5Screate_simple(rank, dims, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (storage == FZ_CHUNKED || storage == FZ_CHUNKED_PARTLY) {
        hsize_t ch[8];
        for (int d = 0; d < rank; d++) ch[d] = dims[d] > 3 ? 3 : dims[d] ? dims[d] : 1;
        H5Pset_chunk(dcpl, rank, ch);
    } else if (storage == FZ_COMPACT && n * 8 < 32000) {
        H5Pset_layout(dcpl, H5D_COMPACT);
    }
    hid_t d = sp >= 0 ? H5Dcreate2(loc, name, ftype, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT) : -1;
    void *full = NULL;
    if (d >= 0 && storage != FZ_UNWRITTEN && data && n > have) {  // pad: a vlen string of zeros is NULL, i.e. ""
        size_t size = H5Tget_size(mtype);
        full = calloc(n, size);
        memcpy(full, data, have * size);
        data = full;
    }
    if (d >= 0 && storage != FZ_UNWRITTEN && data) {
        if (storage == FZ_CHUNKED_PARTLY && rank > 0 && dims[0] > 3) {  // only the first chunk row
            hsize_t off[8] = {0}, cnt[8];
            for (int k = 0; k < rank; k++) cnt[k] = dims[k];
            cnt[0] = 1;
            hid_t fs = H5Dget_space(d), ms = H5Screate_simple(rank, cnt, NULL);
            H5Sselect_hyperslab(fs, H5S_SELECT_SET, off, NULL, cnt, NULL);
            H5Dwrite(d, mtype, ms, fs, H5P_DEFAULT, data);
            H5Sclose(ms), H5Sclose(fs);
        } else {
            H5Dwrite(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
        }
    }
    free(full);
    if (d >= 0) H5Dclose(d);
    H5Pclose(dcpl);
    if (sp >= 0) H5Sclose(sp);
}

// n strings (the first `have` from s, then empty ones): style 0 variable ASCII, 1 variable
// UTF-8, 2 fixed length 8.
static inline void fz_strings(hid_t loc, const char *name, const char **s, size_t have, hsize_t n, int style) {
    hid_t t = H5Tcopy(H5T_C_S1);
    if (style == 2) {
        H5Tset_size(t, 8);
        char *buf = calloc(n ? n : 1, 8);
        for (hsize_t i = 0; i < n && i < have; i++) strncpy(buf + 8 * i, s[i], 8);
        fz_dataset(loc, name, t, t, 1, &n, buf, n, FZ_CONTIGUOUS);
        free(buf);
    } else {
        H5Tset_size(t, H5T_VARIABLE);
        if (style == 1) H5Tset_cset(t, H5T_CSET_UTF8);
        fz_dataset(loc, name, t, t, 1, &n, s, have, FZ_CONTIGUOUS);
    }
    H5Tclose(t);
}

// An in-memory HDF5 file (core driver, nothing on disk).
static inline hid_t fz_file(void) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_core(fapl, 1 << 16, 0);
    hid_t f = H5Fcreate("fuzz.h5", H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (f < 0) abort();
    return f;
}

// A broken promise of the reader: the fuzzer reports it as a crash.
#define FZ_REQUIRE(cond)                                                                                          \
    do {                                                                                                          \
        if (!(cond)) {                                                                                            \
            fprintf(stderr, "%s:%d: reader accepted a file where %s does not hold\n", __FILE__, __LINE__, #cond); \
            abort();                                                                                              \
        }                                                                                                         \
    } while (0)

// Once per fuzzing process: HDF5 prints nothing (refusals are the reader's to word).
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    return 0;
}
