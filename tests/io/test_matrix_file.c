// Feature matrices for prepare --visual-scp (io/dataset/matrix_file.h): a float32 and a float64
// .npy and a Kaldi float matrix read back exactly; each refusal names the file and the reason
// (compressed Kaldi matrices, Fortran order, 3-D arrays, integers, NaN, a truncated file, a shape
// whose product overflows, an offset that points at no matrix).
#include "io/dataset/matrix_file.h"
#include "tests/test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void write_file(const char *path, const void *a, size_t n, const void *b, size_t m) {
    FILE *f = fopen(path, "wb");
    EXPECT(f && fwrite(a, 1, n, f) == n && (m == 0 || fwrite(b, 1, m, f) == m) && fclose(f) == 0, "write %s", path);
}

// A version-1 .npy header for `dict`, padded to 64 bytes.
static size_t npy_header(char *h, const char *dict) {
    memset(h, ' ', 128);
    memcpy(h, "\x93NUMPY\x01\x00", 8);
    const uint16_t hl = 118;
    memcpy(h + 8, &hl, 2);
    memcpy(h + 10, dict, strlen(dict));
    h[127] = '\n';
    return 128;
}

static void expect_refused(const char *spec, const char *why) {
    float *x = NULL;
    int64_t r, c;
    char err[512] = "";
    int rc = matrix_read(spec, &x, &r, &c, err, sizeof err);
    EXPECT(rc != 0 && strstr(err, spec) && strstr(err, why), "%s: want a refusal saying '%s', got '%s'", spec, why,
           err);
    free(x);
}

int main(void) {
    char dir[] = "/tmp/test_matrix_file.XXXXXX";  // the files are made (and left) in a folder of their own
    EXPECT(mkdtemp(dir) && chdir(dir) == 0, "a work folder");
    char h[128];
    const float v4[6] = {1, -2, 3.5f, 4, 5, 6.25f};
    const double v8[6] = {1, -2, 3.5, 4, 5, 6.25};
    write_file("m_f4.npy", h, npy_header(h, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"), v4,
               sizeof v4);
    write_file("m_f8.npy", h, npy_header(h, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }"), v8,
               sizeof v8);
    const char ark_head[] = "utt1 \0BFM \4\2\0\0\0\4\3\0\0\0";
    write_file("m.ark", ark_head, sizeof ark_head - 1, v4, sizeof v4);
    const char *ok[] = {"m_f4.npy", "m_f8.npy", "m.ark:5"};
    for (int k = 0; k < 3; k++) {
        float *x = NULL;
        int64_t r = 0, c = 0;
        char err[512] = "";
        EXPECT(matrix_read(ok[k], &x, &r, &c, err, sizeof err) == 0, "%s: %s", ok[k], err);
        EXPECT(r == 2 && c == 3 && x && memcmp(x, v4, sizeof v4) == 0, "%s: a %lld x %lld matrix, values differ", ok[k],
               (long long)r, (long long)c);
        free(x);
    }
    write_file("m_fortran.npy", h, npy_header(h, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }"), v4,
               sizeof v4);
    write_file("m_3d.npy", h, npy_header(h, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 3), }"), v4,
               sizeof v4);
    write_file("m_int.npy", h, npy_header(h, "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }"), v4,
               sizeof v4);
    write_file("m_short.npy", h, npy_header(h, "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 3), }"), v4,
               sizeof v4);
    write_file("m_huge.npy", h,
               npy_header(h, "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }"), v4,
               sizeof v4);
    float nan[6] = {1, 2, 3, 4, 0.0f / 0.0f, 6};
    write_file("m_nan.npy", h, npy_header(h, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"), nan,
               sizeof nan);
    const char cm[] = "utt1 \0BCM \4\2\0\0\0";
    write_file("m_cm.ark", cm, sizeof cm - 1, NULL, 0);
    expect_refused("m_fortran.npy", "Fortran order");
    expect_refused("m_3d.npy", "not 2-D");
    expect_refused("m_int.npy", "not float32 or float64");
    expect_refused("m_short.npy", "ends inside");
    expect_refused("m_nan.npy", "NaN or Inf at row 1, column 1");
    expect_refused("m_cm.ark:5", "compressed");
    expect_refused("m_huge.npy", "a 4611686018427387904 x 4 matrix");  // (rows x cols would wrap to 0)
    expect_refused("m.ark:0", "no Kaldi binary matrix at this offset");
    expect_refused("m.txt", "neither a .npy file nor");
    expect_refused("missing.npy", "cannot open");
    return test_report("test_matrix_file");
}
