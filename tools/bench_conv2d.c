// The 2-D convolution as the ResNets run it (kernels/conv2d.h, channels-last, reorders included):
// ResNet34's 3x3 layers at batch 32 and 200 frames, oneDNN's direct convolution against its
// Winograd F(4x4, 3x3) (conv2d_set_algorithm) and the bf16 convolution (kernels/conv2d_bf16.h,
// the path the CPU takes), forward, input gradient and weight gradient in ms, interleaved, the
// best of several repetitions (shared machines are noisy).
//   usage: bench_conv2d [reps [batch]]
#include <stdio.h>
#include <stdlib.h>

#include "kernels/base/clock.h"
#include "kernels/bf16.h"
#include "kernels/conv2d.h"
#include "kernels/conv2d_bf16.h"

static float *rnd(size_t n) {
    float *p = (float *)malloc(sizeof(float) * (n ? n : 1));
    if (!p) {
        fprintf(stderr, "bench_conv2d: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++) p[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    return p;
}

typedef struct {
    double fwd, dx, dw;  // best seconds
} times_t;

static double elapsed(double *since) {
    const double t = spk_seconds(), d = t - *since;
    *since = t;
    return d;
}

static void run(times_t *best, const conv2d_shape_t *s, float *y, float *x, float *w, float *dx, float *dw, float *ws) {
    double t = spk_seconds(), d;
    conv2d_forward(y, x, w, NULL, s, ws);
    if ((d = elapsed(&t)) < best->fwd) best->fwd = d;
    conv2d_backward(dx, 0, NULL, NULL, y, x, w, s, ws);
    if ((d = elapsed(&t)) < best->dx) best->dx = d;
    conv2d_backward(NULL, 0, dw, NULL, y, x, w, s, ws);
    if ((d = elapsed(&t)) < best->dw) best->dw = d;
}

// The same three calls with bf16 operands (x rounded by the forward, as the models do).
static void run_bf16(times_t *best, const conv2d_shape_t *s, float *y, float *x, spk_bf16 *xh, const spk_bf16 *w,
                     float *dx, float *dw, float *ws) {
    double t = spk_seconds(), d;
    conv2d_bf16_forward(y, xh, x, w, NULL, s, ws);
    if ((d = elapsed(&t)) < best->fwd) best->fwd = d;
    conv2d_bf16_backward(dx, 0, NULL, NULL, y, NULL, xh, w, s, ws);
    if ((d = elapsed(&t)) < best->dx) best->dx = d;
    conv2d_bf16_backward(NULL, 0, dw, NULL, y, NULL, xh, w, s, ws);
    if ((d = elapsed(&t)) < best->dw) best->dw = d;
}

static double sum(times_t t) { return t.fwd + t.dx + t.dw; }

int main(int argc, char **argv) {
    const int reps = argc > 1 && atoi(argv[1]) > 0 ? atoi(argv[1]) : 3,
              B = argc > 2 && atoi(argv[2]) > 0 ? atoi(argv[2]) : 32;
    const struct {
        int C, H, W, layers;  // channels, map, 3x3 stride-1 layers of ResNet34
    } stages[] = {{32, 80, 200, 6}, {64, 40, 100, 7}, {128, 20, 50, 11}, {256, 10, 25, 5}};
    printf("bench_conv2d: batch %d, ms per call, best of %d (forward / input gradient / weight gradient)\n", B, reps);
    double step[3] = {0, 0, 0};
    for (size_t i = 0; i < sizeof stages / sizeof stages[0]; i++) {
        const conv2d_shape_t s = conv2d_square(B, stages[i].C, stages[i].C, stages[i].H, stages[i].W, 3, 1);
        const size_t nx = conv2d_x_size(&s), nw = conv2d_w_size(&s);
        const size_t nws = conv2d_workspace_floats(&s), nws_bf16 = conv2d_bf16_workspace_floats(&s);
        float *x = rnd(nx), *y = rnd(conv2d_y_size(&s)), *w = rnd(nw), *dx = rnd(nx), *dw = rnd(nw);
        float *ws = rnd(nws > nws_bf16 ? nws : nws_bf16);
        spk_bf16 *xh = (spk_bf16 *)rnd((nx + 1) / 2), *wh = (spk_bf16 *)rnd((nw + 1) / 2);
        for (size_t k = 0; k < nw; k++) wh[k] = spk_bf16_round(w[k]);
        times_t best[3] = {{1e9, 1e9, 1e9}, {1e9, 1e9, 1e9}, {1e9, 1e9, 1e9}};
        for (int r = 0; r <= reps; r++)  // the first round makes the plans
            for (int a = 0; a < 3; a++) {
                times_t *b = r ? &best[a] : &(times_t){1e9, 1e9, 1e9};
                conv2d_set_algorithm(a == 1 ? CONV2D_ALGO_WINOGRAD : CONV2D_ALGO_DIRECT);
                if (a < 2)
                    run(b, &s, y, x, w, dx, dw, ws);
                else
                    run_bf16(b, &s, y, x, xh, wh, dx, dw, ws);
            }
        for (int a = 0; a < 3; a++) step[a] += stages[i].layers * sum(best[a]);
        printf("%3d channels %3dx%-3d", stages[i].C, stages[i].H, stages[i].W);
        const char *names[3] = {"direct", "winograd", "bf16"};
        for (int a = 0; a < 3; a++)
            printf("  %s %5.1f / %5.1f / %5.1f", names[a], 1e3 * best[a].fwd, 1e3 * best[a].dx, 1e3 * best[a].dw);
        printf("  winograd %.2fx direct\n", sum(best[0]) / sum(best[1]));
        free(x), free(y), free(w), free(dx), free(dw), free(ws), free(xh), free(wh);
    }
    printf("ResNet34's 29 such layers per step: direct %.2f s, winograd %.2f s, bf16 %.2f s\n", step[0], step[1],
           step[2]);
    return 0;
}
