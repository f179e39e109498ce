// safetensors files (the format of Hugging Face's `safetensors` package, which PyTorch,
// SpeechBrain and ONNX tooling read): 8 bytes little-endian N, N bytes of JSON header, then
// the tensor bytes.
//   header: {"__metadata__": {"key": "value", ...},
//            "name": {"dtype": "F32", "shape": [d0, ...], "data_offsets": [begin, end]}, ...}
// Offsets are relative to the end of the header; tensors are little-endian, C order, packed
// back to back with no gaps. The header is padded with spaces to a multiple of 8 bytes, so
// every tensor starts 8-byte aligned in the file. JSON through jansson (libjansson-dev).
#pragma once
#include <stddef.h>
#include <stdint.h>

#define ST_NAME_MAX 128
#define ST_MAX_DIMS 8

typedef enum { ST_F32, ST_I64 } st_dtype_t;

typedef struct {
    char name[ST_NAME_MAX];
    st_dtype_t dtype;
    int ndim;  // 0: a scalar
    int64_t shape[ST_MAX_DIMS];
    int64_t numel;
    const void *data;  // writing: the caller's numel values; reading: into the data section (copy
                       // it out with memcpy: another writer's tensors need not be aligned)
} st_tensor_t;

// A metadata entry (safetensors __metadata__; ONNX metadata_props take the same pairs).
typedef struct {
    const char *key, *value;
} st_meta_t;

// Writes the tensors in the given order with the metadata, atomically (io/common/atomic_file.h,
// replacing an existing file). 0, or -1 with one sentence naming the file in err.
int safetensors_write(const char *path, const st_tensor_t *t, int n, const st_meta_t *meta, int nmeta, char *err,
                      size_t cap);

// A file read whole and checked: header JSON, known dtypes (F32, I64; others are named in the
// error), shapes, offsets inside the data and covering it exactly with no overlap.
typedef struct {
    st_tensor_t *t;  // (count,) in file order
    int count;
    char **meta_keys, **meta_values;  // (nmeta,)
    int nmeta;
    void *image;  // the data section
} safetensors_t;

// 0, or SPK_EXIT_CKPT with one sentence naming the file and the field in err.
int safetensors_read(const char *path, safetensors_t *st, char *err, size_t cap);
// The same on a file's bytes already in memory (len of them); path names it in messages.
int safetensors_parse(const unsigned char *buf, size_t len, const char *path, safetensors_t *st, char *err, size_t cap);
// 1 when the file starts like a safetensors file (8 bytes, then the JSON header's '{'; not HDF5).
int safetensors_sniff(const char *path);
const st_tensor_t *safetensors_find(const safetensors_t *st, const char *name);
const char *safetensors_meta(const safetensors_t *st, const char *key);  // NULL when absent
void safetensors_free(safetensors_t *st);
