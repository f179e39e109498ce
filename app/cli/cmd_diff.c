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
} diff_opts_t;

static const opt_t rows[] = {
    OPT_NUMBER(diff_opts_t, rtol, "rtol", 0, 1,
               "largest accepted ||a-b|| / ||a|| per buffer (default 0: bitwise equal)"),
};
static const opt_table_t table =
    OPT_TABLE("diff", "usage: spkddp diff A.h5 B.h5 [--rtol X] -- compare two checkpoints.", rows);

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

int cmd_diff(const comm_t *comm, int argc, char **argv) {
    diff_opts_t o = {0};
    char *pos[2];
    if (opt_parse(&table, &o, argc, argv, pos, 2) != 2)
        spk_fail_all(SPK_EXIT_USAGE, "diff: usage: spkddp diff A.h5 B.h5 [--rtol X]");
    if (comm->rank != 0) return SPK_EXIT_OK;
    ckpt_image_t a, b;
    load(pos[0], &a);
    load(pos[1], &b);
    if (!param_table_equal(&a.params, &b.params) || !param_table_equal(&a.state, &b.state))
        spk_die(SPK_EXIT_CKPT, "%s and %s hold different models", pos[0], pos[1]);
    double abs_p, abs_s, abs_o = 0;
    double rp = rel_diff(a.param_data, b.param_data, a.params.total, &abs_p);
    double rs = rel_diff(a.state_data, b.state_data, a.state.total, &abs_s);
    double ro =
        a.slots == b.slots ? rel_diff(a.opt_data, b.opt_data, (int64_t)a.slots * a.params.total, &abs_o) : INFINITY;
    printf("params     max |a-b| %.3g  rel %.3g\n", abs_p, rp);
    printf("state      max |a-b| %.3g  rel %.3g\n", abs_s, rs);
    printf("optimizer  max |a-b| %.3g  rel %.3g\n", abs_o, ro);
    printf("position   step %lld vs %lld\n", (long long)a.meta->global_step, (long long)b.meta->global_step);
    int same = rp <= o.rtol && rs <= o.rtol && ro <= o.rtol;
    printf("%s\n", same ? (o.rtol == 0 ? "identical" : "within tolerance") : "DIFFERENT");
    ckpt_image_free(&a);
    ckpt_image_free(&b);
    return same ? SPK_EXIT_OK : SPK_EXIT_FAILURE;
}
