// Score calibration: scores -> log-likelihood ratios, llr = offset + scale * s + sum_k w_k q_k,
// with optional quality measures q (per trial; spkddp calibrate derives them from durations).
// Fitted by logistic regression on a development trial list, weighted so that targets and
// nontargets count with the effective prior (BOSARIS's linear calibration):
//   minimise  prior/Nt sum_targets softplus(-(llr + logit prior))
//           + (1-prior)/Nn sum_nontargets softplus(llr + logit prior)
//           + CALIB_L2 / 2 * (scale^2 + sum_k w_k^2)
// by Newton's method (the problem is convex and has 2 to 4 unknowns). The small L2 term only
// keeps the optimum finite on perfectly separable scores.
#pragma once
#include <stdint.h>

#define CALIB_MAX_QUALITY 2  // log of the shorter and of the longer side's duration
#define CALIB_L2          1e-6

typedef struct {
    double prior;  // the effective target prior the fit weighted for
    double offset, scale;
    int n_quality;  // 0 or CALIB_MAX_QUALITY
    double weight[CALIB_MAX_QUALITY];
} calibration_t;

// The llr of one trial: q holds its n_quality measures (NULL when there are none).
double calib_llr(const calibration_t *c, double score, const double *q);
// The log-likelihood-ratio cost in bits, Cllr = (mean over targets of log2(1 + e^-llr) +
// mean over nontargets of log2(1 + e^llr)) / 2: 0 is perfect, 1 what llr = 0 scores.
double calib_cllr(const double *llr, const uint8_t *target, int64_t n);
// Cllr after the best monotone map of the scores to llrs (pool-adjacent-violators on the
// sorted scores, tied scores pooled): the part of Cllr no calibration can remove.
double calib_min_cllr(const double *scores, const uint8_t *target, int64_t n);
// Fits c to n trials: scores (n,), quality (n, n_quality) row-major or NULL, target flags.
// Needs both kinds of trial. Returns the Newton iterations taken, or -1 when they do not
// converge (c then holds the last iterate).
int calib_fit(calibration_t *c, const double *scores, const double *quality, int n_quality, const uint8_t *target,
              int64_t n, double prior);
