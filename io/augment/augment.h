// On-the-fly augmentation of training samples (docs/augmentation.md), on the loader's worker
// threads: speed perturbation (each factor its own speakers), reverberation with impulse
// responses from a bank, additive noise from a bank by category at drawn SNRs (babble: the sum
// of several speech entries), and SpecAugment's time and frequency masks on the frames.
//
// Every random choice is drawn from kernels/base/rng.h streams keyed on (seed, purpose, epoch, sample
// index) -- never on the rank or the thread -- so a sample is augmented the same way on any
// world size, with any number of loader threads, and after a resume.
//
// Banks are audio datasets (`spkddp prepare --kind noise|rir`: int16 waveforms, labels are
// categories, /speakers their names, root attribute `bank`). They are read per draw, not held
// whole: the loader reads the entries (or, for noise, just the stretch) each batch needs in
// the same collective read as the speech crops. MUSAN alone is 109 hours, 12.5 GB as int16,
// more than every rank of a node can keep; a batch needs a few hundred KB of it.
//
// The order, per sample: speed -> reverberation -> additive noise -> fbank -> (repetition,
// mean normalisation) -> SpecAugment.
#pragma once
#include "io/augment/augment_config.h"
#include "io/dataset/dataset.h"

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

typedef struct augment augment_t;                  // the parsed flags and the opened banks
typedef struct augment_batch augment_batch_t;      // a batch's draws and the bank reads they need
typedef struct augment_scratch augment_scratch_t;  // one thread's buffers and FFT plans

// Collective over comm. NULL when the flags ask for nothing. Opens and checks the banks
// against the flags and the training set `speech` (waveform kinds need an audio dataset of
// the same sample rate); any mismatch stops every rank with one line naming flag and file.
augment_t *augment_open(const augment_config_t *c, const dataset_t *speech, MPI_Comm comm, uint64_t seed);
void augment_close(augment_t *a);
// One line for the log: what is on, from which banks.
void augment_describe(const augment_t *a, char *out, size_t cap);

// ---- the loader's side (io/loader/loader.c) ------------------------------------------------------
augment_batch_t *augment_batch_new(void);
void augment_batch_free(augment_batch_t *b);
// Starts planning a batch of n samples (forgets the last one's draws and reads).
void augment_batch_begin(augment_batch_t *b, int n);
// The speed factor of utterance u in `epoch`: its index k (class offset k num_speakers).
int augment_speed_of(const augment_t *a, int64_t epoch, int64_t u);
// Frames to read for a crop of `crop` output frames at factor k (more for k > 1.0, less for
// k < 1.0, with a margin for the resampler's edges); crop itself at factor 1 and for 0.
int64_t augment_source_frames(const augment_t *a, int k, int64_t crop);
// Sample i of the batch is utterance u at factor k, read as `src` samples (0 for a feature
// dataset); `need` is the samples a crop's fbank takes (0: whole utterances). Draws the rest
// and queues the bank reads. Returns the samples augment_wave will give (src at factor 1).
int64_t augment_plan(const augment_t *a, augment_batch_t *b, int i, int64_t epoch, int64_t u, int k, int64_t src,
                     int64_t need);
// Collective: reads the bank entries the planned batch needs (every rank calls it once per
// batch, whether it needs anything or not).
void augment_read(augment_t *a, augment_batch_t *b);

// ---- the worker threads' side ---------------------------------------------------------------
augment_scratch_t *augment_scratch_new(void);
void augment_scratch_free(augment_scratch_t *s);
// Sample i's waveform: x (n = src samples, may be changed in place) -> speed, reverberation,
// noise. Returns the augmented samples (augment_plan's count), x itself or scratch memory.
float *augment_wave(const augment_t *a, const augment_batch_t *b, int i, augment_scratch_t *s, float *x, int64_t n);
// Sample i's frames x (T, F), after mean normalisation: SpecAugment's masks (set to 0).
void augment_frames(const augment_t *a, const augment_batch_t *b, int i, float *x, int64_t T, int64_t F);
