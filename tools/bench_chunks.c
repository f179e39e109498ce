// Random-crop reads against the chunk layout of /features and /audio (not a test):
//   mpiexec -n 2 build/tests/bench_chunks [DIR]
// writes a synthetic fbank dataset and an audio dataset (1000 utterances of 3-7 s) with
// chunks of 64 KiB .. 4 MiB, with and without gzip, and times the collective reads of a
// training step (16 random 2 s crops per rank), as io/loader/loader.c issues them.
#include "io/dataset/dataset_read.h"
#include "io/dataset/dataset_write.h"
#include "kernels/base/check.h"
#include "kernels/base/clock.h"
#include "kernels/base/rng.h"

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#define UTTS  1000
#define STEPS 40
#define BATCH 16
#define CROP  200  // frames

static void write_set(const char *path, int audio, int64_t chunk, int deflate, const int64_t *secs) {
    int64_t len[UTTS], F = 80;
    for (int i = 0; i < UTTS; i++) len[i] = audio ? secs[i] * 16000 : (secs[i] * 16000 - 400) / 160 + 1;
    dataset_writer_t w;
    dataset_layout_t lay = {.num_utts = UTTS,
                            .num_speakers = 10,
                            .feature_dim = F,
                            .lengths = len,
                            .sample_rate = audio ? 16000 : 0,
                            .chunk_bytes = chunk,
                            .deflate = deflate};
    dataset_writer_create(&w, path, MPI_COMM_SELF, &lay);
    int32_t lab[UTTS];
    void *buf = malloc((size_t)(6 * 16000 * 4 * F));
    for (int i = 0; i < UTTS; i++) {
        rng_t r = rng_init(1, RNG_PURPOSE_SYNTH, 0, (uint64_t)i);
        lab[i] = i % 10;
        for (int64_t t = 0; t < len[i]; t++) {
            if (audio) {  // a tone in noise, speech-like level
                ((int16_t *)buf)[t] = (int16_t)(3000 * sin(0.05 * t) + 300 * rng_normal(&r));
            } else {
                for (int64_t j = 0; j < F; j++)
                    ((float *)buf)[t * F + j] = (float)(8 + 2 * sin(0.1 * t + j) + 0.5 * rng_normal(&r));
            }
        }
        dataset_writer_put(&w, i, buf);
    }
    dataset_writer_finish(&w, lab, NULL, NULL);
    free(buf);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, world;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    const char *dir = argc > 1 ? argv[1] : ".";
    int64_t secs[UTTS];
    for (int i = 0; i < UTTS; i++) secs[i] = 3 + i % 5;
    const int64_t chunks[] = {64 << 10, 256 << 10, 1 << 20, 4 << 20};
    if (rank == 0) printf("%-6s %-9s %-7s %10s %12s\n", "store", "chunk", "gzip", "file MB", "read ms/step");
    for (int audio = 0; audio < 2; audio++)
        for (int c = 0; c < 5; c++) {
            int64_t chunk = c < 4 ? chunks[c] : 256 << 10;
            int deflate = c == 4 ? 1 : 0;
            char path[4096];
            snprintf(path, sizeof path, "%s/bench_chunks_%d_%d.h5", dir, audio, c);
            if (rank == 0) write_set(path, audio, chunk, deflate, secs);
            MPI_Barrier(MPI_COMM_WORLD);
            dataset_t ds;
            dataset_open(&ds, path, MPI_COMM_WORLD);
            const stream_t *st = audio ? &ds.wave : &ds.audio;
            void *out = malloc((size_t)BATCH * 4 * 80 * CROP * 4);
            double t0 = 0;
            for (int s = -2; s < STEPS; s++) {  // two warm-up steps
                if (s == 0) t0 = spk_seconds();
                segment_t seg[BATCH];
                for (int b = 0; b < BATCH; b++) {
                    rng_t r = rng_init(7, RNG_PURPOSE_CROP, (uint64_t)(s + 2), (uint64_t)(rank * BATCH + b));
                    int64_t u = (int64_t)rng_below(&r, UTTS), len = dataset_frames(&ds, u);
                    seg[b] = (segment_t){u, (int64_t)rng_below(&r, (uint64_t)(len - CROP + 1)), CROP};
                    if (audio) seg[b] = dataset_frames_to_samples(&ds, seg[b]);
                }
                dataset_read(&ds, st, BATCH, seg, out);
            }
            double ms = 1000.0 * (spk_seconds() - t0) / STEPS, worst = ms;
            MPI_Reduce(&ms, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
            free(out);
            dataset_close(&ds);
            if (rank == 0) {
                struct stat sb;
                stat(path, &sb);
                printf("%-6s %-9lld %-7s %10.1f %12.2f\n", audio ? "audio" : "fbank", (long long)chunk >> 10,
                       deflate ? "1" : "-", (double)sb.st_size / 1e6, worst);
                remove(path);
            }
            MPI_Barrier(MPI_COMM_WORLD);
        }
    MPI_Finalize();
    return 0;
}
