// Softmax cross-entropy over (B, N) logits: one softmax row per sample (kernels/cpu/rows.h);
// the batch loss is summed in row order, so it does not depend on the thread count.
#include "kernels/xent.h"

#include <math.h>
#include <stddef.h>

#include "kernels/base/spk_assert.h"
#include "kernels/cpu/rows.h"

typedef struct {
    float *probs;
    const float *logits;
    const int *labels;
    int N;
} xent_rows;

static spk_row_loss_t xent_row(void *ctx, int b) {
    const xent_rows *c = ctx;
    const int N = c->N, y = c->labels[b];
    SPK_ASSERT(y >= 0 && y < N);
    const float *z = c->logits + (size_t)b * N;
    const int am = spk_row_argmax(z, N);
    const float mx = z[am];
    const float s = spk_softmax_row(c->probs + (size_t)b * N, z, N, mx);
    return (spk_row_loss_t){mx + logf(s) - z[y], am == y};
}

void xent_forward(float *loss, int *correct, float *probs, const float *logits, const int *labels, int B, int N) {
    SPK_ASSERT(B > 0 && N > 0);
    xent_rows c = {probs, logits, labels, N};
    spk_row_losses(loss, correct, B, (size_t)N, xent_row, &c);
}

void xent_backward(float *dlogits, float dloss, const float *probs, const int *labels, int B, int N) {
    SPK_ASSERT(B > 0 && N > 0);
    const float g = dloss / (float)B;
#pragma omp parallel for schedule(static) if ((size_t)B * N >= 32768)
    for (int b = 0; b < B; b++) {
        const float *p = probs + (size_t)b * N;
        float *d = dlogits + (size_t)b * N;
#pragma omp simd
        for (int j = 0; j < N; j++) d[j] += g * p[j];
        d[labels[b]] -= g;
    }
}
