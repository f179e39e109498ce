// The cuDNN plan cache (kernels/cuda/conv_plans.cu): lengths share plans by bucket, the
// algorithms of a bucket do not depend on which of its lengths came first, and a stream of
// one-off inference lengths evicts other inference plans but never a plan training keeps
// using; the 2-D convolutions' widths share plans the same way, and their float and bf16 forms
// have plans of their own; bf16 plans run on tensor cores, float32 ones never. GPU only (or the
// CUDA stand-in, which passes `small`: its plans run every candidate on the CPU, so the
// production-sized checks shrink); without a CUDA device it reports SKIPPED (exit 77).
#include "../kernels/backends.h"
#include "kernels/conv2d.h"

static int g_small = 0;  // `small`: the math-type checks at shapes the stand-in affords

#ifdef SPKDDP_HAVE_CUDA
static long long plans_made(void) {
    long long made, chosen;
    spk_cuda_conv_plan_counts(&made, &chosen);
    return made;
}
static long long selections(void) {
    long long made, chosen;
    spk_cuda_conv_plan_counts(&made, &chosen);
    return chosen;
}

// y = conv(x) at length T for inference-like shapes (B = 1, K = 3, d = 2): a host copy.
static const float *conv_at(int T, const float *x, const float *dw) {
    const int Cin = 8, Cout = 8;
    float *dx = dev_f(x, (size_t)Cin * T);
    float *dy = dev_f(NULL, (size_t)Cout * T);
    float *ws = dev_f(NULL, g_be->conv1d_workspace_floats(1, Cin, Cout, T, 3, 2));
    g_be->conv1d_forward(dy, dx, dw, NULL, 1, Cin, Cout, T, 3, 2, ws);
    return dev_get(dy, (size_t)Cout * T);
}

static void plan_checks(void) {
    // A training shape, used every step.
    for (int step = 0; step < 10; step++) g_be->conv1d_workspace_floats(16, 32, 32, 200, 3, 2);
    const long long made0 = plans_made(), chosen0 = selections();

    // 251 inference lengths, one batch of one each: 150..400 frames fall into 12 buckets.
    for (int T = 150; T <= 400; T++) g_be->conv1d_workspace_floats(1, 32, 32, T, 3, 2);
    const long long chosen = selections() - chosen0;
    printf("251 lengths (150..400 frames): %lld algorithm choices\n", chosen);
    check_true(chosen == 12, "lengths 150..400 share 12 bucket plans");

    // More one-off shapes than the cache holds: they evict each other, not the training plan.
    for (int B = 1; B <= 3; B++)
        for (int T = 100; T <= 3000; T = T * 9 / 8 + 1) g_be->conv1d_workspace_floats(B, 32, 32, T, 3, 2);
    for (int Cin = 1; Cin <= 200; Cin++) g_be->conv1d_workspace_floats(1, Cin, 8, 20, 3, 2);  // small, many
    printf("%lld plans made in all\n", plans_made());
    check_true(plans_made() - made0 > 256, "more inference plans were made than the cache holds");
    const long long before = plans_made();
    g_be->conv1d_workspace_floats(16, 32, 32, 200, 3, 2);
    check_true(plans_made() == before, "the training plan survived them");

    // A bucket's algorithms are chosen for its largest length, whichever length comes first:
    // the same result for T = 170 planned first or after 165 in a fresh cache.
    const int Tmax = 200;
    const float *x = rand_f((size_t)8 * Tmax, -1, 1);
    const float *w = rand_f(8 * 8 * 3, -0.5f, 0.5f);
    float *dw = dev_f(w, 8 * 8 * 3);
    spk_conv1d_cuda_release_plans();
    const float *first = conv_at(170, x, dw);
    spk_conv1d_cuda_release_plans();
    conv_at(165, x, dw);
    const float *after = conv_at(170, x, dw);
    check_true(memcmp(first, after, sizeof(float) * 8 * 170) == 0,
               "T=170 gives the same bits planned first or after T=165 of its bucket");
    dev_release();
    test_release();
}

// The 2-D convolutions (kernels/cuda/conv2d.cu, conv2d_bf16.cu): the width is the length.
static void plan_checks_2d(void) {
    conv2d_shape_t s = {2, 8, 8, 6, 150, 3, 3, 1, 2, 1, 1, 1, 1};
    spk_conv1d_cuda_release_plans();
    const long long chosen0 = selections();
    for (s.W = 150; s.W <= 400; s.W++) g_be->conv2d_workspace_floats(&s);
    const long long chosen = selections() - chosen0;
    printf("conv2d at 251 widths (150..400): %lld algorithm choices\n", chosen);
    check_true(chosen == 12, "2-D widths 150..400 share 12 bucket plans");
    const long long made0 = plans_made();
    s.W = 200;
    g_be->conv2d_workspace_floats(&s);
    check_true(plans_made() == made0, "a width of a planned bucket makes no plan");
    g_be->conv2d_bf16_workspace_floats(&s);
    check_true(plans_made() == made0 + 1, "the bf16 convolution of the same shape has a plan of its own");

    // bf16 runs on tensor cores: every pass of a ResNet-sized bf16 plan in CUDNN_TENSOR_OP_MATH.
    spk_conv1d_cuda_release_plans();
    const conv2d_shape_t r = g_small ? (conv2d_shape_t){2, 16, 16, 8, 20, 3, 3, 1, 1, 1, 1, 1, 1}
                                     : (conv2d_shape_t){16, 64, 64, 40, 100, 3, 3, 1, 1, 1, 1, 1, 1};
    g_be->conv2d_bf16_workspace_floats(&r);
    int passes = 0, tensor_op = 0;
    spk_cuda_conv_plan_census(1, &passes, &tensor_op);
    printf("bf16 conv2d B=%d C=%d %dx%d 3x3: %d of %d passes on tensor cores\n", r.B, r.Cin, r.H, r.W, tensor_op,
           passes);
    check_true(passes == 3 && tensor_op == 3, "every pass of a bf16 convolution runs in CUDNN_TENSOR_OP_MATH");
}

// fp32 stays fp32: no pass of ECAPA's convolutions runs in tensor-op math (TF32) unless --tf32.
static void plan_checks_fp32(void) {
    spk_conv1d_cuda_release_plans();
    const int B = g_small ? 2 : 32, C = g_small ? 16 : 512, T = g_small ? 24 : 200;
    g_be->conv1d_workspace_floats(B, 80, C, T, 5, 1);
    g_be->conv1d_workspace_floats(B, C / 8, C / 8, T, 3, 2);
    g_be->conv1d_workspace_floats(B, C, C, T, 1, 1);
    int passes = 0, tensor_op = 0;
    spk_cuda_conv_plan_census(0, &passes, &tensor_op);
    printf("fp32 conv1d (ECAPA's layer kinds, C=%d): %d passes, %d on tensor cores\n", C, passes, tensor_op);
    check_true(passes == 9 && tensor_op == 0, "fp32 convolutions never run in tensor-op math");
}

static void all_checks(void) {
    plan_checks();
    plan_checks_2d();
    plan_checks_fp32();
}
#else
static void all_checks(void) {}  // never runs: without CUDA the test is skipped
#endif

int main(int argc, char **argv) {
    g_small = argc == 2 && strcmp(argv[1], "small") == 0;
    if (argc > 2 || (argc == 2 && !g_small)) {
        fprintf(stderr, "usage: %s [small]\n", argv[0]);
        return 2;
    }
    return test_main_cuda(argv[0], "test_gpu_conv_plans", 20250101, all_checks);
}
