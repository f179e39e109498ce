// Step controls (app/train/step_controls.h) on the CPU backend: the gradient norm against a
// long-double sum, clipping to the target norm (and leaving smaller gradients bitwise alone),
// skipped updates for a non-finite loss or gradient with the gradient untouched, the epoch's
// norm figures and their way through a checkpoint header.
#include "app/train/step_controls.h"
#include "tests/test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define N 20011

static double norm_of(const float *g) {
    long double s = 0;
    for (int i = 0; i < N; i++) s += (long double)g[i] * g[i];
    return sqrt((double)s);
}

static void fill(float *g, unsigned seed) {
    srand(seed);
    for (int i = 0; i < N; i++) g[i] = (float)rand() / (float)RAND_MAX - 0.5f;
}

int main(void) {
    const step_controls_config_t cfg = {.clip_grad_norm = 1.5, .skip_nonfinite = 2, .step_log = "", .data = "test.h5"};
    step_controls_t c;
    step_controls_init(&c, &cfg, &spk_backend_cpu);
    float *g = malloc(N * sizeof(float)), *keep = malloc(N * sizeof(float));

    // Larger than the bound: scaled to bound * norm / (norm + 1e-6).
    fill(g, 1);
    const double norm = norm_of(g);
    step_report_t r = {.loss = 0.7};
    EXPECT(norm > cfg.clip_grad_norm, "the test gradient (norm %g) must exceed the bound", norm);
    EXPECT(step_controls_apply(&c, g, N, &r, 0, 0) == 1 && !r.skipped, "a finite step is applied");
    EXPECT(fabs(r.grad_norm - norm) <= 1e-12 * norm, "norm %.17g, want %.17g", r.grad_norm, norm);
    const double want = cfg.clip_grad_norm * norm / (norm + 1e-6);
    EXPECT(fabs(norm_of(g) - want) <= 1e-6 * want && fabs(r.clip_scale * norm - want) <= 1e-12,
           "clipped norm %.9g, want %.9g", norm_of(g), want);

    // Within the bound: not touched.
    fill(g, 2);
    for (int i = 0; i < N; i++) g[i] *= 0.01f;
    memcpy(keep, g, N * sizeof(float));
    r = (step_report_t){.loss = 0.6};
    EXPECT(step_controls_apply(&c, g, N, &r, 0, 1) == 1 && r.clip_scale == 1.0 && !memcmp(g, keep, N * sizeof(float)),
           "a gradient within the bound is left alone");
    const double small = r.grad_norm;

    // Non-finite loss, then a non-finite gradient: skipped, counted, gradient untouched.
    fill(g, 3);
    memcpy(keep, g, N * sizeof(float));
    r = (step_report_t){.loss = NAN};
    EXPECT(step_controls_apply(&c, g, N, &r, 0, 2) == 0 && r.skipped && !memcmp(g, keep, N * sizeof(float)),
           "a NaN loss skips the update");
    g[N / 2] = INFINITY;
    r = (step_report_t){.loss = 0.5};
    EXPECT(step_controls_apply(&c, g, N, &r, 0, 3) == 0 && r.skipped && isinf(r.grad_norm),
           "an infinite gradient skips");
    EXPECT(c.skipped == 2 && c.ep_skipped == 2, "skips counted: %lld, %lld", (long long)c.skipped,
           (long long)c.ep_skipped);

    // The epoch's figures: the applied updates only, through a checkpoint header and back.
    EXPECT(fabs(step_controls_epoch_norm(&c, 4) - (norm + small) / 2) <= 1e-11 && fabs(c.ep_norm_max - norm) <= 1e-11,
           "epoch norm %g, max %g", step_controls_epoch_norm(&c, 4), c.ep_norm_max);
    ckpt_meta_t *m = calloc(1, sizeof *m);
    step_controls_save(&c, m);
    step_controls_t d;
    step_controls_init(&d, &cfg, &spk_backend_cpu);
    step_controls_restore(&d, m);
    EXPECT(d.ep_norm_sum == c.ep_norm_sum && d.ep_norm_max == c.ep_norm_max && d.ep_skipped == 2, "restored figures");
    step_controls_new_epoch(&d);
    EXPECT(d.ep_norm_sum == 0 && d.ep_norm_max == 0 && d.ep_skipped == 0 && isnan(step_controls_epoch_norm(&d, 0)),
           "a new epoch starts from nothing");
    step_controls_free(&c);
    step_controls_free(&d);
    free(m);
    free(g);
    free(keep);
    return test_report("test_step_controls");
}
