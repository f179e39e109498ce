// Small HDF5 helpers: attributes, whole-dataset reads and writes, existence checks.
// Every call is checked; failures name the file (`what`) and the object.
#pragma once
#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

void h5_quiet(void);  // silence HDF5's own error-stack printing (SPKDDP_H5_DEBUG=1 keeps it)

int h5_exists(hid_t loc, const char *name);  // link or attribute-free object exists
int h5_attr_exists(hid_t loc, const char *name);

void h5_attr_write_str(hid_t loc, const char *name, const char *value, const char *what);
void h5_attr_write_i64(hid_t loc, const char *name, int64_t value, const char *what);
void h5_attr_write_f64(hid_t loc, const char *name, double value, const char *what);
// Readers return 0 on success, -1 when the attribute is missing or of the wrong kind.
int h5_attr_read_str(hid_t loc, const char *name, char *out, size_t cap);
int h5_attr_read_i64(hid_t loc, const char *name, int64_t *out);
int h5_attr_read_f64(hid_t loc, const char *name, double *out);

// Create and fill a 1-D or N-D dataset of native type `type` in one call (serial files).
void h5_write_array(hid_t loc, const char *name, hid_t type, int rank, const hsize_t *dims,
                    const void *data, const char *what);
// Rank and dims of a dataset; returns rank, or -1 when it does not exist.
int h5_dataset_shape(hid_t loc, const char *name, hsize_t *dims, int max_rank);
// Read a whole dataset converting to `type` (independent I/O).
void h5_read_array(hid_t loc, const char *name, hid_t type, void *out, const char *what);

// Variable-length string arrays.
void h5_write_strings(hid_t loc, const char *name, const char *const *strs, int64_t n,
                      const char *what);
// Reads a 1-D string dataset of n entries into malloc'ed strings (free with h5_free_strings);
// returns NULL when it is missing or of another length.
char **h5_read_strings(hid_t loc, const char *name, int64_t n);
void h5_free_strings(char **strs, int64_t n);
