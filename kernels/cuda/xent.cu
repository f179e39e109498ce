// Softmax cross-entropy (kernels/xent.h): one block per row (first-maximum argmax, the block
// softmax row of launch.cuh, the row's loss), then the fixed-order batch sum of rows.cuh.
#include "kernels/cuda/rows.cuh"

namespace {

// probs = softmax(z) of one row per block; row_loss = logsumexp(z) - z[label]; row_ok =
// (first argmax == label)
__global__ void xent_row_kernel(float *probs, float *row_loss, int *row_ok, const float *logits, const int *labels,
                                int N) {
    __shared__ spk_row_shared_t sh;
    const size_t b = blockIdx.x;
    const int y = labels[b];
    spk_check_label(y, N);
    const float *z = logits + b * N;
    const int am = spk_block_row_argmax(z, N, sh.f, sh.i);
    const float mx = z[am];
    const float s = spk_block_softmax_row(probs + b * N, z, N, mx, sh.d);
    if (threadIdx.x == 0) {
        row_loss[b] = mx + logf(s) - z[y];
        row_ok[b] = am == y;
    }
}

// dlogits += g * (probs - onehot(label)), g = dloss / B
__global__ void xent_bwd_kernel(float *dlogits, float g, const float *probs, const int *labels, size_t n, int N) {
    SPK_GRID_LOOP(i, n) {
        const size_t b = i / N;
        const int j = (int)(i - b * N);
        float d = dlogits[i] + g * probs[i];
        if (j == labels[b]) d -= g;
        dlogits[i] = d;
    }
}

}  // namespace

extern "C" void xent_forward_cuda(float *loss, int *correct, float *probs, const float *logits, const int *labels,
                                  int B, int N) {
    SPK_ASSERT(B > 0 && N > 0);
    float *row_loss = (float *)spk_cuda_scratch(2 * sizeof(float) * (size_t)B);
    int *row_ok = (int *)(row_loss + B);
    SPK_LAUNCH(xent_row_kernel, spk_rows_grid((size_t)B), probs, row_loss, row_ok, logits, labels, N);
    spk_row_losses_cuda(loss, correct, row_loss, row_ok, B);
}

extern "C" void xent_backward_cuda(float *dlogits, float dloss, const float *probs, const int *labels, int B, int N) {
    SPK_ASSERT(B > 0 && N > 0);
    const float g = dloss / (float)B;
    const size_t n = (size_t)B * N;
    SPK_LAUNCH(xent_bwd_kernel, spk_grid(n), dlogits, g, probs, labels, n, N);
}
