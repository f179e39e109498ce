// The augmentation flags (docs/augmentation.md) and their parsed form: what the training config
// holds and checks before anything is opened (io/augment/augment.h applies them).
#pragma once
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
