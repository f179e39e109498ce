// On-the-fly augmentation of training samples (docs/augmentation.md), on the loader's worker
// threads: speed perturbation (each factor its own speakers), reverberation with impulse
// responses from a bank, additive noise from a bank by category at drawn SNRs (babble: the sum
// of several speech entries), and SpecAugment's time and frequency masks on the frames.
//
// Every random choice is drawn from io/rng.h streams keyed on (seed, purpose, epoch, sample
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
#include "io/dataset.h"

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

// The training flags (app/cli/train_options.c binds one row to each field).
typedef struct {
    char noise_bank[512];            // --noise-bank: prepare --kind noise
    char rir_bank[512];              // --rir-bank: prepare --kind rir
    double prob;                     // --aug-prob: a sample is augmented at all (reverb, noise, masks)
    double reverb_prob;              // --reverb-prob: an augmented sample is reverberated
    double noise_prob;               // --noise-prob: an augmented sample gets additive noise
    char noise_snr[256];             // --noise-snr "CAT=LO:HI,...": categories used as noise, SNR in dB
    char babble[64];                 // --babble "CAT=MIN:MAX": entries of CAT summed (0 entries: "")
    char speed[64];                  // --speed-perturb "1.0,0.9,1.1": factors ("" off)
    int64_t time_masks, time_width;  // --spec-time-masks N, --spec-time-width W (frames)
    int64_t freq_masks, freq_width;  // --spec-freq-masks N, --spec-freq-width W (mel bins)
} augment_config_t;

#define AUGMENT_MAX_KINDS   8   // categories in --noise-snr
#define AUGMENT_MAX_SPEEDS  8   // factors in --speed-perturb
#define AUGMENT_MAX_SOURCES 16  // entries in one babble
#define AUGMENT_MAX_MASKS   16  // masks of each direction

// One --noise-snr item: a noise bank category and its SNR range in dB.
typedef struct {
    char category[64];
    double snr_lo, snr_hi;
} augment_noise_kind_t;

// The flags' strings, parsed.
typedef struct {
    int num_kinds;
    augment_noise_kind_t kind[AUGMENT_MAX_KINDS];
    int babble;                // index into kind[] of the babble category, -1: none
    int babble_lo, babble_hi;  // entries summed
    int num_speeds;            // 0: no speed perturbation
    double speed[AUGMENT_MAX_SPEEDS];
} augment_spec_t;

// Off: no bank, no speed factors, no masks; SNRs as MUSAN recipes use them.
augment_config_t augment_config_defaults(void);
// Parses and checks the flags (ranges, syntax). Returns 0, or -1 with one sentence naming the
// flag in err.
int augment_parse(const augment_config_t *c, augment_spec_t *s, char *err, size_t cap);
// Classes per speaker: the number of speed factors (1 without speed perturbation). The
// classifier has num_speakers x this many classes: factor k's copies of speaker s are class
// s + k num_speakers.
int augment_classes_per_speaker(const augment_config_t *c);

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

// ---- the loader's side (io/loader.c) ------------------------------------------------------
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
