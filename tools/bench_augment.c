// Augmented samples per second on one core (a benchmark, not a test): the loader turns
// 200-frame crops of an audio dataset into frames on the calling thread (no workers), with
// each kind of augmentation alone and all together, so the figures are the per-core cost a
// loader thread pays per sample (docs/augmentation.md).
//   bench_augment SPEECH.h5 NOISE.h5 RIR.h5 [SAMPLES=512]
#include "io/augment/augment.h"
#include "io/dataset/dataset.h"
#include "io/loader/loader.h"
#include "kernels/base/clock.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *name;
    const char *noise, *rir, *speed;
    double reverb_p, noise_p;
    int64_t masks;
} setting_t;

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    if (argc < 4) {
        fprintf(stderr, "usage: bench_augment SPEECH.h5 NOISE.h5 RIR.h5 [SAMPLES]\n");
        return 2;
    }
    const int total = argc > 4 ? atoi(argv[4]) : 512, B = 16;
    const setting_t settings[] = {
        {"fbank only (no augmentation)", "", "", "", 0, 0, 0},
        {"speed 0.9/1.0/1.1", "", "", "0.9,1.0,1.1", 0, 0, 0},
        {"reverberation (every sample)", "", argv[3], "", 1, 0, 0},
        {"noise, music or babble (every sample)", argv[2], "", "", 0, 1, 0},
        {"SpecAugment (2 time + 2 frequency masks)", "", "", "", 0, 0, 2},
        {"all: speed, reverb p 0.5, noise p 0.5, masks", argv[2], argv[3], "0.9,1.0,1.1", 0.5, 0.5, 2},
    };
    dataset_t ds;
    dataset_open(&ds, argv[1], MPI_COMM_SELF);
    const loader_spec_t spec = {.crop = 200, .min_frames = 1, .cmn = 1};
    int64_t *idx = malloc((size_t)B * sizeof(int64_t));
    printf("%-46s %10s %14s\n", "per core, 200-frame crops", "samples/s", "ms per sample");
    for (size_t k = 0; k < sizeof settings / sizeof settings[0]; k++) {
        const setting_t *s = &settings[k];
        augment_config_t c = augment_config_defaults();
        snprintf(c.noise_bank, sizeof c.noise_bank, "%s", s->noise);
        snprintf(c.rir_bank, sizeof c.rir_bank, "%s", s->rir);
        snprintf(c.speed, sizeof c.speed, "%s", s->speed);
        c.reverb_prob = s->reverb_p;
        c.noise_prob = s->noise_p;
        c.time_masks = c.freq_masks = s->masks;
        augment_t *a = augment_open(&c, &ds, MPI_COMM_SELF, 1);
        loader_t l;
        loader_init(&l, &ds, B, &spec, 1, 0);
        loader_set_augment(&l, a);
        double t0 = 0;
        for (int done = -B; done < total; done += B) {  // the first batch warms up (plans, buffers)
            if (done == 0) t0 = spk_seconds();
            for (int i = 0; i < B; i++) idx[i] = (done + B + i) % ds.num_utts;
            loader_load(&l, 1, idx, B);
        }
        const double el = spk_seconds() - t0;
        printf("%-46s %10.1f %14.2f\n", s->name, total / el, 1e3 * el / total);
        fflush(stdout);
        loader_free(&l);
        augment_close(a);
    }
    free(idx);
    dataset_close(&ds);
    MPI_Finalize();
    return 0;
}
