// `spkddp score`: cosine scoring of verification trials as published results are computed:
// EER, minDCF at each --p-target, the miss rate at fixed false-alarm rates (the DET table),
// optional S-norm or AS-norm against a cohort, optional DET plot. Every rank reads the (small)
// embeddings and trials; the cohort statistics, the expensive part, are computed in blocks
// across ranks.
#include "app/cli/commands.h"
#include "app/cli/options.h"
#include "app/eval/det_plot.h"
#include "app/eval/scoring.h"
#include "io/common/atomic_file.h"
#include "io/common/out_paths.h"
#include "io/scores/embeddings.h"
#include "kernels/base/check.h"
#include "kernels/base/mpi_wait.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char emb[OPT_STR_MAX], trials[OPT_STR_MAX], cohort[OPT_STR_MAX], out[OPT_STR_MAX], det[OPT_STR_MAX];
    char fuse[OPT_STR_MAX];
    char norm[16], p_target[OPT_STR_MAX];
    int64_t top;
} score_opts_t;

static const opt_t rows[] = {
    OPT_TEXT(score_opts_t, emb, "emb", OPT_REQUIRED, "embeddings (spkddp embed)"),
    OPT_TEXT(score_opts_t, trials, "trials", OPT_REQUIRED,
             "trials: lines 'utt1 utt2 target|nontarget', or VoxCeleb's official '1|0 utt1 utt2'"),
    OPT_TEXT(score_opts_t, cohort, "cohort", OPT_OPTIONAL, "cohort embeddings for score normalisation"),
    OPT_CHOICE(score_opts_t, norm, "norm", "as-norm|s-norm",
               "with --cohort: as-norm (each side's --top best cohort scores) or s-norm (the whole cohort)"),
    OPT_INTEGER(score_opts_t, top, "top", 2, 1e7, "AS-norm: top cohort scores per side (2 at least: a spread)"),
    OPT_TEXT(score_opts_t, p_target, "p-target", OPT_OPTIONAL,
             "target priors of the minDCFs, comma-separated (C_miss = C_fa = 1; VoxSRC: 0.05, NIST SRE: 0.01)"),
    OPT_TEXT(score_opts_t, det, "det", OPT_OPTIONAL,
             "draw the DET curves into this PNG (gnuplot) and write their points beside it (.txt)"),
    OPT_TEXT(
        score_opts_t, out, "out", OPT_OPTIONAL,
        "write 'utt1 utt2 score [normalised_score] label' lines here ('utt1 utt2 score fuse_score fused label' with "
        "--fuse)"),
    OPT_TEXT(score_opts_t, fuse, "fuse", OPT_OPTIONAL,
             "score-level fusion: a second system's embeddings of the same utterances (e.g. embed --modality visual "
             "beside --modality audio); each trial's fused score is the mean of the two cosines"),
};
static const opt_table_t table =
    OPT_TABLE("score", "Score verification trials: cosine, EER, minDCF, DET, optional S-norm/AS-norm.", rows);

#define MAX_PRIORS 8
// The miss rates of the DET table are read at these false-alarm rates.
static const double DET_PFA[] = {0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2};
#define DET_ROWS (int)(sizeof DET_PFA / sizeof DET_PFA[0])

// --p-target "0.01,0.05" -> priors; the count.
static int parse_priors(const char *text, double *p) {
    int n = 0;
    char buf[OPT_STR_MAX];
    snprintf(buf, sizeof buf, "%s", text);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *end = NULL;
        const double x = strtod(tok, &end);
        if (end == tok || *end || !(x > 0 && x < 1) || n == MAX_PRIORS)
            spk_fail_all(SPK_EXIT_USAGE,
                         "score: --p-target expects up to %d priors in (0, 1) separated by commas, got '%s'",
                         MAX_PRIORS, text);
        p[n++] = x;
    }
    if (n == 0) spk_fail_all(SPK_EXIT_USAGE, "score: --p-target expects at least one prior in (0, 1)");
    return n;
}

static void load(const char *path, embeddings_t *e) {
    char err[1024];
    int rc = embeddings_read(path, e, err, sizeof err);
    if (rc) spk_fail_all(rc, "%s", err);
    score_l2_normalise(e->emb, e->n, e->dim);
}

// AS-norm statistics of every embedding, rows split across ranks and gathered.
static void cohort_stats(const comm_t *comm, const embeddings_t *e, const embeddings_t *c, int64_t top, float *mean,
                         float *std) {
    int K = comm->size;
    int *counts = mallocCheck((size_t)K * sizeof(int)), *displs = mallocCheck((size_t)K * sizeof(int));
    for (int r = 0; r < K; r++) {
        displs[r] = (int)(e->n * r / K);
        counts[r] = (int)(e->n * (r + 1) / K) - displs[r];
    }
    int lo = displs[comm->rank], n = counts[comm->rank];
    score_cohort_stats(e->emb + (int64_t)lo * e->dim, n, c->emb, c->n, e->dim, top, mean + lo, std + lo);
    SPK_COLLECTIVE("the gather of the AS-norm statistics", MPI_Iallgatherv, MPI_IN_PLACE, 0, MPI_FLOAT, mean, counts,
                   displs, MPI_FLOAT, comm->world);
    SPK_COLLECTIVE("the gather of the AS-norm statistics", MPI_Iallgatherv, MPI_IN_PLACE, 0, MPI_FLOAT, std, counts,
                   displs, MPI_FLOAT, comm->world);
    free(counts);
    free(displs);
}

// One system's figures: EER and a minDCF per prior; its DET curve for the table and plot.
typedef struct {
    const char *name;
    const float *s;
    double *pm, *pf;
    int64_t points;
} system_t;

static void report(const system_t *sys, const trials_t *t, const double *priors, int np) {
    printf0("  %-8s  EER %6.2f%%", sys->name, 100.0 * score_eer(sys->s, t->target, t->n));
    for (int i = 0; i < np; i++)
        printf0("   minDCF(%g) %.4f", priors[i], score_min_dcf(sys->s, t->target, t->n, priors[i]));
    printf0("\n");
}

// The DET table: miss rates at fixed false-alarm rates, one column per system.
static void report_det(const system_t *sys, int n) {
    printf0("  %-8s ", "Pfa");
    for (int k = 0; k < n; k++) printf0("  %8s", sys[k].name);
    printf0("   (miss rate at each false-alarm rate)\n");
    for (int r = 0; r < DET_ROWS; r++) {
        printf0("  %7.1f%% ", 100.0 * DET_PFA[r]);
        for (int k = 0; k < n; k++)
            printf0("  %7.2f%%", 100.0 * score_pmiss_at_pfa(sys[k].pm, sys[k].pf, sys[k].points, DET_PFA[r]));
        printf0("\n");
    }
}

// The second system of --fuse: the same utterances in the same order as e's; its cosine scores
// into second, and the mean of both into fused.
static void fuse_scores(const char *path, const embeddings_t *e, const trials_t *t, const float *raw, float *second,
                        float *fused) {
    embeddings_t f;
    load(path, &f);
    if (f.n != e->n)
        spk_fail_all(SPK_EXIT_DATA,
                     "%s: %lld embeddings where the first system has %lld (the same utterances are "
                     "needed)",
                     path, (long long)f.n, (long long)e->n);
    for (int64_t i = 0; i < f.n; i++)
        if (strcmp(f.utt_ids[i], e->utt_ids[i]) != 0)
            spk_fail_all(SPK_EXIT_DATA,
                         "%s: utterance %lld is '%s' where the first system has '%s' (the same "
                         "utterances, in the same order, are needed)",
                         path, (long long)i, f.utt_ids[i], e->utt_ids[i]);
    trials_score(t, f.emb, f.dim, second);
    for (int64_t i = 0; i < t->n; i++) fused[i] = 0.5f * (raw[i] + second[i]);
    embeddings_free(&f);
}

static void write_scores(const score_opts_t *o, const embeddings_t *e, const trials_t *t, const float *raw,
                         const float *norm) {
    atomic_text_t out;
    atomic_text_open(&out);
    for (int64_t i = 0; i < t->n; i++) {
        fprintf(out.f, "%s %s %.6f", e->utt_ids[t->a[i]], e->utt_ids[t->b[i]], raw[i]);
        if (norm) fprintf(out.f, " %.6f", norm[i]);
        if (o->fuse[0]) fprintf(out.f, " %.6f", norm[t->n + i]);  // (the fused score follows the second's)
        fprintf(out.f, " %s\n", t->target[i] ? "target" : "nontarget");
    }
    char err[1024];
    if (atomic_text_commit(&out, o->out, err, sizeof err) != 0) spk_die(SPK_EXIT_FAILURE, "%s", err);
}

int cmd_score(const comm_t *comm, int argc, char **argv) {
    score_opts_t o = {.top = 300, .norm = "as-norm", .p_target = "0.01,0.05"};
    opt_parse(&table, &o, argc, argv, NULL, 0);
    char tab[4200] = "";
    if (o.det[0]) det_table_path(o.det, tab, sizeof tab);
    const path_arg_t outs[] = {{"--out", o.out}, {"--det", o.det}, {"--det's table", tab}};
    const path_arg_t ins[] = {{"--emb", o.emb}, {"--trials", o.trials}, {"--cohort", o.cohort}, {"--fuse", o.fuse}};
    out_paths_check("score", outs, 3, ins, 4);
    double priors[MAX_PRIORS];
    const int np = parse_priors(o.p_target, priors);
    embeddings_t e, c = {0};
    load(o.emb, &e);
    trials_t t = {0};
    trials_read(o.trials, e.utt_ids, e.n, "the embeddings", &t);
    float *raw = mallocCheck((size_t)t.n * sizeof(float)), *norm = NULL;
    trials_score(&t, e.emb, e.dim, raw);
    const int snorm = strcmp(o.norm, "s-norm") == 0;
    if (o.fuse[0] && o.cohort[0])
        spk_fail_all(SPK_EXIT_USAGE, "score: --fuse with --cohort is not supported (normalise each system first)");
    if (o.fuse[0]) {  // norm holds the second system's scores, then the fused ones
        norm = mallocCheck(2 * (size_t)t.n * sizeof(float));
        fuse_scores(o.fuse, &e, &t, raw, norm, norm + t.n);
    }
    if (o.cohort[0]) {
        load(o.cohort, &c);
        if (c.n < 2)
            spk_fail_all(SPK_EXIT_DATA, "%s: a cohort of one embedding has no spread to normalise by; give at least 2",
                         o.cohort);
        if (c.dim != e.dim)
            spk_fail_all(SPK_EXIT_DATA, "%s: cohort embeddings have dimension %lld, %s has %lld", o.cohort,
                         (long long)c.dim, o.emb, (long long)e.dim);
        if (!snorm && o.top >= c.n)
            printf0("warning: --top %lld takes the whole cohort of %lld (%s): AS-norm is S-norm here\n",
                    (long long)o.top, (long long)c.n, o.cohort);
        float *mean = mallocCheck((size_t)e.n * sizeof(float)), *std = mallocCheck((size_t)e.n * sizeof(float));
        cohort_stats(comm, &e, &c, snorm ? c.n : o.top, mean, std);  // S-norm: the whole cohort
        int64_t flat = 0;
        for (int64_t i = 0; i < e.n; i++) flat += std[i] <= (float)SCORE_MIN_SPREAD;
        if (flat)
            printf0(
                "warning: %lld of %lld embeddings score the same against all their %s (%s): their spread is "
                "taken as %g, which scales their normalised scores by up to %g\n",
                (long long)flat, (long long)e.n, snorm ? "cohort" : "top cohort", o.cohort, SCORE_MIN_SPREAD,
                1.0 / SCORE_MIN_SPREAD);
        norm = mallocCheck((size_t)t.n * sizeof(float));
        for (int64_t i = 0; i < t.n; i++)
            norm[i] = score_asnorm(raw[i], mean[t.a[i]], std[t.a[i]], mean[t.b[i]], std[t.b[i]]);
        free(mean);
        free(std);
    }
    int64_t targets = 0;
    for (int64_t i = 0; i < t.n; i++) targets += t.target[i];
    printf0("%s: %lld trials (%lld target, %lld nontarget), %lld embeddings of dimension %lld\n", o.trials,
            (long long)t.n, (long long)targets, (long long)(t.n - targets), (long long)e.n, (long long)e.dim);
    system_t sys[3] = {{"cosine", raw, NULL, NULL, 0}, {o.norm, norm, NULL, NULL, 0}, {"fused", NULL, NULL, NULL, 0}};
    if (o.fuse[0]) sys[1].name = "fuse", sys[2].s = norm + t.n;
    const int ns = o.fuse[0] ? 3 : norm ? 2 : 1;
    for (int k = 0; k < ns; k++) {
        sys[k].points = score_det_curve(sys[k].s, t.target, t.n, &sys[k].pm, &sys[k].pf);
        report(&sys[k], &t, priors, np);
    }
    report_det(sys, ns);
    // The plot first: it runs gnuplot, the scores are one atomic write, so a stop or a failure in
    // the plot leaves neither output rather than the scores alone.
    if (o.det[0] && comm->rank == 0) {
        det_series_t series[3];
        for (int k = 0; k < ns; k++) series[k] = (det_series_t){sys[k].name, sys[k].pm, sys[k].pf, sys[k].points};
        char err[8600];
        if (det_plot(o.det, o.trials, series, ns, err, sizeof err) != 0) spk_die(SPK_EXIT_FAILURE, "%s", err);
        printf("DET curves in %s, their points in %s\n", o.det, tab);
    }
    if (o.out[0] && comm->rank == 0) write_scores(&o, &e, &t, raw, norm);
    comm_barrier(comm);
    for (int k = 0; k < ns; k++) {
        free(sys[k].pm);
        free(sys[k].pf);
    }
    free(raw);
    free(norm);
    trials_free(&t);
    embeddings_free(&e);
    if (o.cohort[0]) embeddings_free(&c);
    return SPK_EXIT_OK;
}
