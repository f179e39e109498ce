// Softmax cross-entropy over (B, N) logits. Per-row work is parallel; the batch loss is summed
// in row order (blocks of rows with a fixed-size local buffer), so it does not depend on the
// thread count.
#include "kernels/xent.h"

#include <math.h>
#include <stddef.h>

#include "kernels/elementwise_math.h"
#include "kernels/base/spk_assert.h"

#define ROW_BLOCK 256

// probs = softmax(z), returns logsumexp(z); *argmax = first maximal index.
static float row_softmax(float* probs, const float* z, int N, int* argmax) {
    float mx = z[0];
    int am = 0;
    for (int j = 1; j < N; j++)
        if (z[j] > mx) {
            mx = z[j];
            am = j;
        }
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int j = 0; j < N; j++) {
        const float e = spk_expf(z[j] - mx);
        probs[j] = e;
        s += e;
    }
    const float inv = 1.0f / s;
#pragma omp simd
    for (int j = 0; j < N; j++) probs[j] *= inv;
    *argmax = am;
    return mx + logf(s);
}

void xent_forward(float* loss, int* correct, float* probs, const float* logits, const int* labels,
                  int B, int N) {
    SPK_ASSERT(B > 0 && N > 0);
    double total = 0.0;
    int ncorrect = 0;
    for (int b0 = 0; b0 < B; b0 += ROW_BLOCK) {
        const int nb = B - b0 < ROW_BLOCK ? B - b0 : ROW_BLOCK;
        float row_loss[ROW_BLOCK];
        int row_ok[ROW_BLOCK];
#pragma omp parallel for schedule(dynamic, 4) if ((size_t)nb * N >= 32768)
        for (int i = 0; i < nb; i++) {
            const int b = b0 + i, y = labels[b];
            SPK_ASSERT(y >= 0 && y < N);
            int am;
            const float lse = row_softmax(probs + (size_t)b * N, logits + (size_t)b * N, N, &am);
            row_loss[i] = lse - logits[(size_t)b * N + y];
            row_ok[i] = am == y;
        }
        for (int i = 0; i < nb; i++) {
            total += row_loss[i];
            ncorrect += row_ok[i];
        }
    }
    *loss = (float)(total / B);
    *correct = ncorrect;
}

void xent_backward(float* dlogits, float dloss, const float* probs, const int* labels, int B,
                   int N) {
    SPK_ASSERT(B > 0 && N > 0);
    const float g = dloss / (float)B;
#pragma omp parallel for schedule(dynamic, 4) if ((size_t)B * N >= 32768)
    for (int b = 0; b < B; b++) {
        const float* p = probs + (size_t)b * N;
        float* d = dlogits + (size_t)b * N;
#pragma omp simd
        for (int j = 0; j < N; j++) d[j] += g * p[j];
        d[labels[b]] -= g;
    }
}
