// `spkddp score`: cosine scoring of verification trials, EER and minDCF, optional AS-norm
// against a cohort. Every rank reads the (small) embeddings and trials; the cohort
// statistics, the expensive part, are computed in blocks across ranks.
#include "kernels/base/check.h"
#include "app/cli/commands.h"
#include "app/cli/options.h"
#include "app/eval/scoring.h"
#include "io/atomic_file.h"
#include "io/embeddings.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char emb[OPT_STR_MAX], trials[OPT_STR_MAX], cohort[OPT_STR_MAX], out[OPT_STR_MAX];
    int64_t top;
} score_opts_t;

static const opt_t rows[] = {
    OPT_TEXT(score_opts_t, emb, "emb", OPT_REQUIRED, "embeddings (spkddp embed)"),
    OPT_TEXT(score_opts_t, trials, "trials", OPT_REQUIRED, "trials: lines 'utt1 utt2 target|nontarget'"),
    OPT_TEXT(score_opts_t, cohort, "cohort", OPT_OPTIONAL, "cohort embeddings for AS-norm"),
    OPT_INTEGER(score_opts_t, top, "top", 1, 1e7, "AS-norm: top cohort scores per side"),
    OPT_TEXT(score_opts_t, out, "out", OPT_OPTIONAL, "write 'utt1 utt2 score [asnorm_score] label' lines here"),
};
static const opt_table_t table =
    OPT_TABLE("score", "Score verification trials: cosine, EER, minDCF, optional AS-norm.", rows);

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
    mpiCheck(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_FLOAT, mean, counts, displs, MPI_FLOAT, comm->world));
    mpiCheck(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_FLOAT, std, counts, displs, MPI_FLOAT, comm->world));
    free(counts);
    free(displs);
}

static void report(const char *name, const float *s, const uint8_t *t, int64_t n) {
    printf0("  %-8s  EER %6.2f%%   minDCF(0.01) %.4f   minDCF(0.05) %.4f\n", name, 100.0 * score_eer(s, t, n),
            score_min_dcf(s, t, n, 0.01), score_min_dcf(s, t, n, 0.05));
}

int cmd_score(const comm_t *comm, int argc, char **argv) {
    score_opts_t o = {.top = 300};
    opt_parse(&table, &o, argc, argv, NULL, 0);
    embeddings_t e, c = {0};
    load(o.emb, &e);
    trials_t t = {0};
    trials_read(o.trials, e.utt_ids, e.n, &t);
    float *raw = mallocCheck((size_t)t.n * sizeof(float)), *norm = NULL;
    trials_score(&t, e.emb, e.dim, raw);
    if (o.cohort[0]) {
        load(o.cohort, &c);
        if (c.dim != e.dim)
            spk_fail_all(SPK_EXIT_DATA, "%s: cohort embeddings have dimension %lld, %s has %lld", o.cohort, (long long)c.dim,
                         o.emb, (long long)e.dim);
        float *mean = mallocCheck((size_t)e.n * sizeof(float)), *std = mallocCheck((size_t)e.n * sizeof(float));
        cohort_stats(comm, &e, &c, o.top, mean, std);
        norm = mallocCheck((size_t)t.n * sizeof(float));
        for (int64_t i = 0; i < t.n; i++)
            norm[i] = score_asnorm(raw[i], mean[t.a[i]], std[t.a[i]], mean[t.b[i]], std[t.b[i]]);
        free(mean);
        free(std);
    }
    int64_t targets = 0;
    for (int64_t i = 0; i < t.n; i++) targets += t.target[i];
    printf0("%s: %lld trials (%lld target, %lld nontarget), %lld embeddings of dimension %lld\n", o.trials, (long long)t.n,
            (long long)targets, (long long)(t.n - targets), (long long)e.n, (long long)e.dim);
    report("cosine", raw, t.target, t.n);
    if (norm) report("as-norm", norm, t.target, t.n);
    if (o.out[0] && comm->rank == 0) {
        atomic_text_t out;
        atomic_text_open(&out);
        for (int64_t i = 0; i < t.n; i++) {
            fprintf(out.f, "%s %s %.6f", e.utt_ids[t.a[i]], e.utt_ids[t.b[i]], raw[i]);
            if (norm) fprintf(out.f, " %.6f", norm[i]);
            fprintf(out.f, " %s\n", t.target[i] ? "target" : "nontarget");
        }
        char err[1024];
        if (atomic_text_commit(&out, o.out, err, sizeof err) != 0) spk_die(SPK_EXIT_FAILURE, "%s", err);
    }
    free(raw);
    free(norm);
    trials_free(&t);
    embeddings_free(&e);
    if (o.cohort[0]) embeddings_free(&c);
    return SPK_EXIT_OK;
}
