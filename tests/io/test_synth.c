// spkddp synth --kind speakers: the default frames are the same bits as ever (a checksum
// taken when --spectral came in, so the corpora of every test and recipe stay what they were);
// --spectral frames are smooth along the feature axis (neighbouring bins correlate after mean
// normalisation, where the default's do not) and the same bits when written again.
#include "io/common/h5util.h"
#include "io/dataset/synth.h"
#include "tests/test_util.h"

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// The default corpus's checksum (FNV-1a over its frames' bytes) at the configuration below.
#define DEFAULT_CHECKSUM 0x632bad17a8e21bfaull

typedef struct {
    float *x;
    int64_t *off;
    int64_t n, rows, F;
} frames_t;

static frames_t read_frames(const char *path) {
    frames_t r = {0};
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hsize_t dims[2] = {0, 0}, od[1] = {0};
    h5_dataset_shape(f, "features", dims, 2);
    h5_dataset_shape(f, "offsets", od, 1);
    r.rows = (int64_t)dims[0], r.F = (int64_t)dims[1], r.n = (int64_t)od[0] - 1;
    r.x = malloc((size_t)(r.rows * r.F) * sizeof(float));
    r.off = malloc((size_t)(r.n + 1) * sizeof(int64_t));
    h5_read_array(f, "features", H5T_NATIVE_FLOAT, r.x, path);
    h5_read_array(f, "offsets", H5T_NATIVE_INT64, r.off, path);
    H5Fclose(f);
    return r;
}

static void frames_free(frames_t *r) {
    free(r->x);
    free(r->off);
}

static uint64_t checksum(const frames_t *r) {
    uint64_t h = 1469598103934665603ull;
    const unsigned char *p = (const unsigned char *)r->x;
    for (size_t i = 0; i < (size_t)(r->rows * r->F) * sizeof(float); i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

// The correlation of neighbouring feature bins over every frame, each utterance mean-normalised.
static double neighbour_correlation(const frames_t *r) {
    double sxy = 0, sxx = 0, syy = 0;
    for (int64_t u = 0; u < r->n; u++) {
        const int64_t t0 = r->off[u], T = r->off[u + 1] - t0;
        double mean[1024] = {0};
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < r->F; j++) mean[j] += r->x[(t0 + t) * r->F + j] / (double)T;
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j + 1 < r->F; j++) {
                const double a = r->x[(t0 + t) * r->F + j] - mean[j], b = r->x[(t0 + t) * r->F + j + 1] - mean[j + 1];
                sxy += a * b, sxx += a * a, syy += b * b;
            }
    }
    return sxy / sqrt(sxx * syy);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    char dir[] = "/tmp/test_synth.XXXXXX";
    if (!mkdtemp(dir)) return 2;
    char plain[64], spec[64], again[64];
    snprintf(plain, sizeof plain, "%s/plain.h5", dir);
    snprintf(spec, sizeof spec, "%s/spectral.h5", dir);
    snprintf(again, sizeof again, "%s/again.h5", dir);
    synth_config_t c = synth_defaults();
    c.speakers = 6, c.utts_per_speaker = 3, c.dim = 24, c.min_frames = 60, c.max_frames = 80;
    synth_write_speakers(&c, plain, NULL);
    c.spectral = 1;
    synth_write_speakers(&c, spec, NULL);
    synth_write_speakers(&c, again, NULL);

    frames_t p = read_frames(plain), s = read_frames(spec), a = read_frames(again);
    const uint64_t h = checksum(&p);
    EXPECT(h == DEFAULT_CHECKSUM, "the default corpus changed: checksum 0x%016llx, was 0x%016llx",
           (unsigned long long)h, (unsigned long long)DEFAULT_CHECKSUM);
    const double rp = neighbour_correlation(&p), rs = neighbour_correlation(&s);
    printf("neighbouring bins correlate %.3f (default), %.3f (--spectral)\n", rp, rs);
    EXPECT(fabs(rp) < 0.1, "default frames: neighbouring bins correlate %.3f", rp);
    EXPECT(rs > 0.3, "--spectral frames: neighbouring bins correlate only %.3f", rs);
    EXPECT(s.rows == a.rows && memcmp(s.x, a.x, (size_t)(s.rows * s.F) * sizeof(float)) == 0,
           "--spectral written twice differs");
    frames_free(&p), frames_free(&s), frames_free(&a);
    remove(plain), remove(spec), remove(again), rmdir(dir);
    MPI_Finalize();
    return test_report("test_synth");
}
