// Small HDF5 helpers: attributes, whole-dataset reads and writes, existence checks, and
// in-memory files. Writers are checked (failures name the file `what` and the object);
// readers return a status so callers can say what is wrong with a file they were given.
#pragma once
#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

// "HDF5 1.10.8 (parallel)": the library's version, and whether it reads through MPI-IO.
void h5_library(char *out, size_t cap);
void h5_quiet(void);  // silence HDF5's own error-stack printing (SPKDDP_H5_DEBUG=1 keeps it)
// Why the last HDF5 call failed, from its error stack: the system's words when the stack
// holds them ("No space left on device", from MPI-IO or the file driver), else the innermost
// description. Call it before any other HDF5 call replaces the stack.
void h5_error_reason(char *out, size_t cap);

int h5_exists(hid_t loc, const char *name);  // link or attribute-free object exists
int h5_attr_exists(hid_t loc, const char *name);

void h5_attr_write_str(hid_t loc, const char *name, const char *value, const char *what);
void h5_attr_write_i64(hid_t loc, const char *name, int64_t value, const char *what);
void h5_attr_write_f64(hid_t loc, const char *name, double value, const char *what);

// Reader status: 0, or what is wrong with the attribute or dataset.
enum h5_status {
    H5U_OK = 0,
    H5U_MISSING = -1,     // no such attribute / dataset
    H5U_WRONG_TYPE = -2,  // another class (a float where an integer belongs, ...), or not one value
    H5U_TOO_LONG = -3,    // a string that does not fit the caller's buffer
    H5U_UNREADABLE = -4,  // HDF5 could not read it (damaged file)
};
// "is missing", "has the wrong type", ... for messages.
const char *h5_status_str(int status);

// Scalar (or one-element) attributes. Strings: fixed or variable length, ASCII or UTF-8 (the
// way h5py stores a Python str). Integers: integer classes only, so 8.5 is never read as 8;
// unsigned values above INT64_MAX are the wrong type. Floats: integer or float classes.
int h5_attr_read_str(hid_t loc, const char *name, char *out, size_t cap);
int h5_attr_read_i64(hid_t loc, const char *name, int64_t *out);
int h5_attr_read_f64(hid_t loc, const char *name, double *out);

// Create and fill a 1-D or N-D dataset of native type `type` in one call (serial files).
void h5_write_array(hid_t loc, const char *name, hid_t type, int rank, const hsize_t *dims, const void *data,
                    const char *what);
// Rank and dims of a dataset; returns rank, or -1 when it does not exist.
int h5_dataset_shape(hid_t loc, const char *name, hsize_t *dims, int max_rank);
// Read a whole dataset converting to `type` (independent I/O).
void h5_read_array(hid_t loc, const char *name, hid_t type, void *out, const char *what);

#define H5U_MAX_RANK 8
typedef struct {
    int rank;
    hsize_t dims[H5U_MAX_RANK];
    H5T_class_t cls;   // H5T_INTEGER, H5T_FLOAT, H5T_STRING, ...
    int is_signed;     // integers
    size_t type_size;  // bytes per element in the file
    int stored;        // every element is stored (no unwritten space or chunk read back as fill)
    hsize_t npoints;   // product of dims
} h5_info_t;
// What a dataset declares and whether its elements are all stored: H5U_OK, H5U_MISSING, or
// H5U_WRONG_TYPE when the name is not a dataset of at most H5U_MAX_RANK dimensions.
int h5_dataset_info(hid_t loc, const char *name, h5_info_t *info);
// Reads a whole integer dataset of n elements into int64 (H5U_WRONG_TYPE for floats, strings
// and unsigned values above INT64_MAX; the caller has checked the shape).
int h5_read_i64s(hid_t loc, const char *name, int64_t *out, size_t n);

// String arrays: fixed-length where that costs at most twice the strings' bytes, else variable
// length (h5util.c says why); h5_read_strings takes either.
void h5_write_strings(hid_t loc, const char *name, const char *const *strs, int64_t n, const char *what);
// Reads a 1-D string dataset of n entries (fixed or variable length, ASCII or UTF-8) into
// malloc'ed strings (free with h5_free_strings); returns NULL when it is missing, of another
// length, or not strings.
char **h5_read_strings(hid_t loc, const char *name, int64_t n);
void h5_free_strings(char **strs, int64_t n);

// A file that lives in memory only (HDF5's core driver): written without touching the disk,
// then handed to atomic_write_file as one image, so a full disk can never leave HDF5 holding
// a half-written file.
hid_t h5_mem_create(const char *what);
// Flushes f and copies its image into a malloc'ed buffer; returns 0, or -1.
int h5_mem_image(hid_t f, void **buf, size_t *n);
