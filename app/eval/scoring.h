// Speaker-verification scoring: cosine scores, equal error rate, minimum detection cost,
// adaptive score normalisation (AS-norm).
#pragma once
#include "io/trials.h"

#include <stdint.h>

// Equal error rate in [0, 1] of scores with target flags (1 target, 0 nontarget), linearly
// interpolated between the two thresholds where miss and false-alarm rates cross. NaN when
// a class is empty or a score is NaN (a diverged model), as for score_min_dcf.
double score_eer(const float *scores, const uint8_t *target, int64_t n);
// Normalised minimum detection cost at p_target (C_miss = C_fa = 1): min over thresholds of
// (p Pmiss + (1-p) Pfa) / min(p, 1-p).
double score_min_dcf(const float *scores, const uint8_t *target, int64_t n, double p_target);
// Cosine similarity of two vectors of length d.
float score_cosine(const float *a, const float *b, int64_t d);
// For each of n embeddings (n, d): mean and std of its top_k cosine scores against the cohort
// (m, d) -- the statistics AS-norm needs. Rows must be L2-normalised.
void score_cohort_stats(const float *emb, int64_t n, const float *cohort, int64_t m, int64_t d, int64_t top_k,
                        float *mean, float *std);
// Symmetric AS-norm: 0.5 * ((s - mu_e) / sd_e + (s - mu_t) / sd_t).
static inline float score_asnorm(float s, float mu_e, float sd_e, float mu_t, float sd_t) {
    return 0.5f * ((s - mu_e) / sd_e + (s - mu_t) / sd_t);
}
// Reads a trial list (io/trials.h) against utt_ids (n_utts). Every rank calls it and reaches
// the same verdict: a bad list stops every rank with the file and line named (exit 3).
void trials_read(const char *path, char *const *utt_ids, int64_t n_utts, trials_t *t);
// Cosine scores of every trial over L2-normalised embeddings (n_utts, d).
void trials_score(const trials_t *t, const float *emb, int64_t d, float *scores);

// Normalises each row of x (n, d) to unit length (rows of zeros stay zero).
void score_l2_normalise(float *x, int64_t n, int64_t d);
