// Checkpoint averaging on known numbers: three checkpoints whose parameters and BatchNorm
// statistics are chosen so that the mean is exact in double and wrong if accumulated in float
// (2^24 + 1 + 1), with the newest input's header, no optimizer slots and a fresh run id;
// and checkpoints of different models refused, naming the first tensor that differs.
#include "io/ckpt/checkpoint.h"
#include "io/ckpt/ckpt_average.h"
#include "kernels/base/check.h"
#include "tests/test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void write_ckpt(const char *dir, int64_t step, const float p[4], const float s[2], int64_t classes) {
    param_table_t pt = {0}, st = {0};
    param_table_add(&pt, "fc.weight", 2, (int64_t[]){classes, 4 / classes});
    param_table_add(&st, "norm.running_mean", 1, (int64_t[]){2});
    ckpt_meta_t *m = calloc(1, sizeof *m);
    snprintf(m->model, sizeof m->model, "linear");
    snprintf(m->optimizer, sizeof m->optimizer, "adam");
    snprintf(m->config, sizeof m->config, "step=%lld\n", (long long)step);
    m->global_step = m->opt_step = step;
    m->world_size = 2, m->feature_dim = 4 / classes, m->num_classes = classes, m->run_id = 77;
    float opt[8] = {0};
    ckpt_tensors_t t = {&pt, (float *)p, &st, (float *)s, 2, opt};
    char path[256];
    ckpt_write(dir, m, &t, path, sizeof path);
    free(m);
    param_table_free(&pt);
    param_table_free(&st);
}

int main(void) {
    char dir[] = "/tmp/test_ckpt_average.XXXXXX";
    if (!mkdtemp(dir)) return 1;
    const float big = 16777216.0f;  // 2^24: big + 1 rounds back to big in float
    const float p[3][4] = {{big, 1, -2, 0.5f}, {1, 2, -4, 0.25f}, {1, 3, -6, 0.125f}};
    const float s[3][2] = {{0.1f, 3}, {0.2f, 5}, {0.3f, 7}};
    for (int k = 0; k < 3; k++) write_ckpt(dir, 10 * (k + 1), p[k], s[k], 2);
    char paths[3][256], out[256], err[1024];
    const char *in[3];
    for (int k = 0; k < 3; k++) {
        snprintf(paths[k], sizeof paths[k], "%s/ckpt-%012d.h5", dir, 10 * (k + 1));
        in[k] = paths[k];
    }
    snprintf(out, sizeof out, "%s/avg.h5", dir);
    // Inputs in any order: the header is the newest's (step 30).
    const char *order[3] = {in[2], in[0], in[1]};
    int rc = ckpt_average(order, 3, out, err, sizeof err);
    EXPECT(rc == 0, "%s", err);
    ckpt_image_t a;
    rc = ckpt_image_load(out, &a, err, sizeof err);
    EXPECT(rc == 0, "%s", err);
    if (rc == 0) {
        const float want_p[4] = {(float)((16777216.0 + 2.0) / 3.0), 2.0f, -4.0f, (float)(0.875 / 3.0)};
        const float want_s[2] = {(float)(((double)s[0][0] + (double)s[1][0] + (double)s[2][0]) / 3.0), 5.0f};
        for (int i = 0; i < 4; i++)
            EXPECT(a.param_data[i] == want_p[i], "param %d: %.9g, want %.9g", i, a.param_data[i], want_p[i]);
        for (int i = 0; i < 2; i++)
            EXPECT(a.state_data[i] == want_s[i], "state %d: %.9g, want %.9g", i, a.state_data[i], want_s[i]);
        EXPECT(a.param_data[0] == 5592406.0f, "2^24 + 2 over 3 is 5592406 (float accumulation gives 5592405.33)");
        EXPECT(a.meta->global_step == 30 && !strcmp(a.meta->config, "step=30\n"), "header of step %lld",
               (long long)a.meta->global_step);
        EXPECT(a.slots == 0 && !strcmp(a.meta->optimizer, "none"), "%d optimizer slots ('%s')", a.slots,
               a.meta->optimizer);
        EXPECT(a.meta->run_id != 77, "the run id of the inputs");
        ckpt_image_free(&a);
    }
    // One input: the same values.
    EXPECT(ckpt_average(in + 1, 1, out, err, sizeof err) == 0, "%s", err);
    // Another model: refused, naming both files.
    write_ckpt(dir, 40, p[0], s[0], 4);
    char other[256];
    snprintf(other, sizeof other, "%s/ckpt-%012d.h5", dir, 40);
    const char *mixed[2] = {in[0], other};
    rc = ckpt_average(mixed, 2, out, err, sizeof err);
    EXPECT(rc == SPK_EXIT_CKPT && strstr(err, other) && strstr(err, "another model") &&
               strstr(err, "'fc.weight' is (4, 1) against (2, 2)"),
           "rc %d: %s", rc, err);
    const char *missing[2] = {in[0], "/nonexistent/ckpt.h5"};
    rc = ckpt_average(missing, 2, out, err, sizeof err);
    EXPECT(rc == SPK_EXIT_CKPT && strstr(err, "/nonexistent/ckpt.h5"), "rc %d: %s", rc, err);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    EXPECT(system(cmd) == 0, "cleanup");
    return test_report("test_ckpt_average");
}
