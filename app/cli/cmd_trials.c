// `spkddp trials`: makes a verification trial list from the speaker labels of an embeddings
// file: for every utterance, some same-speaker and some other-speaker partners, drawn from
// the seed. Rank 0 writes it.
#include "app/cli/commands.h"
#include "app/cli/common_options.h"
#include "io/common/atomic_file.h"
#include "io/common/out_paths.h"
#include "io/scores/embeddings.h"
#include "kernels/base/check.h"
#include "kernels/base/rng.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char emb[OPT_STR_MAX], out[OPT_STR_MAX];
    int64_t targets, nontargets, seed;
} trials_opts_t;

static const opt_t rows[] = {
    OPT_TEXT(trials_opts_t, emb, "emb", OPT_REQUIRED, "embeddings file (its /labels give the speakers)"),
    OPT_TEXT(trials_opts_t, out, "out", OPT_REQUIRED, "trial list to write"),
    OPT_INTEGER(trials_opts_t, targets, "targets", 0, 1e6, "same-speaker trials per utterance"),
    OPT_INTEGER(trials_opts_t, nontargets, "nontargets", 0, 1e6, "other-speaker trials per utterance"),
    OPT_SEED(trials_opts_t, seed, "random seed"),
};
static const opt_table_t table =
    OPT_TABLE("trials", "Make a trial list from the speaker labels of an embeddings file.", rows);

static const int32_t *g_labels;  // (the comparison's)
static int by_speaker(const void *a, const void *b) {
    const int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;
    return g_labels[i] != g_labels[j] ? (g_labels[i] > g_labels[j]) - (g_labels[i] < g_labels[j]) : (i > j) - (i < j);
}

// For each utterance, how many of its speaker's utterances come after it. Sorted by speaker, not
// counted in an array by label: labels go up to 2^31, and need not be dense.
static int64_t *same_speaker_after(const embeddings_t *e) {
    int64_t *order = mallocCheck((size_t)(e->n ? e->n : 1) * sizeof(int64_t));
    int64_t *after = mallocCheck((size_t)(e->n ? e->n : 1) * sizeof(int64_t));
    for (int64_t i = 0; i < e->n; i++) order[i] = i;
    g_labels = e->labels;
    qsort(order, (size_t)e->n, sizeof *order, by_speaker);
    for (int64_t k = e->n - 1, run = 0; k >= 0; k--) {
        run = k + 1 < e->n && e->labels[order[k + 1]] == e->labels[order[k]] ? run + 1 : 0;
        after[order[k]] = run;
    }
    free(order);
    return after;
}

int cmd_trials(const comm_t *comm, int argc, char **argv) {
    trials_opts_t o = {.targets = 3, .nontargets = 10, .seed = 1};
    opt_parse(&table, &o, argc, argv, NULL, 0);
    out_paths_check("trials", (const path_arg_t[]){{"--out", o.out}}, 1, (const path_arg_t[]){{"--emb", o.emb}}, 1);
    if (o.targets == 0 || o.nontargets == 0)  // (score needs both kinds: EER and minDCF weigh one against the other)
        spk_fail_all(SPK_EXIT_USAGE, "trials: --%s 0 makes a list without %s trials, which score cannot use",
                     o.targets == 0 ? "targets" : "nontargets", o.targets == 0 ? "target" : "nontarget");
    embeddings_t e;
    char err[1024];
    int rc = embeddings_read(o.emb, &e, err, sizeof err);
    if (rc) spk_fail_all(rc, "%s", err);
    if (!e.has_labels)
        spk_fail_all(SPK_EXIT_DATA, "%s: dataset '/labels' is missing: trials are made from speaker labels", o.emb);
    if (comm->rank == 0) {
        atomic_text_t out;
        atomic_text_open(&out);
        FILE *f = out.f;
        // A request for more partners of a kind than come after i is cut to what there is, and the
        // tries to what the list can hold: counts past it (--targets 1000000) drew until the tries
        // ran out, for hours. Requests the list can meet draw as before.
        int64_t *later = same_speaker_after(&e);
        const int64_t cap_t = o.targets < e.n ? o.targets : e.n, cap_n = o.nontargets < e.n ? o.nontargets : e.n;
        const int64_t tries_max = 64 * (cap_t + cap_n + 1);
        int64_t nt = 0, nn = 0, *taken = mallocCheck((size_t)(cap_t + cap_n + 1) * sizeof(int64_t));
        for (int64_t i = 0; i < e.n; i++) {
            rng_t r = rng_init((uint64_t)o.seed, RNG_PURPOSE_SYNTH, 9, (uint64_t)i);
            const int64_t same_after = later[i], other_after = e.n - i - 1 - same_after;
            // Partners after i only, each once, so no pair appears twice; bounded tries keep
            // it finite.
            int64_t want_t = o.targets < same_after ? o.targets : same_after;
            int64_t want_n = o.nontargets < other_after ? o.nontargets : other_after, ntaken = 0;
            for (int64_t tries = 0; (want_t > 0 || want_n > 0) && tries < tries_max; tries++) {
                if (i + 1 >= e.n) break;
                int64_t j = i + 1 + (int64_t)rng_below(&r, (uint64_t)(e.n - i - 1)), k = 0;
                while (k < ntaken && taken[k] != j) k++;
                if (k < ntaken) continue;
                int same = e.labels[i] == e.labels[j];
                if ((same && want_t > 0) || (!same && want_n > 0)) taken[ntaken++] = j;
                if (same && want_t > 0) {
                    fprintf(f, "%s %s target\n", e.utt_ids[i], e.utt_ids[j]);
                    want_t--;
                    nt++;
                } else if (!same && want_n > 0) {
                    fprintf(f, "%s %s nontarget\n", e.utt_ids[i], e.utt_ids[j]);
                    want_n--;
                    nn++;
                }
            }
        }
        free(taken);
        free(later);
        // A list without both kinds cannot be scored (and is not written).
        if ((nt == 0 && o.targets > 0) || (nn == 0 && o.nontargets > 0))
            spk_die(SPK_EXIT_DATA, "%s: no %s trials could be made from its '/labels' (%s)", o.emb,
                    nt == 0 ? "target" : "nontarget", nt == 0 ? "too few utterances per speaker" : "too few speakers");
        if (atomic_text_commit(&out, o.out, err, sizeof err) != 0) spk_die(SPK_EXIT_FAILURE, "%s", err);
        printf("wrote %s: %lld target and %lld nontarget trials\n", o.out, (long long)nt, (long long)nn);
    }
    embeddings_free(&e);
    return SPK_EXIT_OK;
}
