#include "io/export/safetensors.h"

#include "io/common/atomic_file.h"
#include "kernels/base/check.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "safetensors stores little-endian values as they are in memory");

#define ST_HEADER_MAX ((uint64_t)100 << 20)  // the reference reader's limit

static const struct {
    st_dtype_t dtype;
    const char *name;
    int64_t size;
} DTYPES[] = {{ST_F32, "F32", 4}, {ST_I64, "I64", 8}};

static int64_t dtype_size(st_dtype_t d) { return DTYPES[d].size; }

// ---- write --------------------------------------------------------------------------------

static json_t *shape_json(const st_tensor_t *t) {
    json_t *a = json_array();
    for (int d = 0; d < t->ndim; d++) json_array_append_new(a, json_integer(t->shape[d]));
    return a;
}

int safetensors_write(const char *path, const st_tensor_t *t, int n, const st_meta_t *meta, int nmeta, char *err,
                      size_t cap) {
    json_t *h = json_object();
    if (nmeta > 0) {
        json_t *m = json_object();
        for (int i = 0; i < nmeta; i++) json_object_set_new(m, meta[i].key, json_string(meta[i].value));
        json_object_set_new(h, "__metadata__", m);
    }
    // 8-byte values first: with the header padded to 8 bytes, every tensor is then aligned
    // to its element size (what memory-mapping readers need).
    int64_t off = 0;
    int *order = mallocCheck((size_t)(n + 1) * sizeof(int)), k = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n; i++)
            if ((dtype_size(t[i].dtype) == 8) == (pass == 0)) order[k++] = i;
    for (int j = 0; j < n; j++) {
        const st_tensor_t *x = &t[order[j]];
        const int64_t bytes = x->numel * dtype_size(x->dtype);
        json_t *e = json_pack("{s:s, s:o, s:[I, I]}", "dtype", DTYPES[x->dtype].name, "shape", shape_json(x),
                              "data_offsets", (json_int_t)off, (json_int_t)(off + bytes));
        json_object_set_new(h, x->name, e);
        off += bytes;
    }
    char *text = json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
    json_decref(h);
    if (!text) spk_die(SPK_EXIT_FAILURE, "%s: cannot build the safetensors header (out of memory)", path);
    const size_t len = strlen(text), padded = (len + 7) / 8 * 8;
    const size_t total = 8 + padded + (size_t)off;
    unsigned char *buf = mallocCheck(total);
    const uint64_t hl = padded;
    memcpy(buf, &hl, 8);
    memcpy(buf + 8, text, len);
    memset(buf + 8 + len, ' ', padded - len);
    free(text);
    unsigned char *data = buf + 8 + padded;
    for (int j = 0; j < n; j++) {
        const st_tensor_t *x = &t[order[j]];
        const size_t bytes = (size_t)(x->numel * dtype_size(x->dtype));
        if (bytes) memcpy(data, x->data, bytes);
        data += bytes;
    }
    free(order);
    int rc = atomic_write_file(path, buf, total, ATOMIC_REPLACE, err, cap);
    free(buf);
    return rc;
}

// ---- read ---------------------------------------------------------------------------------

#define FAIL(...)                        \
    do {                                 \
        snprintf(err, cap, __VA_ARGS__); \
        return SPK_EXIT_CKPT;            \
    } while (0)

static int read_metadata(safetensors_t *st, json_t *m, const char *path, char *err, size_t cap) {
    if (!json_is_object(m)) FAIL("%s: safetensors header: '__metadata__' must be an object of strings", path);
    size_t n = json_object_size(m);
    st->meta_keys = callocCheck(n + 1, sizeof(char *));
    st->meta_values = callocCheck(n + 1, sizeof(char *));
    const char *key;
    json_t *v;
    json_object_foreach(m, key, v) {
        if (!json_is_string(v))
            FAIL("%s: safetensors header: '__metadata__' entry '%.100s' is not a string", path, key);
        st->meta_keys[st->nmeta] = strdup(key);
        st->meta_values[st->nmeta] = strdup(json_string_value(v));
        if (!st->meta_keys[st->nmeta] || !st->meta_values[st->nmeta]) spk_die(SPK_EXIT_FAILURE, "out of memory");
        st->nmeta++;
    }
    return 0;
}

// One header entry into t (offsets into begin/end, checked against the data later).
static int read_entry(st_tensor_t *t, int64_t *begin, int64_t *end, const char *name, json_t *e, const char *path,
                      char *err, size_t cap) {
    if (strlen(name) >= ST_NAME_MAX)
        FAIL("%s: safetensors tensor name '%.100s...' is longer than %d bytes", path, name, ST_NAME_MAX - 1);
    snprintf(t->name, sizeof t->name, "%s", name);
    json_t *dt = json_object_get(e, "dtype"), *shape = json_object_get(e, "shape"),
           *offs = json_object_get(e, "data_offsets");
    if (!json_is_object(e) || !json_is_string(dt) || !json_is_array(shape) || !json_is_array(offs) ||
        json_array_size(offs) != 2)
        FAIL("%s: safetensors tensor '%s' needs 'dtype' (a string), 'shape' (a list) and 'data_offsets' ([begin, end])",
             path, name);
    size_t k;
    for (k = 0; k < sizeof DTYPES / sizeof DTYPES[0]; k++)
        if (strcmp(json_string_value(dt), DTYPES[k].name) == 0) break;
    if (k == sizeof DTYPES / sizeof DTYPES[0])
        FAIL("%s: safetensors tensor '%s' has dtype %.20s; spkddp reads F32 (and I64 counters): convert it to float32",
             path, name, json_string_value(dt));
    t->dtype = DTYPES[k].dtype;
    if (json_array_size(shape) > ST_MAX_DIMS)
        FAIL("%s: safetensors tensor '%s' has more than %d dimensions", path, name, ST_MAX_DIMS);
    t->ndim = (int)json_array_size(shape);
    t->numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        json_t *v = json_array_get(shape, (size_t)d);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > ((int64_t)1 << 40) ||
            __builtin_mul_overflow(t->numel, (int64_t)json_integer_value(v), &t->numel) ||
            t->numel > ((int64_t)1 << 40))
            FAIL("%s: safetensors tensor '%s': 'shape' must be a list of non-negative sizes", path, name);
        t->shape[d] = json_integer_value(v);
    }
    json_t *b = json_array_get(offs, 0), *e2 = json_array_get(offs, 1);
    if (!json_is_integer(b) || !json_is_integer(e2) || json_integer_value(b) < 0 ||
        json_integer_value(e2) < json_integer_value(b))
        FAIL("%s: safetensors tensor '%s': 'data_offsets' must be [begin, end] with 0 <= begin <= end", path, name);
    *begin = json_integer_value(b);
    *end = json_integer_value(e2);
    if (*end - *begin != t->numel * dtype_size(t->dtype))
        FAIL("%s: safetensors tensor '%s': 'data_offsets' span %lld bytes, its shape and dtype need %lld", path, name,
             (long long)(*end - *begin), (long long)(t->numel * dtype_size(t->dtype)));
    return 0;
}

typedef struct {
    int64_t begin, end;
    int i;
} span_t;

static int by_begin(const void *a, const void *b) {
    const span_t *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : x->i - y->i;
}

// Tensors tile the data section exactly: no gap, no overlap, nothing past its end.
static int check_tiling(const safetensors_t *st, span_t *s, int64_t data_len, const char *path, char *err, size_t cap) {
    qsort(s, (size_t)st->count, sizeof *s, by_begin);
    int64_t at = 0;
    for (int j = 0; j < st->count; j++) {
        if (s[j].begin != at)
            FAIL(
                "%s: safetensors tensor '%s' starts at byte %lld of the data, expected %lld (tensors must be packed "
                "with no gap or overlap)",
                path, st->t[s[j].i].name, (long long)s[j].begin, (long long)at);
        at = s[j].end;
    }
    if (at != data_len)
        FAIL("%s: the safetensors data section holds %lld bytes, its tensors %lld (truncated or padded file)", path,
             (long long)data_len, (long long)at);
    return 0;
}

static int parse_header(safetensors_t *st, const char *text, size_t len, int64_t data_len, const char *path, char *err,
                        size_t cap) {
    json_error_t je;
    json_t *h = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!h)
        FAIL("%s: safetensors header is not valid JSON (line %d, column %d: %s)", path, je.line, je.column, je.text);
    int rc = 0;
    if (!json_is_object(h)) {
        snprintf(err, cap, "%s: safetensors header must be a JSON object", path);
        rc = SPK_EXIT_CKPT;
    }
    size_t n = json_object_size(h);
    st->t = callocCheck(n + 1, sizeof *st->t);
    span_t *s = callocCheck(n + 1, sizeof *s);
    const char *key;
    json_t *v;
    json_object_foreach(h, key, v) {
        if (rc) break;
        if (strcmp(key, "__metadata__") == 0) {
            rc = read_metadata(st, v, path, err, cap);
            continue;
        }
        s[st->count].i = st->count;
        rc = read_entry(&st->t[st->count], &s[st->count].begin, &s[st->count].end, key, v, path, err, cap);
        if (rc == 0) st->count++;
    }
    if (rc == 0) rc = check_tiling(st, s, data_len, path, err, cap);
    for (int j = 0; rc == 0 && j < st->count; j++) st->t[s[j].i].data = (const char *)st->image + s[j].begin;
    free(s);
    json_decref(h);
    return rc;
}

static int read_file(const char *path, unsigned char **buf, size_t *len, char *err, size_t cap) {
    FILE *f = fopen(path, "rb");
    if (!f) FAIL("%s: cannot read the file (%s)", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        FAIL("%s: cannot read the file (not a regular file)", path);
    }
    *buf = mallocCheck((size_t)sb.st_size + 1);
    size_t got = fread(*buf, 1, (size_t)sb.st_size, f);
    fclose(f);
    if (got != (size_t)sb.st_size) FAIL("%s: cannot read the file (short read)", path);
    *len = got;
    return 0;
}

int safetensors_parse(const unsigned char *buf, size_t len, const char *path, safetensors_t *st, char *err,
                      size_t cap) {
    memset(st, 0, sizeof *st);
    uint64_t hl = 0;
    if (len >= 8) memcpy(&hl, buf, 8);
    if (len < 10 || buf[8] != '{')
        FAIL("%s: not a safetensors file (the first 8 bytes must give the length of a JSON header that follows)", path);
    if (hl < 2 || hl > ST_HEADER_MAX || hl > len - 8)
        FAIL("%s: the safetensors header length (first 8 bytes) says %llu bytes, the file holds %zu after them%s", path,
             (unsigned long long)hl, len - 8, hl > ST_HEADER_MAX ? " (and the limit is 100 MiB)" : "");
    // The data section in a buffer of its own: aligned, whatever the header length.
    const size_t data_len = len - 8 - (size_t)hl;
    st->image = mallocCheck(data_len + 1);
    memcpy(st->image, buf + 8 + hl, data_len);
    int rc = parse_header(st, (const char *)buf + 8, (size_t)hl, (int64_t)data_len, path, err, cap);
    if (rc) safetensors_free(st);
    return rc;
}

int safetensors_read(const char *path, safetensors_t *st, char *err, size_t cap) {
    memset(st, 0, sizeof *st);
    unsigned char *buf = NULL;
    size_t len = 0;
    int rc = read_file(path, &buf, &len, err, cap);
    if (rc == 0) rc = safetensors_parse(buf, len, path, st, err, cap);
    free(buf);
    return rc;
}

int safetensors_sniff(const char *path) {
    unsigned char head[9];
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t got = fread(head, 1, sizeof head, f);
    fclose(f);
    // The JSON header's brace after the length decides: a file that starts so is a safetensors
    // file, however wrong its length (safetensors_parse then says what is wrong with it).
    return got == sizeof head && head[8] == '{' && memcmp(head, "\x89HDF", 4) != 0;
}

const st_tensor_t *safetensors_find(const safetensors_t *st, const char *name) {
    for (int i = 0; i < st->count; i++)
        if (strcmp(st->t[i].name, name) == 0) return &st->t[i];
    return NULL;
}

const char *safetensors_meta(const safetensors_t *st, const char *key) {
    for (int i = 0; i < st->nmeta; i++)
        if (strcmp(st->meta_keys[i], key) == 0) return st->meta_values[i];
    return NULL;
}

void safetensors_free(safetensors_t *st) {
    for (int i = 0; i < st->nmeta; i++) {
        free(st->meta_keys[i]);
        free(st->meta_values[i]);
    }
    free(st->meta_keys);
    free(st->meta_values);
    free(st->t);
    free(st->image);
    memset(st, 0, sizeof *st);
}
