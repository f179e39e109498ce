// kernels/norm.h: the squared norm against a long-double sum, its bits independent of the
// thread count and of n's split into blocks, NaN and Inf carried through (what the trainer's
// skip and clip decisions read), and the scale; then every backend against the CPU kernels.
#include "kernels/norm.h"

#include "backends.h"

static long double exact_squares(const float *x, size_t n) {
    long double s = 0;
    for (size_t i = 0; i < n; i++) s += (long double)x[i] * x[i];
    return s;
}

static void cpu_checks(void) {
    const size_t sizes[] = {0, 1, 4095, 4096, 4097, 100003, 3 * NORM_BLOCK * 11 + 17};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const size_t n = sizes[k];
        float *x = rand_f(n ? n : 1, -2, 2);
        double got, one, many;
        vec_sum_squares(&got, x, n);
        char nm[96];
        snprintf(nm, sizeof nm, "vec_sum_squares n=%zu", n);
        check_scalar(nm, got, (double)exact_squares(x, n), 1e-13, 1e-300);
        // The same bits with 1 thread and with 4.
        const int threads = omp_get_max_threads();
        omp_set_num_threads(1);
        vec_sum_squares(&one, x, n);
        omp_set_num_threads(4);
        vec_sum_squares(&many, x, n);
        omp_set_num_threads(threads);
        snprintf(nm, sizeof nm, "vec_sum_squares n=%zu: 1 thread == 4 threads", n);
        check_true(memcmp(&one, &many, sizeof one) == 0 && memcmp(&one, &got, sizeof one) == 0, nm);
    }
    // A NaN or an infinity anywhere makes the sum non-finite (the trainer skips such a step).
    const size_t n = 50000;
    float *x = rand_f(n, -1, 1);
    double s;
    x[31337] = NAN;
    vec_sum_squares(&s, x, n);
    check_true(isnan(s), "vec_sum_squares carries a NaN");
    x[31337] = INFINITY;
    vec_sum_squares(&s, x, n);
    check_true(isinf(s), "vec_sum_squares carries an infinity");
    // A float's square overflows float but not the double sum.
    x[31337] = 3e38f;
    vec_sum_squares(&s, x, n);
    check_true(isfinite(s) && s > 8.9e76, "vec_sum_squares sums in double");

    float *y = rand_f(n, -1, 1), *w = copy_f(y, n);
    vec_scale(y, 0.375f, n);
    for (size_t i = 0; i < n; i++) w[i] *= 0.375f;
    check_close("vec_scale", y, w, n, 0, 0);
}

static void backend_checks(void) {
    const size_t sizes[] = {0, 7, 4096, 100003, 5 * NORM_BLOCK * 300 + 1};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const size_t n = sizes[k];
        float *x = rand_f(n ? n : 1, -2, 2);
        float *dx = dev_f(x, n ? n : 1);
        double *dout = (double *)dev_alloc(sizeof(double));
        double want, got, again;
        vec_sum_squares(&want, x, n);
        g_be->vec_sum_squares(dout, dx, n);
        g_be->download(&got, dout, sizeof got);
        g_be->vec_sum_squares(dout, dx, n);
        g_be->download(&again, dout, sizeof again);
        const double err = want != 0 ? fabs(got - want) / want : fabs(got);
        be_verdict(cname("vec_sum_squares n=%zu", n), memcmp(&got, &want, sizeof got) == 0, err, 1e-13);
        g_be_checks++;
        if (memcmp(&got, &again, sizeof got) != 0) {
            printf("FAIL [%s] vec_sum_squares n=%zu: two runs differ\n", g_be->name, n);
            g_failures++;
        }
        float *y = rand_f(n ? n : 1, -1, 1);
        float *dy = dev_f(y, n ? n : 1);
        vec_scale(y, -1.75f, n);
        g_be->vec_scale(dy, -1.75f, n);
        cmp(cname("vec_scale n=%zu", n), dy, y, n, 0.0);
        dev_release();
        test_release();
    }
}

int main(int argc, char **argv) { return test_main(argc, argv, "test_norm", 11, cpu_checks, backend_checks); }
