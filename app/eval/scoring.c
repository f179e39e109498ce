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

// The detection error trade-off: thresholds walk from below the lowest score upwards,
// everything below a threshold is rejected, tied scores are stepped over together. Returns
// the number of operating points (Pmiss, Pfa), from (0, 1) to (1, 0); 0 when either class is
// empty. pm and pf are malloc'ed.
static int64_t det_curve(const float *scores, const uint8_t *target, int64_t n, double **pm, double **pf) {
    scored_t *v = mallocCheck((size_t)(n ? n : 1) * sizeof *v);
    int64_t nt = 0;
    for (int64_t i = 0; i < n; i++) {
        v[i] = (scored_t){scores[i], target[i] ? 1 : 0};
        nt += v[i].t;
    }
    int64_t nn = n - nt, points = 0, miss = 0, fa_rejected = 0;
    *pm = mallocCheck((size_t)(n + 1) * sizeof(double));
    *pf = mallocCheck((size_t)(n + 1) * sizeof(double));
    if (nt > 0 && nn > 0) {
        qsort(v, (size_t)n, sizeof *v, cmp_score);
        for (int64_t k = 0;;) {
            (*pm)[points] = (double)miss / (double)nt;
            (*pf)[points++] = 1.0 - (double)fa_rejected / (double)nn;
            if (k == n) break;
            float s = v[k].s;
            for (; k < n && v[k].s == s; k++) {
                if (v[k].t) miss++;
                else fa_rejected++;
            }
        }
    }
    free(v);
    return points;
}

// Where Pmiss first reaches Pfa, interpolated linearly from the point before.
double score_eer(const float *scores, const uint8_t *target, int64_t n) {
    double *pm, *pf, eer = NAN;
    int64_t points = det_curve(scores, target, n, &pm, &pf);
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
    int64_t points = det_curve(scores, target, n, &pm, &pf);
    for (int64_t k = 0; k < points; k++) {
        double c = p * pm[k] + (1.0 - p) * pf[k];
        if (c < best) best = c;
    }
    free(pm);
    free(pf);
    return points ? best / fmin(p, 1.0 - p) : NAN;
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
            std[i0 + i] = (float)fmax(sqrt(var / (double)top_k), 1e-6);
        }
    }
    free(s);
}

// ---- trials ----------------------------------------------------------------------------------

typedef struct {
    const char *id;
    int64_t index;
} utt_ref_t;

static int cmp_ref(const void *a, const void *b) {
    return strcmp(((const utt_ref_t *)a)->id, ((const utt_ref_t *)b)->id);
}

static int64_t find_utt(const utt_ref_t *refs, int64_t n, const char *id) {
    utt_ref_t key = {id, 0};
    const utt_ref_t *hit = bsearch(&key, refs, (size_t)n, sizeof key, cmp_ref);
    return hit ? hit->index : -1;
}

static void trials_push(trials_t *t, int64_t a, int64_t b, uint8_t target) {
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 1024;
        t->a = realloc(t->a, (size_t)t->cap * sizeof(int64_t));
        t->b = realloc(t->b, (size_t)t->cap * sizeof(int64_t));
        t->target = realloc(t->target, (size_t)t->cap);
        if (!t->a || !t->b || !t->target) spk_die(SPK_EXIT_FAILURE, "out of memory reading trials");
    }
    t->a[t->n] = a;
    t->b[t->n] = b;
    t->target[t->n++] = target;
}

void trials_read(const char *path, char *const *utt_ids, int64_t n_utts, trials_t *t) {
    memset(t, 0, sizeof *t);
    utt_ref_t *refs = mallocCheck((size_t)(n_utts ? n_utts : 1) * sizeof *refs);
    for (int64_t i = 0; i < n_utts; i++) refs[i] = (utt_ref_t){utt_ids[i], i};
    qsort(refs, (size_t)n_utts, sizeof *refs, cmp_ref);
    FILE *f = fopen(path, "r");
    if (!f) spk_fail_all(SPK_EXIT_DATA, "%s: cannot read the trials (%s)", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    int64_t lineno = 0;
    while (getline(&line, &cap, f) > 0) {
        lineno++;
        char u1[512], u2[512], lab[64], extra[8];
        int k = sscanf(line, "%511s %511s %63s %7s", u1, u2, lab, extra);
        if (k <= 0) continue;  // blank line
        if (k != 3) spk_fail_all(SPK_EXIT_DATA, "%s:%lld: expected 'utt1 utt2 target|nontarget'", path, (long long)lineno);
        int is_t = strcmp(lab, "target") == 0, is_n = strcmp(lab, "nontarget") == 0;
        if (!is_t && !is_n)
            spk_fail_all(SPK_EXIT_DATA, "%s:%lld: label '%s' must be 'target' or 'nontarget'", path, (long long)lineno, lab);
        int64_t a = find_utt(refs, n_utts, u1), b = find_utt(refs, n_utts, u2);
        if (a < 0 || b < 0)
            spk_fail_all(SPK_EXIT_DATA, "%s:%lld: utterance '%s' is not in the embeddings", path, (long long)lineno,
                         a < 0 ? u1 : u2);
        trials_push(t, a, b, (uint8_t)is_t);
    }
    free(line);
    fclose(f);
    free(refs);
    if (t->n == 0) spk_fail_all(SPK_EXIT_DATA, "%s: no trials", path);
}

void trials_free(trials_t *t) {
    free(t->a);
    free(t->b);
    free(t->target);
    memset(t, 0, sizeof *t);
}

void trials_score(const trials_t *t, const float *emb, int64_t d, float *scores) {
    for (int64_t i = 0; i < t->n; i++) scores[i] = score_cosine(emb + t->a[i] * d, emb + t->b[i] * d, d);
}
