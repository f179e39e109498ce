#include "app/eval/scoring.h"

#include "kernels/base/check.h"
#include "kernels/gemm.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    float s;
    uint8_t t;
} scored_t;

static int cmp_score(const void *a, const void *b) {
    float x = ((const scored_t *)a)->s, y = ((const scored_t *)b)->s;
    return x < y ? -1 : x > y ? 1 : 0;
}

int64_t score_det_curve(const float *scores, const uint8_t *target, int64_t n, double **pm, double **pf) {
    scored_t *v = mallocCheck((size_t)(n ? n : 1) * sizeof *v);
    int64_t nt = 0;
    for (int64_t i = 0; i < n; i++) {
        v[i] = (scored_t){scores[i], target[i] ? 1 : 0};
        nt += v[i].t;
    }
    int64_t nn = n - nt, points = 0, miss = 0, fa_rejected = 0, nan = 0;
    for (int64_t i = 0; i < n; i++) nan += isnan(v[i].s);
    *pm = mallocCheck((size_t)(n + 1) * sizeof(double));
    *pf = mallocCheck((size_t)(n + 1) * sizeof(double));
    if (nt > 0 && nn > 0 && nan == 0) {  // a NaN never equals itself: no threshold steps over it
        qsort(v, (size_t)n, sizeof *v, cmp_score);
        for (int64_t k = 0;;) {
            (*pm)[points] = (double)miss / (double)nt;
            (*pf)[points++] = 1.0 - (double)fa_rejected / (double)nn;
            if (k == n) break;
            float s = v[k].s;
            for (; k < n && v[k].s == s; k++) {
                if (v[k].t)
                    miss++;
                else
                    fa_rejected++;
            }
        }
    }
    free(v);
    return points;
}

// Where Pmiss first reaches Pfa, interpolated linearly from the point before.
double score_eer(const float *scores, const uint8_t *target, int64_t n) {
    double *pm, *pf, eer = NAN;
    int64_t points = score_det_curve(scores, target, n, &pm, &pf);
    for (int64_t k = 1; k < points; k++) {
        if (pm[k] >= pf[k]) {
            double d = (pm[k] - pm[k - 1]) - (pf[k] - pf[k - 1]);
            double a = d != 0.0 ? (pf[k - 1] - pm[k - 1]) / d : 0.0;
            eer = pm[k - 1] + a * (pm[k] - pm[k - 1]);
            break;
        }
    }
    free(pm);
    free(pf);
    return eer;
}

double score_min_dcf(const float *scores, const uint8_t *target, int64_t n, double p) {
    double *pm, *pf, best = INFINITY;
    int64_t points = score_det_curve(scores, target, n, &pm, &pf);
    for (int64_t k = 0; k < points; k++) {
        double c = p * pm[k] + (1.0 - p) * pf[k];
        if (c < best) best = c;
    }
    free(pm);
    free(pf);
    return points ? best / fmin(p, 1.0 - p) : NAN;
}

double score_pmiss_at_pfa(const double *pm, const double *pf, int64_t points, double pfa) {
    double best = NAN;
    for (int64_t k = 0; k < points; k++)
        if (pf[k] <= pfa && !(pm[k] >= best)) best = pm[k];
    return best;
}

float score_cosine(const float *a, const float *b, int64_t d) {
    double ab = 0, aa = 0, bb = 0;
    for (int64_t i = 0; i < d; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    return (float)(ab / fmax(sqrt(aa * bb), 1e-20));
}

void score_l2_normalise(float *x, int64_t n, int64_t d) {
    for (int64_t i = 0; i < n; i++) {
        double s = 0;
        for (int64_t j = 0; j < d; j++) s += (double)x[i * d + j] * x[i * d + j];
        float inv = s > 0 ? (float)(1.0 / sqrt(s)) : 0.0f;
        for (int64_t j = 0; j < d; j++) x[i * d + j] *= inv;
    }
}

static int cmp_desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x > y ? -1 : x < y ? 1 : 0;
}

void score_cohort_stats(const float *emb, int64_t n, const float *cohort, int64_t m, int64_t d, int64_t top_k,
                        float *mean, float *std) {
    if (top_k > m) top_k = m;
    const int64_t rows = 256;  // scores for a block of embeddings at a time
    float *s = mallocCheck((size_t)(rows * m) * sizeof(float));
    for (int64_t i0 = 0; i0 < n; i0 += rows) {
        int64_t r = n - i0 < rows ? n - i0 : rows;
        spk_sgemm('N', 'T', (int)r, (int)m, (int)d, 1.0f, emb + i0 * d, (int)d, cohort, (int)d, 0.0f, s, (int)m);
        for (int64_t i = 0; i < r; i++) {
            float *row = s + i * m;
            qsort(row, (size_t)m, sizeof(float), cmp_desc);
            double mu = 0, var = 0;
            for (int64_t k = 0; k < top_k; k++) mu += row[k];
            mu /= (double)top_k;
            for (int64_t k = 0; k < top_k; k++) var += (row[k] - mu) * (row[k] - mu);
            mean[i0 + i] = (float)mu;
            std[i0 + i] = (float)fmax(sqrt(var / (double)top_k), SCORE_MIN_SPREAD);
        }
    }
    free(s);
}

// ---- trials ----------------------------------------------------------------------------------

void trials_read(const char *path, char *const *utt_ids, int64_t n_utts, const char *ids_from, trials_t *t) {
    utt_index_t ix;
    char err[1024];
    int rc = utt_index_build(&ix, utt_ids, n_utts, "utterance ids", err, sizeof err);
    if (rc) spk_fail_all(rc, "%s", err);
    FILE *f = fopen(path, "r");
    if (!f) spk_fail_all(SPK_EXIT_DATA, "%s: cannot read the trials (%s)", path, strerror(errno));
    rc = trials_parse(f, path, &ix, ids_from, t, err, sizeof err);
    fclose(f);
    utt_index_free(&ix);
    if (rc) spk_fail_all(rc, "%s", err);
}

void trials_score(const trials_t *t, const float *emb, int64_t d, float *scores) {
    for (int64_t i = 0; i < t->n; i++) scores[i] = score_cosine(emb + t->a[i] * d, emb + t->b[i] * d, d);
}
