// Every published figure spkddp computes, against an independent NumPy computation
// (tests/eval/make_scoring_reference.py wrote scoring_reference.txt), within 1e-6:
//   scores    cosine, S-norm, AS-norm (top-k) of random embeddings against a cohort;
//   metrics   from the reference's float32 scores: EER, minDCF at several priors, the miss rate
//             at fixed false-alarm rates (the DET table), Cllr and minCllr, the calibration's
//             offset and scale at two priors, with log durations as quality measures, and the
//             calibrated log-likelihood ratios.
// Usage: test_scoring_reference tests/eval/scoring_reference.txt
#include "app/eval/calibration.h"
#include "app/eval/scoring.h"
#include "tests/test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TOL 1e-6

typedef struct {
    char name[64];
    int n;
    double *v;
} block_t;

static block_t blocks[64];
static int nblocks;

static void read_reference(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(2);
    }
    char line[256];
    while (nblocks < 64) {
        long pos = ftell(f);
        if (!fgets(line, sizeof line, f)) break;
        if (line[0] == '#') continue;
        fseek(f, pos, SEEK_SET);
        block_t *b = &blocks[nblocks++];
        if (fscanf(f, "%63s %d", b->name, &b->n) != 2) break;
        b->v = malloc((size_t)b->n * sizeof(double));
        for (int i = 0; i < b->n; i++)
            if (fscanf(f, "%lf", &b->v[i]) != 1) {
                fprintf(stderr, "%s: block %s is short\n", path, b->name);
                exit(2);
            }
        if (!fgets(line, sizeof line, f)) break;  // the end of the values' line
    }
    fclose(f);
}

static const block_t *get(const char *name) {
    for (int i = 0; i < nblocks; i++)
        if (strcmp(blocks[i].name, name) == 0) return &blocks[i];
    fprintf(stderr, "the reference has no block '%s'\n", name);
    exit(2);
}

static double worst;  // largest difference seen, for the report

// got against want: |got - want| <= TOL * max(1, |want|).
static void near(const char *what, int i, double got, double want) {
    const double d = fabs(got - want), bound = TOL * fmax(1.0, fabs(want));
    if (d / fmax(1.0, fabs(want)) > worst) worst = d / fmax(1.0, fabs(want));
    EXPECT(d <= bound, "%s[%d]: %.12g, NumPy %.12g (difference %.3g)", what, i, got, want, d);
}

static float *floats(const block_t *b) {
    float *f = malloc((size_t)b->n * sizeof(float));
    for (int i = 0; i < b->n; i++) f[i] = (float)b->v[i];
    return f;
}

// Scores of the embeddings: cosine, then S-norm (whole cohort) and AS-norm (top k).
static void check_scores(const trials_t *t) {
    const double *sz = get("sizes")->v;
    const int64_t n = (int64_t)sz[0], d = (int64_t)sz[1], m = (int64_t)sz[2], top = (int64_t)sz[4];
    float *emb = floats(get("emb")), *cohort = floats(get("cohort"));
    score_l2_normalise(emb, n, d);
    score_l2_normalise(cohort, m, d);
    float *raw = malloc((size_t)t->n * sizeof(float)), *mean = malloc((size_t)n * sizeof(float)),
          *std = malloc((size_t)n * sizeof(float));
    trials_score(t, emb, d, raw);
    const double *want = get("cosine")->v;
    for (int64_t i = 0; i < t->n; i++) near("cosine", (int)i, raw[i], want[i]);
    const struct {
        const char *name;
        int64_t top;
    } norms[] = {{"snorm", m}, {"asnorm", top}};
    for (int k = 0; k < 2; k++) {
        score_cohort_stats(emb, n, cohort, m, d, norms[k].top, mean, std);
        want = get(norms[k].name)->v;
        for (int64_t i = 0; i < t->n; i++)
            near(norms[k].name, (int)i, score_asnorm(raw[i], mean[t->a[i]], std[t->a[i]], mean[t->b[i]], std[t->b[i]]),
                 want[i]);
    }
    free(emb);
    free(cohort);
    free(raw);
    free(mean);
    free(std);
}

static const double *block_of(const char *system, const char *what) {
    char name[64];
    snprintf(name, sizeof name, "%s.%s", system, what);
    return get(name)->v;
}

// The figures of one system's float32 scores.
static void check_metrics(const char *system, const trials_t *t, const double *quality) {
    const block_t *pri = get("priors"), *pfa = get("pfa");
    float *s = floats(get(system));
    double *sd = malloc((size_t)t->n * sizeof(double)), *llr = malloc((size_t)t->n * sizeof(double));
    for (int64_t i = 0; i < t->n; i++) sd[i] = s[i];
    char what[96];
    snprintf(what, sizeof what, "%s EER", system);
    near(what, 0, score_eer(s, t->target, t->n), block_of(system, "eer")[0]);
    for (int k = 0; k < pri->n; k++) {
        snprintf(what, sizeof what, "%s minDCF(%g)", system, pri->v[k]);
        near(what, k, score_min_dcf(s, t->target, t->n, pri->v[k]), block_of(system, "mindcf")[k]);
    }
    double *pm, *pf;
    const int64_t points = score_det_curve(s, t->target, t->n, &pm, &pf);
    for (int k = 0; k < pfa->n; k++) {
        snprintf(what, sizeof what, "%s Pmiss at Pfa %g", system, pfa->v[k]);
        near(what, k, score_pmiss_at_pfa(pm, pf, points, pfa->v[k]), block_of(system, "pmiss")[k]);
    }
    free(pm);
    free(pf);
    snprintf(what, sizeof what, "%s Cllr, minCllr", system);
    near(what, 0, calib_cllr(sd, t->target, t->n), block_of(system, "cllr")[0]);
    near(what, 1, calib_min_cllr(sd, t->target, t->n), block_of(system, "cllr")[1]);

    // Calibration: offset and scale at priors 0.5 and 0.05, the calibrated Cllr.
    const double *cal = block_of(system, "cal");
    calibration_t c;
    EXPECT(calib_fit(&c, sd, NULL, 0, t->target, t->n, 0.5) > 0, "%s: the fit did not converge", system);
    snprintf(what, sizeof what, "%s calibration (offset, scale) at 0.5", system);
    near(what, 0, c.offset, cal[0]);
    near(what, 1, c.scale, cal[1]);
    for (int64_t i = 0; i < t->n; i++) llr[i] = calib_llr(&c, sd[i], NULL);
    snprintf(what, sizeof what, "%s calibrated Cllr", system);
    near(what, 0, calib_cllr(llr, t->target, t->n), cal[4]);
    EXPECT(calib_fit(&c, sd, NULL, 0, t->target, t->n, 0.05) > 0, "%s: the fit did not converge", system);
    snprintf(what, sizeof what, "%s calibration (offset, scale) at 0.05", system);
    near(what, 0, c.offset, cal[2]);
    near(what, 1, c.scale, cal[3]);

    // With the log durations of both sides.
    const double *calq = block_of(system, "calq"), *llrq = block_of(system, "llrq");
    EXPECT(calib_fit(&c, sd, quality, 2, t->target, t->n, 0.5) > 0, "%s: the fit with durations did not converge",
           system);
    const double w[4] = {c.offset, c.scale, c.weight[0], c.weight[1]};
    snprintf(what, sizeof what, "%s calibration with durations", system);
    for (int k = 0; k < 4; k++) near(what, k, w[k], calq[k]);
    for (int64_t i = 0; i < t->n; i++) llr[i] = calib_llr(&c, sd[i], quality + 2 * i);
    snprintf(what, sizeof what, "%s calibrated llr with durations", system);
    for (int64_t i = 0; i < t->n; i++) near(what, (int)i, llr[i], llrq[i]);
    snprintf(what, sizeof what, "%s calibrated Cllr with durations", system);
    near(what, 0, calib_cllr(llr, t->target, t->n), calq[4]);
    free(s);
    free(sd);
    free(llr);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_scoring_reference scoring_reference.txt\n");
        return 2;
    }
    read_reference(argv[1]);
    const block_t *a = get("trial_a"), *b = get("trial_b"), *tg = get("target"), *dur = get("dur");
    trials_t t = {.n = a->n};
    t.a = malloc((size_t)t.n * sizeof(int64_t));
    t.b = malloc((size_t)t.n * sizeof(int64_t));
    t.target = malloc((size_t)t.n);
    double *quality = malloc((size_t)t.n * 2 * sizeof(double));
    for (int64_t i = 0; i < t.n; i++) {
        t.a[i] = (int64_t)a->v[i];
        t.b[i] = (int64_t)b->v[i];
        t.target[i] = (uint8_t)tg->v[i];
        const double da = dur->v[t.a[i]], db = dur->v[t.b[i]];
        quality[2 * i] = log(fmin(da, db));
        quality[2 * i + 1] = log(fmax(da, db));
    }
    check_scores(&t);
    const char *systems[] = {"cosine", "snorm", "asnorm"};
    for (int k = 0; k < 3; k++) check_metrics(systems[k], &t, quality);
    printf("test_scoring_reference: %lld trials, largest relative difference from NumPy %.2e (bound %.0e)\n",
           (long long)t.n, worst, TOL);
    trials_free(&t);
    free(quality);
    return test_report("test_scoring_reference");
}
