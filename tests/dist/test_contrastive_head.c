// The contrastive head over the global batch (app/model/layers/contrastive_head.h) under
// mpiexec -n 1..4: every rank holds its slice of one global batch of embeddings (groups of M
// rows of one speaker) and must get, for each loss,
//   global negatives, plain mode: the embedding gradient of the global loss times the ranks
//     (what the gradient averaging expects) within 1e-6 of a one-process reference holding
//     the whole batch, and shares of the loss whose mean is the reference's loss;
//   global negatives, invariant mode: that gradient and each sample's loss bitwise equal to
//     the reference's, whatever the number of ranks;
//   local negatives: the loss and gradient of its own slice alone;
// and the hits over the ranks must add up to the reference's. On host memory and through
// cpu-staged copies.
#include "app/dist/head_comm.h"
#include "app/model/layers/contrastive_head.h"
#include "kernels/base/rng.h"
#include "tests/dist/mpi_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define B 6  // samples per rank
#define E 9
#define M 3

typedef struct {
    double loss;
    int hits;
    float *grad;  // (n, E)
    float *rows;  // (n)
} result_t;

// The head of `loss` on rows [first, first + n) of x, with comm (NULL: those rows alone).
static result_t run(const spk_backend_t *be, const head_comm_t *comm, const char *loss, int invariant, int local,
                    const float *x, const int *y, int first, int n) {
    model_t m = {.be = be, .emb_dim = E, .invariant = invariant, .batch_comm = comm};
    model_config_t mc = model_config_defaults("ecapa");
    snprintf(mc.loss, sizeof mc.loss, "%s", loss);
    mc.per_speaker = M;
    mc.contrastive_scale = 5.0;
    mc.local_negatives = local;
    int aam;
    contrastive_head_t *h = contrastive_head_create(&mc, &aam);
    float *emb = model_buf(&m, (size_t)n * E), *g = model_buf(&m, (size_t)n * E);
    be->upload(emb, x + (size_t)first * E, (size_t)n * E * sizeof(float));
    be->vec_zero(g, (size_t)n * E);
    result_t r = {.grad = malloc((size_t)n * E * sizeof(float)), .rows = malloc((size_t)n * sizeof(float))};
    contrastive_head_forward(h, &m, emb, y + first, NULL, n, E, 1, &r.loss, r.rows, &r.hits);
    contrastive_head_backward(h, &m, g);
    be->download(r.grad, g, (size_t)n * E * sizeof(float));
    model_buf_free(&m, &emb);
    model_buf_free(&m, &g);
    contrastive_head_free(h, &m);
    return r;
}

static void done(result_t *r) {
    free(r->grad);
    free(r->rows);
}

static double norm_err(const float *got, const float *want, double scale, int n) {
    double d = 0, w = 0;
    for (int i = 0; i < n; i++) d += pow(got[i] - scale * want[i], 2), w += pow(scale * want[i], 2);
    return sqrt(d / (w > 0 ? w : 1));
}

static void check(const comm_t *c, const spk_backend_t *be) {
    const int K = c->size, G = K * B, first = c->rank * B;
    float *x = malloc((size_t)G * E * sizeof(float));
    int *y = malloc((size_t)G * sizeof(int));
    rng_t r = rng_init(21, RNG_PURPOSE_SYNTH, (uint64_t)K, 0);
    for (int g = 0; g < G; g++) {
        y[g] = (g / M) * 7 % 101;  // distinct speakers, one per group
        for (int e = 0; e < E; e++) x[g * E + e] = (float)rng_normal(&r) + (e == y[g] % E ? 1.5f : 0.0f);
    }
    head_comm_impl_t hc;
    head_comm_init(&hc, c);
    const char *losses[] = {"supcon", "angleproto", "ge2e"};
    for (int l = 0; l < 3; l++) {
        for (int inv = 0; inv < 2; inv++) {
            result_t ref = run(be, NULL, losses[l], inv, 0, x, y, 0, G);
            result_t got = run(be, &hc.ops, losses[l], inv, 0, x, y, first, B);
            double total = got.loss * B / G;
            double hits = got.hits;
            comm_allreduce_sum_f64(c, &total, 1);
            comm_allreduce_sum_f64(c, &hits, 1);
            EXPECT(fabs(total - ref.loss) <= 1e-6 * fabs(ref.loss), "%s inv=%d K=%d: loss %.9g, one process %.9g",
                   losses[l], inv, K, total, ref.loss);
            EXPECT(hits == ref.hits, "%s inv=%d K=%d: %g hits, one process %d", losses[l], inv, K, hits, ref.hits);
            if (inv) {
                EXPECT(memcmp(got.grad, ref.grad + (size_t)first * E, (size_t)B * E * sizeof(float)) == 0,
                       "%s invariant K=%d: gradient not bitwise the one process's", losses[l], K);
                EXPECT(memcmp(got.rows, ref.rows + first, B * sizeof(float)) == 0,
                       "%s invariant K=%d: sample losses not bitwise the one process's", losses[l], K);
            } else {
                const double err = norm_err(got.grad, ref.grad + (size_t)first * E, K, B * E);
                EXPECT(err <= 1e-6, "%s K=%d: gradient off by %.3g (normalised)", losses[l], K, err);
            }
            done(&ref);
            done(&got);
        }
        // Local negatives: this rank's slice alone.
        result_t ref = run(be, NULL, losses[l], 0, 0, x, y, first, B);
        result_t got = run(be, &hc.ops, losses[l], 0, 1, x, y, first, B);
        EXPECT(got.loss == ref.loss && got.hits == ref.hits, "%s local: loss %.9g, alone %.9g", losses[l], got.loss,
               ref.loss);
        EXPECT(memcmp(got.grad, ref.grad, (size_t)B * E * sizeof(float)) == 0, "%s local: gradient", losses[l]);
        done(&ref);
        done(&got);
    }
    free(x);
    free(y);
}

int main(int argc, char **argv) { return mpi_test_main(argc, argv, "test_contrastive_head", check); }
