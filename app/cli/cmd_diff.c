// `spkddp diff A B`: compares two checkpoints' parameters, state and optimizer slots.
// Exit 0 when every value is within the tolerance (default: bitwise equal), 1 otherwise.
#include "app/cli/commands.h"
#include "app/cli/options.h"
#include "io/ckpt/checkpoint.h"
#include "kernels/base/check.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>

typedef struct {
    double rtol;
    int64_t worst;
} diff_opts_t;

static const opt_t rows[] = {
    OPT_NUMBER(diff_opts_t, rtol, "rtol", 0, 1,
               "largest accepted ||a-b|| / ||a|| per buffer (default 0: bitwise equal)"),
    OPT_INTEGER(diff_opts_t, worst, "worst", 0, 100000,
                "also list the N tensors (parameters, state, optimizer slots) that differ most, by ||a-b|| / ||a||"),
};
static const opt_table_t table =
    OPT_TABLE("diff", "usage: spkddp diff A.h5 B.h5 [--rtol X] [--worst N] -- compare two checkpoints.", rows);

static void load(const char *path, ckpt_image_t *img) {
    char err[1024];
    int rc = ckpt_image_load(path, img, err, sizeof err);
    if (rc) spk_die(rc, "%s", err);
}

// Normwise relative difference ||a - b||_2 / ||a||_2 (elementwise ratios are meaningless for
// values near zero), and the largest absolute difference.
static double rel_diff(const float *a, const float *b, int64_t n, double *max_abs) {
    double dd = 0.0, aa = 0.0;
    *max_abs = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        if (isnan(d)) d = INFINITY;
        if (fabs(d) > *max_abs) *max_abs = fabs(d);
        dd += d * d;
        aa += (double)a[i] * (double)a[i];
    }
    if (dd == 0.0) return 0.0;
    return sqrt(dd) / fmax(sqrt(aa), 1e-30);
}

typedef struct {
    double rel, max_abs;
    const char *kind, *name;
} tensor_diff_t;

static int by_rel_desc(const void *x, const void *y) {
    const double a = ((const tensor_diff_t *)x)->rel, b = ((const tensor_diff_t *)y)->rel;
    return (a < b) - (a > b);
}

// Appends each tensor of `t` (in every one of `slots` copies of the buffer) to `out`.
static int tensor_diffs(tensor_diff_t *out, const param_table_t *t, const float *a, const float *b, int slots,
                        const char *kind) {
    int n = 0;
    for (int k = 0; k < slots; k++)
        for (int i = 0; i < t->count; i++, n++) {
            const int64_t at = (int64_t)k * t->total + t->t[i].offset;
            out[n].rel = rel_diff(a + at, b + at, t->t[i].numel, &out[n].max_abs);
            out[n].kind = kind, out[n].name = t->t[i].name;
        }
    return n;
}

// The `worst` tensors by relative difference, largest first (where a run diverges first).
static void print_worst(const ckpt_image_t *a, const ckpt_image_t *b, int64_t worst) {
    const int slots = a->slots == b->slots ? a->slots : 0;
    tensor_diff_t *d = mallocCheck(sizeof *d * (size_t)(a->params.count * (1 + slots) + a->state.count));
    int n = tensor_diffs(d, &a->params, a->param_data, b->param_data, 1, "param");
    n += tensor_diffs(d + n, &a->state, a->state_data, b->state_data, 1, "state");
    n += tensor_diffs(d + n, &a->params, a->opt_data, b->opt_data, slots, "optimizer");
    qsort(d, (size_t)n, sizeof *d, by_rel_desc);
    printf("%-10s %-10s %-10s %s\n", "rel", "max |a-b|", "kind", "tensor");
    for (int i = 0; i < n && i < worst; i++)
        printf("%-10.3g %-10.3g %-10s %s\n", d[i].rel, d[i].max_abs, d[i].kind, d[i].name);
    free(d);
}

int cmd_diff(const comm_t *comm, int argc, char **argv) {
    diff_opts_t o = {0};
    char *pos[2];
    if (opt_parse(&table, &o, argc, argv, pos, 2) != 2)
        spk_fail_all(SPK_EXIT_USAGE, "diff: usage: spkddp diff A.h5 B.h5 [--rtol X]");
    if (comm->rank != 0) return SPK_EXIT_OK;
    ckpt_image_t a, b;
    load(pos[0], &a);
    load(pos[1], &b);
    char why[512] = "";
    if (param_table_difference(&a.params, &b.params, why, sizeof why) ||
        param_table_difference(&a.state, &b.state, why, sizeof why))
        spk_die(SPK_EXIT_CKPT, "%s and %s hold different models (%s)", pos[0], pos[1], why);
    double abs_p, abs_s, abs_o = 0;
    double rp = rel_diff(a.param_data, b.param_data, a.params.total, &abs_p);
    double rs = rel_diff(a.state_data, b.state_data, a.state.total, &abs_s);
    double ro =
        a.slots == b.slots ? rel_diff(a.opt_data, b.opt_data, (int64_t)a.slots * a.params.total, &abs_o) : INFINITY;
    printf("params     max |a-b| %.3g  rel %.3g\n", abs_p, rp);
    printf("state      max |a-b| %.3g  rel %.3g\n", abs_s, rs);
    printf("optimizer  max |a-b| %.3g  rel %.3g\n", abs_o, ro);
    printf("position   step %lld vs %lld\n", (long long)a.meta->global_step, (long long)b.meta->global_step);
    if (o.worst > 0) print_worst(&a, &b, o.worst);
    int same = rp <= o.rtol && rs <= o.rtol && ro <= o.rtol;
    printf("%s\n", same ? (o.rtol == 0 ? "identical" : "within tolerance") : "DIFFERENT");
    ckpt_image_free(&a);
    ckpt_image_free(&b);
    return same ? SPK_EXIT_OK : SPK_EXIT_FAILURE;
}
