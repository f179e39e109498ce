// Speaker-verification scoring: cosine scores, the DET curve, equal error rate, minimum
// detection cost, symmetric and adaptive symmetric score normalisation (S-norm, AS-norm).
#pragma once
#include "io/scores/trials.h"

#include <stdint.h>

// The detection error trade-off: thresholds walk from below the lowest score upwards,
// everything below a threshold is rejected, tied scores are stepped over together. Returns
// the number of operating points (Pmiss, Pfa), from (0, 1) to (1, 0); 0 when either class is
// empty or a score is NaN. pm and pf are malloc'ed (points + 1 each, whatever the count).
int64_t score_det_curve(const float *scores, const uint8_t *target, int64_t n, double **pm, double **pf);
// The lowest miss rate at a false-alarm rate of at most pfa, over a DET curve's points (NaN
// for an empty curve).
double score_pmiss_at_pfa(const double *pm, const double *pf, int64_t points, double pfa);
// Equal error rate in [0, 1] of scores with target flags (1 target, 0 nontarget), linearly
// interpolated between the two thresholds where miss and false-alarm rates cross. NaN when
// a class is empty or a score is NaN (a diverged model), as for score_min_dcf.
double score_eer(const float *scores, const uint8_t *target, int64_t n);
// Normalised minimum detection cost at p_target (C_miss = C_fa = 1): min over thresholds of
// (p Pmiss + (1-p) Pfa) / min(p, 1-p).
double score_min_dcf(const float *scores, const uint8_t *target, int64_t n, double p_target);
// Cosine similarity of two vectors of length d.
float score_cosine(const float *a, const float *b, int64_t d);
// For each of n embeddings (n, d): mean and std (population) of its top_k cosine scores
// against the cohort (m, d) -- the statistics AS-norm needs; top_k >= m gives S-norm's, over
// the whole cohort. Rows must be L2-normalised. A std below SCORE_MIN_SPREAD (scores that do
// not spread: equal cohort rows) is floored there, where the definition would divide by 0.
#define SCORE_MIN_SPREAD 1e-6
void score_cohort_stats(const float *emb, int64_t n, const float *cohort, int64_t m, int64_t d, int64_t top_k,
                        float *mean, float *std);
// Symmetric normalisation with each side's cohort statistics (S-norm or AS-norm):
// 0.5 * ((s - mu_e) / sd_e + (s - mu_t) / sd_t).
static inline float score_asnorm(float s, float mu_e, float sd_e, float mu_t, float sd_t) {
    return (float)(0.5 * (((double)s - mu_e) / sd_e + ((double)s - mu_t) / sd_t));
}
// Reads a trial list (io/scores/trials.h) against utt_ids (n_utts, from `ids_from`). Every rank
// calls it and reaches the same verdict: a bad list stops every rank with the file and line named
// (exit 3).
void trials_read(const char *path, char *const *utt_ids, int64_t n_utts, const char *ids_from, trials_t *t);
// Cosine scores of every trial over L2-normalised embeddings (n_utts, d).
void trials_score(const trials_t *t, const float *emb, int64_t d, float *scores);

// Normalises each row of x (n, d) to unit length (rows of zeros stay zero).
void score_l2_normalise(float *x, int64_t n, int64_t d);
