// Softmax cross-entropy: loss, probabilities and correct count vs a double reference (also
// with huge logits), finite-difference dlogits, accumulation, dloss scaling; then every backend
// against the CPU kernels (tests/kernels/backends.h).
#include "backends.h"
#include "kernels/xent.h"

typedef struct {
    int B, N;
    float *z, *p;
    int *y;
} xe_ctx;

static double xe_loss(void *c_) {
    xe_ctx *c = (xe_ctx *)c_;
    float loss;
    int correct;
    xent_forward(&loss, &correct, c->p, c->z, c->y, c->B, c->N);
    return loss;
}

static void run_case(int B, int N, float range) {
    char nm[128];
    const size_t n = (size_t)B * N;
    xe_ctx c = {B, N, rand_f(n, -range, range), alloc_f(n), alloc_i(B)};
    for (int b = 0; b < B; b++) c.y[b] = rng_int(N);
    if (B > 1) c.z[(size_t)1 * N + c.y[1]] = range + 1;  // at least one correct row
    float loss;
    int correct;
    xent_forward(&loss, &correct, c.p, c.z, c.y, B, N);
    double want = 0;
    int wc = 0;
    double *wp = alloc_d(n);
    for (int b = 0; b < B; b++) {
        const float *z = c.z + (size_t)b * N;
        double mx = z[0], s = 0;
        int am = 0;
        for (int j = 1; j < N; j++)
            if (z[j] > mx) mx = z[j], am = j;
        for (int j = 0; j < N; j++) s += exp(z[j] - mx);
        for (int j = 0; j < N; j++) wp[(size_t)b * N + j] = exp(z[j] - mx) / s;
        want += mx + log(s) - z[c.y[b]];
        wc += am == c.y[b];
    }
    want /= B;
    snprintf(nm, sizeof nm, "xent loss B%d N%d range %g", B, N, range);
    check_scalar(nm, loss, want, 1e-5, 1e-6);
    snprintf(nm, sizeof nm, "xent probs B%d N%d range %g", B, N, range);
    check_close_d(nm, c.p, wp, n, 2e-6, 1e-9);
    snprintf(nm, sizeof nm, "xent correct B%d N%d", B, N);
    check_true(correct == wc, nm);

    float *dz = zeros_f(n);
    xent_backward(dz, 1.0f, c.p, c.y, B, N);
    for (int b = 0; b < B; b++) wp[(size_t)b * N + c.y[b]] -= 1.0;
    for (size_t i = 0; i < n; i++) wp[i] /= B;
    snprintf(nm, sizeof nm, "xent dlogits = (p - onehot) / B, B%d N%d", B, N);
    check_close_d(nm, dz, wp, n, 1e-5, 1e-9);
    // the loss is a float mean, so finite differences only resolve gradients of small batches
    snprintf(nm, sizeof nm, "xent fd dlogits B%d N%d range %g", B, N, range);
    if (B <= 16) fd_check(nm, c.z, dz, n, xe_loss, &c, range > 20 ? 1e-1f : 1e-2f, 1e-2, 2e-3, 200);
    xe_loss(&c);
    float *pre = rand_f(n, -1, 1), *acc = copy_f(pre, n), *dz2 = zeros_f(n);
    xent_backward(acc, 1.0f, c.p, c.y, B, N);
    snprintf(nm, sizeof nm, "xent dlogits accumulates B%d N%d", B, N);
    check_accumulated(nm, acc, pre, dz, n);
    xent_backward(dz2, 2.5f, c.p, c.y, B, N);
    for (size_t i = 0; i < n; i++) dz[i] *= 2.5f;
    snprintf(nm, sizeof nm, "xent dloss scaling B%d N%d", B, N);
    check_close(nm, dz2, dz, n, 1e-6, 1e-9);
    test_release();
}

static void cpu_checks(void) {
    run_case(4, 7, 3);
    run_case(9, 130, 5);
    run_case(3, 5, 80);    // large logits: stable
    run_case(300, 40, 4);  // more rows than one block
}

// ---- every backend against the CPU kernels --------------------------------------------------
static void backend_case(int B, int N) {
    const size_t n = (size_t)B * N;
    float *z = rand_f(n, -5, 5);
    int *labels = alloc_i(B);
    for (int b = 0; b < B; b++)  // every other row labelled with its argmax (hits counted)
        labels[b] = b % 2 ? first_argmax(z + (size_t)b * N, N) : rng_int(N);
    float loss, *probs = alloc_f(n);
    int correct;
    xent_forward(&loss, &correct, probs, z, labels, B, N);
    float *dz = dev_f(z, n), *dprobs = dev_f(NULL, n), *dloss = dev_f(NULL, 1);
    int *dlabels = dev_i(labels, B), *dcorrect = dev_i(&correct, 1);
    g_be->xent_forward(dloss, dcorrect, dprobs, dz, dlabels, B, N);
    cmp_scalar(cname("xent loss B%d N%d", B, N), dloss, loss, TOL);
    cmp_int(cname("xent correct B%d N%d", B, N), dcorrect, correct);
    cmp(cname("xent probs B%d N%d", B, N), dprobs, probs, n, TOL);
    grads_t g = grads_prefill(1, &n);
    xent_backward(g.cpu[0], 1.7f, probs, labels, B, N);
    g_be->xent_backward(g.dev[0], 1.7f, dprobs, dlabels, B, N);
    g_be->xent_backward(g.dev2[0], 1.7f, dprobs, dlabels, B, N);
    char tag[32];
    snprintf(tag, sizeof tag, "B%d N%d", B, N);
    grads_check(&g, "xent", tag, (const char *[]){"dlogits"}, (double[]){TOL});
    dev_release();
    test_release();
}

static void backend_checks(void) {
    backend_case(37, 300);
    backend_case(150000, 5);  // 1.2 MB of row results: the CUDA library scratch grows
}

int main(int argc, char **argv) { return test_main(argc, argv, "test_xent", 17, cpu_checks, backend_checks); }
