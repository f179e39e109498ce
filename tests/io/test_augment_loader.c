// Augmented samples do not depend on the world size, the loader's threads or the batch a
// sample comes in (run under mpiexec -n 1 and 2): every rank loads its share of each epoch
// with speed perturbation, reverberation, noise (babble too) and SpecAugment on 2 worker
// threads, and a lone reader (MPI_COMM_SELF, no threads, one sample per batch) must give
// bitwise the same frames and labels. The augmentation must also change samples, move
// labels by the speed factor, and differ between epochs. With two views per utterance
// (loader_set_views) view 0 is the sample without views and view 1 differs from it.
#include "io/augment/augment.h"
#include "io/dataset/dataset.h"
#include "io/dataset/dataset_write.h"
#include "io/loader/loader.h"
#include "io/loader/sampler.h"
#include "kernels/base/rng.h"
#include "tests/test_util.h"

#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#define S    3   // speakers
#define N    10  // utterances
#define CROP 30  // frames

static char speech_h5[64], noise_h5[64], rir_h5[64];  // named by world size: runs may overlap

// An audio dataset of n entries of lens[i] samples: tones with noise (kind 0), noise (1), or
// decaying noise after an impulse (2, impulse responses). bank: "" or "noise"/"rir".
static void write_audio(const char *path, int64_t n, const int64_t *lens, const int32_t *labels, int64_t classes,
                        const char *const *names, const char *bank, int kind) {
    dataset_writer_t w;
    dataset_writer_create(
        &w, path, MPI_COMM_SELF,
        &(dataset_layout_t){
            .num_utts = n, .num_speakers = classes, .feature_dim = 23, .lengths = lens, .sample_rate = 16000});
    for (int64_t i = 0; i < n; i++) {
        rng_t g = rng_init(5, 50 + (uint64_t)kind, (uint64_t)i, 0);
        int16_t *pcm = malloc((size_t)lens[i] * sizeof(int16_t));
        for (int64_t j = 0; j < lens[i]; j++) {
            double v = kind == 0   ? 0.3 * sin(0.05 * (double)(labels[i] + 1) * (double)j) + 0.01 * rng_normal(&g)
                       : kind == 1 ? 0.2 * rng_normal(&g)
                                   : (j == 40 ? 0.9 : 0.1 * rng_normal(&g) * exp(-(double)j / 600.0));
            pcm[j] = (int16_t)lrint(32767 * fmax(-1, fmin(1, v)));
        }
        dataset_writer_put(&w, i, pcm);
        free(pcm);
    }
    if (bank[0]) dataset_writer_note_str(&w, "bank", bank);
    dataset_writer_finish(&w, labels, NULL, names);
}

static void write_files(void) {
    int64_t lens[N];
    int32_t labels[N];
    for (int i = 0; i < N; i++) lens[i] = 2000 + 700 * i, labels[i] = i % S;  // 11..51 frames: short ones repeat
    const char *spk[S] = {"a", "b", "c"};
    write_audio(speech_h5, N, lens, labels, S, spk, "", 0);
    const int64_t nlens[7] = {3000, 9000, 500, 6000, 7000, 8000, 4000};
    const int32_t ncat[7] = {0, 0, 1, 2, 2, 2, 2};
    const char *ncats[3] = {"noise", "music", "speech"};
    write_audio(noise_h5, 7, nlens, ncat, 3, ncats, "noise", 1);
    const int64_t rlens[3] = {1200, 800, 2400};
    const int32_t rcat[3] = {0, 1, 1};
    const char *rcats[2] = {"small", "large"};
    write_audio(rir_h5, 3, rlens, rcat, 2, rcats, "rir", 2);
}

static augment_config_t config(void) {
    augment_config_t c = augment_config_defaults();
    strcpy(c.noise_bank, noise_h5);
    strcpy(c.rir_bank, rir_h5);
    strcpy(c.speed, "1.0,0.9,1.1");
    strcpy(c.babble, "speech=2:3");
    c.prob = 0.8;
    c.time_masks = c.freq_masks = 1;
    c.time_width = 5;
    c.freq_width = 4;
    return c;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, world;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    snprintf(speech_h5, sizeof speech_h5, "aug_speech_%d.h5", world);
    snprintf(noise_h5, sizeof noise_h5, "aug_noise_%d.h5", world);
    snprintf(rir_h5, sizeof rir_h5, "aug_rir_%d.h5", world);
    if (rank == 0) write_files();
    MPI_Barrier(MPI_COMM_WORLD);
    dataset_t ds, self;
    dataset_open(&ds, speech_h5, MPI_COMM_WORLD);
    dataset_open(&self, speech_h5, MPI_COMM_SELF);
    const augment_config_t c = config();
    augment_t *aw = augment_open(&c, &ds, MPI_COMM_WORLD, 42), *as = augment_open(&c, &self, MPI_COMM_SELF, 42);
    const int64_t F = ds.feature_dim;
    const loader_spec_t spec = {.crop = CROP, .min_frames = 1, .cmn = 1};
    loader_t lw, ls, lplain, lv;
    loader_init(&lw, &ds, 4, &spec, 42, 2);
    loader_init(&lv, &ds, 8, &spec, 42, 1);  // two views of each utterance
    loader_set_augment(&lv, aw);
    loader_set_views(&lv, 2);
    loader_init(&ls, &self, 1, &spec, 42, 0);
    loader_init(&lplain, &self, 1, &spec, 42, 0);
    loader_set_augment(&lw, aw);
    loader_set_augment(&ls, as);
    float *first = calloc(N * CROP * 23, sizeof(float));  // epoch 0's frames of each utterance
    int changed = 0, moved = 0, seen = 0, epoch_differs = 0, views_differ = 0;
    for (int64_t epoch = 0; epoch < 2; epoch++) {
        sampler_t s;
        sampler_init(&s, N, world, rank, 42, 1, 0);
        sampler_set_epoch(&s, epoch);
        int64_t idx[4];
        for (int64_t st = 0; st < sampler_steps(&s, 4); st++) {
            int n = sampler_batch(&s, st, 4, idx);
            int64_t twice[8];
            for (int i = 0; i < 2 * n; i++) twice[i] = idx[i / 2];
            const batch_t *v = loader_load(&lv, epoch, twice, 2 * n);
            float *views = malloc((size_t)(2 * n) * CROP * F * sizeof(float));
            memcpy(views, v->x, (size_t)(2 * n) * CROP * F * sizeof(float));
            const batch_t *a = loader_load(&lw, epoch, idx, n);
            for (int i = 0; i < n; i++) {
                const float *v0 = views + (size_t)(2 * i) * CROP * F, *v1 = v0 + CROP * F;
                EXPECT(memcmp(v0, a->x + a->frame_off[i] * F, CROP * F * sizeof(float)) == 0,
                       "view 0 of utterance %lld is not its sample without views", (long long)idx[i]);
                views_differ += memcmp(v0, v1, CROP * F * sizeof(float)) != 0;
                const float *x = a->x + a->frame_off[i] * F;
                const batch_t *b = loader_load(&ls, epoch, &idx[i], 1);
                EXPECT(a->frame_off[i + 1] - a->frame_off[i] == CROP && b->frame_off[1] == CROP, "crop length");
                EXPECT(memcmp(x, b->x, CROP * F * sizeof(float)) == 0 && a->labels[i] == b->labels[0],
                       "epoch %lld utterance %lld: %d ranks x 2 threads differ from a lone reader", (long long)epoch,
                       (long long)idx[i], world);
                EXPECT(a->labels[i] % S == ds.labels[idx[i]] && a->labels[i] < 3 * S, "label %d of speaker %d",
                       a->labels[i], ds.labels[idx[i]]);
                moved += a->labels[i] >= S;
                const batch_t *p = loader_load(&lplain, epoch, &idx[i], 1);
                changed += memcmp(x, p->x, CROP * F * sizeof(float)) != 0;
                float *keep = first + idx[i] * CROP * F;
                if (epoch == 0)
                    memcpy(keep, x, CROP * F * sizeof(float));
                else
                    epoch_differs += memcmp(keep, x, CROP * F * sizeof(float)) != 0;
                for (int64_t j = 0; j < CROP * F; j++)
                    EXPECT(isfinite(x[j]), "frame value %lld is not finite", (long long)j);
                seen++;
            }
            free(views);
        }
        sampler_free(&s);
    }
    int mine[5] = {changed, moved, seen, epoch_differs, views_differ}, all[5];
    MPI_Allreduce(mine, all, 5, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    EXPECT(all[4] == all[2], "the two views differ for %d of %d utterances", all[4], all[2]);
    EXPECT(all[0] > all[2] / 2, "augmentation changed %d of %d samples", all[0], all[2]);
    EXPECT(all[1] > 0 && all[1] < all[2], "%d of %d samples have a speed factor's label", all[1], all[2]);
    EXPECT(all[3] > all[2] / 4, "%d of %d samples are augmented differently in epoch 2", all[3], all[2] / 2);
    loader_free(&lw);
    loader_free(&lv);
    loader_free(&ls);
    loader_free(&lplain);
    augment_close(aw);
    augment_close(as);
    dataset_close(&ds);
    dataset_close(&self);
    free(first);
    int fails = test_failures, total = 0;
    MPI_Allreduce(&fails, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        remove(speech_h5);
        remove(noise_h5);
        remove(rir_h5);
    }
    MPI_Finalize();
    test_failures = rank == 0 ? total : fails;
    return test_report("test_augment_loader");
}
