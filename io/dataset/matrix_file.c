// Feature matrices from .npy files and Kaldi archives (io/dataset/matrix_file.h).
#include "io/dataset/matrix_file.h"

#include "io/common/err_text.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "'<f4' and Kaldi's binary floats are little-endian");

#define MATRIX_MAX_VALUES ((int64_t)1 << 31)  // beyond: a damaged header, not an utterance's features

typedef err_text_t ctx_t;
#define bad(c, ...) err_text_fail(c, -1, __VA_ARGS__)

// rows x cols values of `elem` bytes (4: float, 8: double) from f into float32, checked finite.
static int read_values(const ctx_t *c, FILE *f, int64_t rows, int64_t cols, int elem, float **data) {
    if (rows < 1 || cols < 1 || cols > MATRIX_MAX_VALUES / rows)
        return bad(c, "a %lld x %lld matrix (an utterance needs at least one frame of at least one value)",
                   (long long)rows, (long long)cols);
    const size_t n = (size_t)(rows * cols);
    void *raw = malloc(n * (size_t)elem);
    float *out = malloc(n * sizeof(float));
    if (!raw || !out) {
        free(raw);
        free(out);
        return bad(c, "out of memory for a %lld x %lld matrix", (long long)rows, (long long)cols);
    }
    if (fread(raw, (size_t)elem, n, f) != n) {
        free(raw);
        free(out);
        return bad(c, "the file ends inside its %lld x %lld matrix", (long long)rows, (long long)cols);
    }
    for (size_t j = 0; j < n; j++) out[j] = elem == 4 ? ((const float *)raw)[j] : (float)((const double *)raw)[j];
    free(raw);
    for (size_t j = 0; j < n; j++)
        if (!isfinite(out[j])) {
            free(out);
            return bad(c, "NaN or Inf at row %lld, column %lld", (long long)(j / (size_t)cols),
                       (long long)(j % (size_t)cols));
        }
    *data = out;
    return 0;
}

// The header of a version 1-3 .npy file: dtype '<f4' or '<f8', C order, two dimensions.
static int read_npy(const ctx_t *c, FILE *f, float **data, int64_t *rows, int64_t *cols) {
    unsigned char magic[10];
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "\x93NUMPY", 6) != 0) return bad(c, "not a NumPy .npy file");
    uint32_t hl = 0;
    if (magic[6] == 1) {
        uint16_t h16;
        if (fread(&h16, 2, 1, f) != 1) return bad(c, "a truncated .npy header");
        hl = h16;
    } else if (fread(&hl, 4, 1, f) != 1) {
        return bad(c, "a truncated .npy header");
    }
    if (hl > 65536) return bad(c, "a .npy header of %u bytes", hl);
    char header[65537];
    if (fread(header, 1, hl, f) != hl) return bad(c, "a truncated .npy header");
    header[hl] = 0;
    const int f4 = strstr(header, "'<f4'") != NULL, f8 = strstr(header, "'<f8'") != NULL;
    if (!f4 && !f8) return bad(c, "the array is not float32 or float64 ('descr' '<f4' or '<f8')");
    if (strstr(header, "'fortran_order': True")) return bad(c, "the array is in Fortran order (save it C-ordered)");
    const char *shape = strstr(header, "'shape':");
    long long r = 0, k = 0;
    int end = 0;
    if (!shape || sscanf(shape, "'shape': (%lld, %lld%n", &r, &k, &end) != 2 || shape[end] != ')')
        return bad(c, "the array is not 2-D (frames x values): header %.200s", header);
    *rows = r, *cols = k;
    return read_values(c, f, r, k, f4 ? 4 : 8, data);
}

// A Kaldi binary matrix at the current position: "\0B", then "FM " or "DM ", then the rows and
// columns each as a size byte (4) and an int32.
static int read_kaldi(const ctx_t *c, FILE *f, float **data, int64_t *rows, int64_t *cols) {
    unsigned char h[5];
    if (fread(h, 1, 2, f) != 2 || h[0] != 0 || h[1] != 'B')
        return bad(c, "no Kaldi binary matrix at this offset (an 'ark:OFFSET' of feats.scp points just after the key)");
    if (fread(h, 1, 3, f) != 3) return bad(c, "a truncated Kaldi matrix header");
    if (!memcmp(h, "CM", 2))
        return bad(c, "a Kaldi compressed matrix: write the features uncompressed (copy-feats --compress=false)");
    const int fm = !memcmp(h, "FM ", 3), dm = !memcmp(h, "DM ", 3);
    if (!fm && !dm) return bad(c, "not a Kaldi float or double matrix (token '%.3s')", (const char *)h);
    int32_t dims[2];
    for (int i = 0; i < 2; i++) {
        unsigned char size;
        if (fread(&size, 1, 1, f) != 1 || size != 4 || fread(&dims[i], 4, 1, f) != 1)
            return bad(c, "a truncated Kaldi matrix header");
    }
    *rows = dims[0], *cols = dims[1];
    return read_values(c, f, dims[0], dims[1], fm ? 4 : 8, data);
}

int matrix_read(const char *spec, float **data, int64_t *rows, int64_t *cols, char *err, size_t cap) {
    char path[4096];
    snprintf(path, sizeof path, "%s", spec);
    long long offset = -1;
    char *colon = strrchr(path, ':');
    const size_t n = strlen(path);
    const int npy = n > 4 && strcmp(path + n - 4, ".npy") == 0;
    if (!npy && colon) {
        char *end = NULL;
        offset = strtoll(colon + 1, &end, 10);
        if (end == colon + 1 || *end || offset < 0)
            offset = -1;
        else
            *colon = 0;
    }
    const ctx_t c = {spec, err, cap};
    if (!npy && offset < 0) return bad(&c, "neither a .npy file nor a Kaldi 'archive.ark:OFFSET'");
    FILE *f = fopen(path, "rb");
    if (!f) return bad(&c, "cannot open (%s)", strerror(errno));
    int rc = npy                               ? read_npy(&c, f, data, rows, cols)
             : fseek(f, offset, SEEK_SET) != 0 ? bad(&c, "cannot seek to offset %lld", offset)
                                               : read_kaldi(&c, f, data, rows, cols);
    fclose(f);
    return rc;
}
