// Parallel reads (run under mpiexec -n 1, 2, 4): every rank reads exactly the frames its
// sampler gave it, for fixed- and variable-length layouts, with padding duplicates,
// overlapping segments, crops, and ranks that read nothing while others do.
#include "io/dataset/dataset_read.h"
#include "io/dataset/dataset_write.h"
#include "io/loader/loader.h"
#include "io/loader/sampler.h"
#include "kernels/base/check.h"
#include "tests/test_util.h"

#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#define F 3

static float value(int64_t u, int64_t t, int64_t j) { return (float)(u * 1000 + t) + 0.125f * (float)j; }

static void write_files(const char *fixed, const char *var, int64_t nf, int64_t T, int64_t nv, int64_t *lens) {
    float *buf = malloc(64 * F * sizeof(float));
    int32_t *lab = malloc((size_t)(nf > nv ? nf : nv) * sizeof(int32_t));
    for (int64_t i = 0; i < (nf > nv ? nf : nv); i++) lab[i] = (int32_t)(i % 5);
    dataset_writer_t w;
    dataset_writer_create(&w, fixed, MPI_COMM_SELF,
                          &(dataset_layout_t){.num_utts = nf, .num_speakers = 5, .feature_dim = F, .fixed_frames = T});
    for (int64_t u = 0; u < nf; u++) {
        for (int64_t t = 0; t < T; t++)
            for (int j = 0; j < F; j++) buf[t * F + j] = value(u, t, j);
        dataset_writer_put(&w, u, buf);
    }
    dataset_writer_finish(&w, lab, NULL, NULL);
    dataset_writer_create(&w, var, MPI_COMM_SELF,
                          &(dataset_layout_t){.num_utts = nv, .num_speakers = 5, .feature_dim = F, .lengths = lens});
    for (int64_t u = 0; u < nv; u++) {
        for (int64_t t = 0; t < lens[u]; t++)
            for (int j = 0; j < F; j++) buf[t * F + j] = value(u, t, j);
        dataset_writer_put(&w, u, buf);
    }
    dataset_writer_finish(&w, lab, NULL, NULL);
    free(buf);
    free(lab);
}

// Frames of segment s are value(u, start + k) for k in [0, count).
static void check_segments(dataset_t *ds, int n, const segment_t *segs, const char *what) {
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += segs[i].count;
    float *out = malloc((size_t)(total * F + 1) * sizeof(float));
    dataset_read(ds, &ds->audio, n, segs, out);
    const float *p = out;
    for (int i = 0; i < n; i++)
        for (int64_t k = 0; k < segs[i].count; k++, p += F)
            for (int j = 0; j < F; j++)
                EXPECT(p[j] == value(segs[i].utt, segs[i].start + k, j),
                       "%s: seg %d (utt %lld start %lld) frame %lld: %g", what, i, (long long)segs[i].utt,
                       (long long)segs[i].start, (long long)k, p[j]);
    free(out);
}

static void check_file(const char *path, int rank, int world) {
    dataset_t ds, self;
    dataset_open(&ds, path, MPI_COMM_WORLD);
    dataset_open(&self, path, MPI_COMM_SELF);
    int64_t N = ds.num_utts;
    segment_t segs[16];
    int64_t idx[16];
    for (int64_t epoch = 0; epoch < 3; epoch++) {
        sampler_t s;
        sampler_init(&s, N, world, rank, 9, 1, 0);
        sampler_set_epoch(&s, epoch);
        for (int64_t B = 1; B <= 7; B += 3) {
            for (int64_t st = 0; st < sampler_steps(&s, B); st++) {
                int n = sampler_batch(&s, st, B, idx);
                for (int i = 0; i < n; i++) segs[i] = (segment_t){idx[i], 0, dataset_frames(&ds, idx[i])};
                check_segments(&ds, n, segs, "whole utterances");
            }
        }
        // Loader crops: the same frames whichever rank (or a lone reader) loads a sample.
        loader_t lw, ls;
        loader_spec_t spec = {.crop = 4, .min_frames = 1};
        loader_init(&lw, &ds, 4, &spec, 77, 2);
        loader_init(&ls, &self, 4, &spec, 77, 0);
        for (int64_t st = 0; st < sampler_steps(&s, 4); st++) {
            int n = sampler_batch(&s, st, 4, idx);
            const batch_t *a = loader_load(&lw, epoch, idx, n);
            const batch_t *b = loader_load(&ls, epoch, idx, n);
            EXPECT(a->frame_off[n] == 4 * n, "crop of 4 frames each");
            EXPECT(memcmp(a->x, b->x, (size_t)(a->frame_off[n] * F) * sizeof(float)) == 0,
                   "crop differs from lone reader");
            for (int i = 0; i < n; i++) {
                const float *x = a->x + a->frame_off[i] * F;
                int64_t len = dataset_frames(&ds, idx[i]);
                int64_t start = (int64_t)(x[0] - value(idx[i], 0, 0));  // the crop's first frame
                if (len >= 4)
                    EXPECT(start >= 0 && start <= len - 4, "crop start %lld of utt %lld", (long long)start,
                           (long long)idx[i]);
                for (int k = 0; k < 4; k++) {
                    float want = len >= 4 ? value(idx[i], start + k, 0) : value(idx[i], k % len, 0);  // short: repeated
                    EXPECT(x[k * F] == want, "crop frame %d of utt %lld", k, (long long)idx[i]);
                }
                EXPECT(a->labels[i] == (int32_t)(idx[i] % 5), "label of %lld", (long long)idx[i]);
            }
        }
        loader_free(&lw);
        loader_free(&ls);
        sampler_free(&s);
    }
    // Duplicates and overlaps merge correctly; rank 1 reads nothing while others read.
    int n = 0;
    if (rank != 1) {
        int64_t u = (rank * 5) % N, len = dataset_frames(&ds, u);
        segs[n++] = (segment_t){u, 0, len};
        segs[n++] = (segment_t){u, 0, len};  // padding duplicate
        if (len >= 3) {
            segs[n++] = (segment_t){u, 1, len - 1};  // overlaps the first
            segs[n++] = (segment_t){u, 0, 2};
        }
        segs[n++] = (segment_t){N - 1, 0, 1};
    }
    check_segments(&ds, n, segs, "duplicates/overlaps");
    dataset_close(&self);
    dataset_close(&ds);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, world;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    char fixed[256], var[256];
    snprintf(fixed, sizeof fixed, "read_fixed_%d.h5", world);
    snprintf(var, sizeof var, "read_var_%d.h5", world);
    int64_t lens[29];
    for (int i = 0; i < 29; i++) lens[i] = 1 + (i * 7) % 9;
    if (rank == 0) write_files(fixed, var, 23, 5, 29, lens);
    MPI_Barrier(MPI_COMM_WORLD);
    check_file(fixed, rank, world);
    check_file(var, rank, world);
    int fails = test_failures, all = 0;
    MPI_Allreduce(&fails, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        remove(fixed);
        remove(var);
    }
    MPI_Finalize();
    test_failures = rank == 0 ? all : fails;
    return rank == 0 ? test_report("test_dataset_read") : (fails ? 1 : 0);
}
