// `spkddp calibrate`: turns scores into log-likelihood ratios (app/eval/calibration.h).
//   --fit MODEL    fits offset and scale (and, with --utt2dur, weights of the log durations of
//                  the shorter and the longer side) on a labelled development score list and
//                  writes them as YAML;
//   --apply MODEL  applies a fitted model to a score list.
// Either way it reports Cllr and minCllr of the list when it is labelled, and --out writes
// 'utt1 utt2 llr [label]' lines. Score lists are what `spkddp score --out` writes. The work
// is small and runs on rank 0; the other ranks wait for its verdict.
#include "app/cli/commands.h"
#include "app/cli/options.h"
#include "app/eval/calibration.h"
#include "app/eval/scoring.h"
#include "io/audio/kaldi_data.h"
#include "io/common/atomic_file.h"
#include "io/common/config_yaml.h"
#include "io/common/out_paths.h"
#include "io/dataset/utt_ids.h"
#include "io/scores/score_list.h"
#include "kernels/base/check.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define CALIB_MAX_FIELD 16  // the score column's awk field number at most

typedef struct {
    char scores[OPT_STR_MAX], fit[OPT_STR_MAX], apply[OPT_STR_MAX], out[OPT_STR_MAX], utt2dur[OPT_STR_MAX];
    int64_t field;
    double prior;
} calib_opts_t;

static const opt_t rows[] = {
    OPT_TEXT(calib_opts_t, scores, "scores", OPT_REQUIRED,
             "score list: 'utt1 utt2 score [score ...] [target|nontarget]' lines (spkddp score --out)"),
    OPT_INTEGER(calib_opts_t, field, "field", 0, CALIB_MAX_FIELD,
                "the score column, as awk counts fields (0: the last number of each line)"),
    OPT_TEXT(calib_opts_t, fit, "fit", OPT_OPTIONAL, "fit on the (labelled) scores and write the model here (YAML)"),
    OPT_TEXT(calib_opts_t, apply, "apply", OPT_OPTIONAL, "apply this fitted model to the scores"),
    OPT_NUMBER(calib_opts_t, prior, "prior", 1e-6, 1 - 1e-6, "--fit: the effective target prior the fit weighs for"),
    OPT_TEXT(calib_opts_t, utt2dur, "utt2dur", OPT_OPTIONAL,
             "Kaldi utt2dur ('UTTERANCE-ID SECONDS'): log durations of both sides as quality measures"),
    OPT_TEXT(calib_opts_t, out, "out", OPT_OPTIONAL, "write 'utt1 utt2 llr [label]' lines here"),
};
static const opt_table_t table =
    OPT_TABLE("calibrate", "Fit or apply a logistic-regression calibration of scores to log-likelihood ratios.", rows);

typedef struct {
    int code;
    char err[2048];
} verdict_t;

static int fail(verdict_t *v, int code, const char *fmt, ...) SPK_PRINTF(3, 4);
static int fail(verdict_t *v, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->err, sizeof v->err, fmt, ap);
    va_end(ap);
    return v->code = code;
}

// The quality measures of every trial: log of the shorter and of the longer side's duration.
static double *quality_of(const score_list_t *s, const char *utt2dur, verdict_t *v) {
    kaldi_list_t l;
    kaldi_verdict_t kv;
    if (kaldi_list_read(utt2dur, "utt2dur", "UTTERANCE-ID SECONDS", &l, &kv) != 0) {
        fail(v, kv.code, "%s", kv.msg);
        return NULL;
    }
    double *dur = mallocCheck((size_t)l.n * sizeof(double)), *q = NULL;
    char **keys = mallocCheck((size_t)l.n * sizeof(char *));
    utt_index_t ix = {0};
    for (int64_t i = 0; i < l.n && !v->code; i++) {
        char *end = NULL;
        keys[i] = l.e[i].key;
        dur[i] = strtod(l.e[i].value, &end);
        if (*end || !(dur[i] > 0 && isfinite(dur[i])))
            fail(v, SPK_EXIT_DATA, "%s:%lld: duration '%.64s' is not a positive number of seconds", utt2dur,
                 (long long)l.e[i].line, l.e[i].value);
    }
    if (!v->code && utt_index_build(&ix, keys, l.n, utt2dur, v->err, sizeof v->err) != 0) v->code = SPK_EXIT_DATA;
    if (!v->code) {
        q = mallocCheck((size_t)s->n * CALIB_MAX_QUALITY * sizeof(double));
        for (int64_t i = 0; i < s->n && !v->code; i++) {
            const int64_t a = utt_index_find(&ix, s->a[i]), b = utt_index_find(&ix, s->b[i]);
            if (a < 0 || b < 0) {
                fail(v, SPK_EXIT_DATA, "%s: utterance '%.200s' of the scores has no duration", utt2dur,
                     a < 0 ? s->a[i] : s->b[i]);
                break;
            }
            q[2 * i] = log(fmin(dur[a], dur[b]));
            q[2 * i + 1] = log(fmax(dur[a], dur[b]));
        }
        utt_index_free(&ix);
    }
    if (v->code) {
        free(q);
        q = NULL;
    }
    free(keys);
    free(dur);
    kaldi_list_free(&l);
    return q;
}

// ---- the model file ------------------------------------------------------------------------

static const char *QUALITY_KEYS[CALIB_MAX_QUALITY] = {"log-min-duration", "log-max-duration"};

static int save_model(const char *path, const calibration_t *c, int field, verdict_t *v) {
    const char *keys[4 + CALIB_MAX_QUALITY] = {"prior", "offset", "scale", QUALITY_KEYS[0], QUALITY_KEYS[1]};
    const double values[4 + CALIB_MAX_QUALITY] = {c->prior, c->offset, c->scale, c->weight[0], c->weight[1]};
    char kv[1024], num[64];
    int n = snprintf(kv, sizeof kv, "format=spkddp-calibration\nversion=1\nfield=%d\n", field);
    for (int k = 0; k < 3 + c->n_quality; k++) {
        opt_format_real(values[k], num, sizeof num);
        n += snprintf(kv + n, sizeof kv - (size_t)n, "%s=%s\n", keys[k], num);
    }
    atomic_text_t out;
    atomic_text_open(&out);
    config_yaml_write(
        out.f,
        "spkddp calibration: llr = offset + scale * score [+ log-min-duration * log(shorter side's seconds)\n"
        "+ log-max-duration * log(longer side's seconds)], score from awk field `field` of the score list",
        kv);
    return atomic_text_commit(&out, path, v->err, sizeof v->err) ? (v->code = SPK_EXIT_FAILURE) : 0;
}

static int load_model(const char *path, calibration_t *c, int *field, verdict_t *v) {
    char *text = NULL;
    size_t len = 0;
    config_entries_t e = {0};
    int rc = config_yaml_read_file(path, &text, &len, v->err, sizeof v->err);
    if (!rc) rc = config_yaml_parse(text, len, path, &e, v->err, sizeof v->err);
    *c = (calibration_t){0};
    int seen = 0, format = 0;  // bits: offset, scale, prior, field
    for (int i = 0; i < e.n && !rc; i++) {
        const char *k = e.e[i].key, *val = e.e[i].value;
        char *end = NULL;
        const double x = strtod(val, &end);
        const int number = end != val && !*end && isfinite(x);
        if (!strcmp(k, "format"))
            format = !strcmp(val, "spkddp-calibration");
        else if (!strcmp(k, "version") && strcmp(val, "1"))
            rc = fail(v, SPK_EXIT_DATA, "%s:%lld: calibration format version '%s'; this spkddp reads version 1", path,
                      (long long)e.e[i].line, val);
        else if (!strcmp(k, "version"))
            continue;
        else if (!number)
            rc = fail(v, SPK_EXIT_DATA, "%s:%lld: '%s' must be a finite number", path, (long long)e.e[i].line, k);
        else if (!strcmp(k, "offset"))
            c->offset = x, seen |= 1;
        else if (!strcmp(k, "scale"))
            c->scale = x, seen |= 2;
        else if (!strcmp(k, "prior"))
            c->prior = x, seen |= 4;
        else if (!strcmp(k, "field") && !(x >= 0 && x <= CALIB_MAX_FIELD && x == (int)x))
            rc = fail(v, SPK_EXIT_DATA, "%s:%lld: 'field' must be a whole number in [0, %d]", path,
                      (long long)e.e[i].line, CALIB_MAX_FIELD);
        else if (!strcmp(k, "field"))
            *field = (int)x, seen |= 8;
        else if (!strcmp(k, "prior") && !(x > 0 && x < 1))
            rc = fail(v, SPK_EXIT_DATA, "%s:%lld: 'prior' must be in (0, 1)", path, (long long)e.e[i].line);
        else if (!strcmp(k, QUALITY_KEYS[0]))
            c->weight[0] = x, c->n_quality |= 1;
        else if (!strcmp(k, QUALITY_KEYS[1]))
            c->weight[1] = x, c->n_quality |= 2;
        else
            rc = fail(v, SPK_EXIT_DATA, "%s:%lld: unknown key '%s' in a calibration model", path,
                      (long long)e.e[i].line, k);
    }
    if (!rc && (!format || seen != 15 || (c->n_quality != 0 && c->n_quality != 3)))
        rc = fail(v, SPK_EXIT_DATA,
                  "%s: not an spkddp calibration model (format, version, field, prior, offset, scale%s)", path,
                  c->n_quality ? " and both duration weights" : "");
    c->n_quality = c->n_quality ? CALIB_MAX_QUALITY : 0;
    free(text);
    config_entries_free(&e);
    return v->code = rc;
}

// ---- the command -----------------------------------------------------------------------------

static void report(const char *what, const score_list_t *s, const double *values) {
    printf("  %-12s Cllr %.4f   minCllr %.4f\n", what, calib_cllr(values, s->target, s->n),
           calib_min_cllr(values, s->target, s->n));
}

static int write_llrs(const char *path, const score_list_t *s, const double *llr, verdict_t *v) {
    atomic_text_t out;
    atomic_text_open(&out);
    for (int64_t i = 0; i < s->n; i++) {
        fprintf(out.f, "%s %s %.6f", s->a[i], s->b[i], llr[i]);
        if (s->labelled) fprintf(out.f, " %s", s->target[i] ? "target" : "nontarget");
        fputc('\n', out.f);
    }
    return atomic_text_commit(&out, path, v->err, sizeof v->err) ? (v->code = SPK_EXIT_FAILURE) : 0;
}

static int run(const calib_opts_t *o, verdict_t *v) {
    calibration_t c;
    int field = (int)o->field;
    if (o->apply[0] && load_model(o->apply, &c, &field, v)) return v->code;
    if (o->field) field = (int)o->field;  // an explicit --field wins over the model's
    score_list_t s;
    if (score_list_read(o->scores, o->apply[0] ? field : (int)o->field, &s, v->err, sizeof v->err))
        return v->code = SPK_EXIT_DATA;
    int64_t nt = 0;
    for (int64_t i = 0; i < s.n; i++) nt += s.target[i];
    if (o->fit[0] && (!s.labelled || nt == 0 || nt == s.n))
        fail(v, SPK_EXIT_DATA, "%s: fitting needs target and nontarget trials (%lld of %lld are targets%s)", o->scores,
             (long long)nt, (long long)s.n, s.labelled ? "" : "; the lines have no labels");
    double *q = !v->code && o->utt2dur[0] ? quality_of(&s, o->utt2dur, v) : NULL, *llr = NULL;
    if (!v->code && o->apply[0] && (c.n_quality != 0) != (q != NULL))
        fail(v, SPK_EXIT_USAGE, "calibrate: %s was fitted %s durations; %s", o->apply, c.n_quality ? "with" : "without",
             c.n_quality ? "give --utt2dur" : "leave out --utt2dur");
    if (v->code) goto done;
    printf("calibrate: %s: %lld trials", o->scores, (long long)s.n);
    if (s.labelled) printf(" (%lld target, %lld nontarget)", (long long)nt, (long long)(s.n - nt));
    printf(", scores from field %d%s\n", s.field, q ? ", log durations as quality measures" : "");
    if (o->fit[0]) {
        const int it = calib_fit(&c, s.score, q, q ? CALIB_MAX_QUALITY : 0, s.target, s.n, o->prior);
        if (it < 0) spk_warn("calibrate: the fit did not converge in 100 Newton steps; the model is the last iterate");
    }
    llr = mallocCheck((size_t)s.n * sizeof(double));
    for (int64_t i = 0; i < s.n && !v->code; i++) {
        llr[i] = calib_llr(&c, s.score[i], q ? q + CALIB_MAX_QUALITY * i : NULL);
        if (!isfinite(llr[i]))  // (a fit that ran away, or a model's extreme weights)
            fail(v, SPK_EXIT_DATA, "%s: the %s%s gives trial '%s %s' (score %g) no finite log-likelihood ratio",
                 o->scores, o->fit[0] ? "fitted model" : "model ", o->fit[0] ? "" : o->apply, s.a[i], s.b[i],
                 s.score[i]);
    }
    if (v->code) goto done;
    if (s.labelled && nt > 0 && nt < s.n) {
        report("scores", &s, s.score);
        report("calibrated", &s, llr);
    }
    printf("  llr = %.6g %+.6g * score", c.offset, c.scale);
    for (int k = 0; k < c.n_quality; k++) printf(" %+.6g * %s", c.weight[k], QUALITY_KEYS[k]);
    printf("   (prior %g)\n", c.prior);
    if (o->fit[0] && !save_model(o->fit, &c, s.field, v)) printf("wrote %s\n", o->fit);
    if (!v->code && o->out[0] && !write_llrs(o->out, &s, llr, v)) printf("wrote %s\n", o->out);
done:
    free(llr);
    free(q);
    score_list_free(&s);
    return v->code;
}

int cmd_calibrate(const comm_t *comm, int argc, char **argv) {
    calib_opts_t o = {.prior = 0.5};
    opt_parse(&table, &o, argc, argv, NULL, 0);
    if (!o.fit[0] == !o.apply[0])
        spk_fail_all(SPK_EXIT_USAGE, "calibrate: give one of --fit MODEL (fit on labelled scores) and --apply MODEL");
    const path_arg_t outs[] = {{"--fit", o.fit}, {"--out", o.out}};
    const path_arg_t ins[] = {{"--scores", o.scores}, {"--apply", o.apply}, {"--utt2dur", o.utt2dur}};
    out_paths_check("calibrate", outs, 2, ins, 3);
    verdict_t v = {0};
    if (comm->rank == 0) run(&o, &v);
    fflush(stdout);
    comm_bcast(comm, &v, sizeof v, MPI_BYTE, 0);
    if (v.code) spk_fail_all(v.code, "%s", v.err);
    return SPK_EXIT_OK;
}
