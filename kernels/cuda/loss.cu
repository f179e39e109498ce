// Softmax cross-entropy (kernels/xent.h) and the additive angular margin head
// (kernels/aam_softmax.h). Each row is one block: first-maximum argmax, max-subtracted softmax
// with spk_expf, the row's loss; a one-block kernel then sums the row losses and hits in a
// fixed order (deterministic). The AAM cosines and gradients are cuBLAS GEMMs.
//
// AAM cache layout: kernels/aam_cache.h, shared with the CPU.
// AAM workspace: forward   row_loss (B) | row_ok (B ints)
//                backward  dcos (B, S) | dehat (B, E) | dwhat (S, E)
#include <math.h>

#include "kernels/aam_cache.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/elementwise_math.h"

// Device-side checks stay on in release builds, like SPK_ASSERT (kernels/spk_assert.h).
#undef NDEBUG
#include <assert.h>

namespace {

const float kNormEps = 1e-12f;  // F.normalize default

// Labels live on the device, so they are checked there with the device assert (kept on in
// release builds above): a bad label prints the failed condition with the kernel's name, and
// the next synchronising call fails with "device-side assert triggered".
__device__ __forceinline__ void check_label(int y, int n) { assert(y >= 0 && y < n); }

// probs = softmax(z) of one row per block; row_loss = logsumexp(z) - z[label]; row_ok =
// (first argmax == label)
__global__ void xent_row_kernel(float* probs, float* row_loss, int* row_ok, const float* logits,
                                const int* labels, int N) {
    __shared__ float shf[SPK_CUDA_THREADS];
    __shared__ int shi[SPK_CUDA_THREADS];
    __shared__ double shd[SPK_CUDA_THREADS];
    const size_t b = blockIdx.x;
    const int y = labels[b];
    check_label(y, N);
    const float* z = logits + b * N;
    float* p = probs + b * N;
    float mv = -INFINITY;
    int mi = -1;
    for (int j = threadIdx.x; j < N; j += SPK_CUDA_THREADS)
        if (mi < 0 || z[j] > mv) {
            mv = z[j];
            mi = j;
        }
    const int am = spk_block_argmax(mv, mi, shf, shi);
    const float mx = z[am];
    double acc = 0.0;
    for (int j = threadIdx.x; j < N; j += SPK_CUDA_THREADS) {
        const float e = spk_expf(z[j] - mx);
        p[j] = e;
        acc += e;
    }
    const float s = (float)spk_block_sum(acc, shd);
    const float inv = 1.0f / s;
    for (int j = threadIdx.x; j < N; j += SPK_CUDA_THREADS) p[j] *= inv;
    if (threadIdx.x == 0) {
        row_loss[b] = (mx + logf(s)) - z[y];
        row_ok[b] = am == y;
    }
}

// loss = mean of the row losses, correct = number of hits; one block.
__global__ void finalize_kernel(float* loss, int* correct, const float* row_loss, const int* row_ok,
                                int B) {
    __shared__ double shd[SPK_CUDA_THREADS];
    __shared__ int shi[SPK_CUDA_THREADS];
    double acc = 0.0;
    int ok = 0;
    for (int b = threadIdx.x; b < B; b += SPK_CUDA_THREADS) {
        acc += row_loss[b];
        ok += row_ok[b];
    }
    const double total = spk_block_sum(acc, shd);
    const int hits = spk_block_sum(ok, shi);
    if (threadIdx.x == 0) {
        *loss = (float)(total / B);
        *correct = hits;
    }
}

// dlogits += g * (probs - onehot(label)), g = dloss / B
__global__ void xent_bwd_kernel(float* dlogits, float g, const float* probs, const int* labels,
                                size_t n, int N) {
    SPK_GRID_LOOP(i, n) {
        const size_t b = i / N;
        const int j = (int)(i - b * N);
        float d = dlogits[i] + g * probs[i];
        if (j == labels[b]) d -= g;
        dlogits[i] = d;
    }
}

// out = in / max(|in|, eps) row by row; norm = |in| (unclamped). One block per row.
__global__ void normalize_rows_kernel(float* out, float* norm, const float* in, int E) {
    __shared__ double sh[SPK_CUDA_THREADS];
    const size_t r = blockIdx.x;
    const float* x = in + r * E;
    float* y = out + r * E;
    double acc = 0.0;
    for (int e = threadIdx.x; e < E; e += SPK_CUDA_THREADS) acc += (double)x[e] * x[e];
    const float n = (float)sqrt(spk_block_sum(acc, sh));
    if (threadIdx.x == 0) norm[r] = n;
    const float inv = 1.0f / (n > kNormEps ? n : kNormEps);
    for (int e = threadIdx.x; e < E; e += SPK_CUDA_THREADS) y[e] = x[e] * inv;
}

// Backward of normalize_rows_kernel: dx += (g - y (y.g)) / |x| where |x| > eps, else g / eps.
__global__ void normalize_rows_bwd_kernel(float* dx, const float* g, const float* y,
                                          const float* norm, int E) {
    __shared__ double sh[SPK_CUDA_THREADS];
    const size_t r = blockIdx.x;
    const float* gr = g + r * E;
    const float* yr = y + r * E;
    float* d = dx + r * E;
    const float n = norm[r];  // the same for the whole block, so the branch is uniform
    if (n > kNormEps) {
        double acc = 0.0;
        for (int e = threadIdx.x; e < E; e += SPK_CUDA_THREADS) acc += yr[e] * gr[e];
        const float dot = (float)spk_block_sum(acc, sh);
        const float inv = 1.0f / n;
        for (int e = threadIdx.x; e < E; e += SPK_CUDA_THREADS) d[e] += (gr[e] - yr[e] * dot) * inv;
    } else {
        for (int e = threadIdx.x; e < E; e += SPK_CUDA_THREADS) d[e] += gr[e] / kNormEps;
    }
}

struct Margin {
    float cos_m, sin_m, th, mm;
};

Margin margin_of(float m) {
    const double pi = 3.14159265358979323846;
    Margin c;
    c.cos_m = (float)cos(m);
    c.sin_m = (float)sin(m);
    c.th = (float)cos(pi - m);
    c.mm = (float)(sin(pi - m) * m);
    return c;
}

// One block per row b of cos (B, S), in place in the probs slot: cos -> logits (scale * cos,
// scale * phi at the label) -> softmax. Also the row's loss, argmax(cos) hit and cos_target.
__global__ void aam_row_kernel(float* probs, float* cos_target, float* row_loss, int* row_ok,
                               const int* labels, int S, float scale, Margin mc) {
    __shared__ float shf[SPK_CUDA_THREADS];
    __shared__ int shi[SPK_CUDA_THREADS];
    __shared__ double shd[SPK_CUDA_THREADS];
    const size_t b = blockIdx.x;
    const int y = labels[b];
    check_label(y, S);
    float* row = probs + b * S;
    const float ct = row[y];  // every thread reads it before the argmax's barriers
    float mv = -INFINITY;
    int mi = -1;
    for (int j = threadIdx.x; j < S; j += SPK_CUDA_THREADS)
        if (mi < 0 || row[j] > mv) {
            mv = row[j];
            mi = j;
        }
    const int am = spk_block_argmax(mv, mi, shf, shi);
    // From here each thread reads and writes only its own positions j.
    const float zy = scale * spk_aam_phi(ct, mc.cos_m, mc.sin_m, mc.th, mc.mm);
    mv = -INFINITY;
    for (int j = threadIdx.x; j < S; j += SPK_CUDA_THREADS) {
        const float z = j == y ? zy : row[j] * scale;
        row[j] = z;
        mv = fmaxf(mv, z);
    }
    const float mx = spk_block_max(mv, shf);
    double acc = 0.0;
    for (int j = threadIdx.x; j < S; j += SPK_CUDA_THREADS) {
        const float e = spk_expf(row[j] - mx);
        row[j] = e;
        acc += e;
    }
    const float s = (float)spk_block_sum(acc, shd);
    const float inv = 1.0f / s;
    for (int j = threadIdx.x; j < S; j += SPK_CUDA_THREADS) row[j] *= inv;
    if (threadIdx.x == 0) {
        cos_target[b] = ct;
        row_loss[b] = (mx + logf(s)) - zy;
        row_ok[b] = am == y;
    }
}

// dcos = d loss / d cos: g * probs, and g * (p - 1) * dphi/dcos at the label (g = dloss/B * s)
__global__ void aam_dcos_kernel(float* dcos, const float* probs, const float* cos_target,
                                const int* labels, float g, size_t n, int S, Margin mc) {
    SPK_GRID_LOOP(i, n) {
        const size_t b = i / S;
        const int j = (int)(i - b * S);
        const float p = probs[i];
        dcos[i] = j == labels[b]
                      ? g * (p - 1.0f) * spk_aam_dphi(cos_target[b], mc.cos_m, mc.sin_m, mc.th)
                      : g * p;
    }
}

}  // namespace

// ---- xent -----------------------------------------------------------------------------------

extern "C" void xent_forward_cuda(float* loss, int* correct, float* probs, const float* logits,
                                  const int* labels, int B, int N) {
    SPK_ASSERT(B > 0 && N > 0);
    cudaStream_t st = spk_cuda_stream_checked();
    float* row_loss = (float*)spk_cuda_scratch(2 * sizeof(float) * (size_t)B);
    int* row_ok = (int*)(row_loss + B);
    xent_row_kernel<<<spk_rows_grid((size_t)B), SPK_CUDA_THREADS, 0, st>>>(probs, row_loss, row_ok,
                                                                           logits, labels, N);
    SPK_CUDA_LAUNCHED();
    finalize_kernel<<<1, SPK_CUDA_THREADS, 0, st>>>(loss, correct, row_loss, row_ok, B);
    SPK_CUDA_LAUNCHED();
}

extern "C" void xent_backward_cuda(float* dlogits, float dloss, const float* probs,
                                   const int* labels, int B, int N) {
    SPK_ASSERT(B > 0 && N > 0);
    const float g = dloss / (float)B;
    const size_t n = (size_t)B * N;
    xent_bwd_kernel<<<spk_grid(n), SPK_CUDA_THREADS, 0, spk_cuda_stream_checked()>>>(
        dlogits, g, probs, labels, n, N);
    SPK_CUDA_LAUNCHED();
}

// ---- AAM softmax ----------------------------------------------------------------------------

extern "C" size_t aam_softmax_cache_floats_cuda(int B, int E, int S) { return aam_cache_floats(B, E, S); }

// The backward's (B*S + B*E + S*E) always covers the forward's 2B.
extern "C" size_t aam_softmax_workspace_floats_cuda(int B, int E, int S) {
    return (size_t)B * S + (size_t)B * E + (size_t)S * E;
}

extern "C" void aam_softmax_forward_cuda(float* loss, int* correct, float* cache, const float* emb,
                                         const float* w, const int* labels, int B, int E, int S,
                                         float margin, float scale, float* workspace) {
    SPK_ASSERT(B > 0 && E > 0 && S > 0);
    cudaStream_t st = spk_cuda_stream_checked();
    const aam_cache_t c = aam_cache_view(cache, B, E, S);
    normalize_rows_kernel<<<spk_rows_grid((size_t)B), SPK_CUDA_THREADS, 0, st>>>(c.ehat, c.enorm,
                                                                                 emb, E);
    SPK_CUDA_LAUNCHED();
    normalize_rows_kernel<<<spk_rows_grid((size_t)S), SPK_CUDA_THREADS, 0, st>>>(c.what, c.wnorm, w,
                                                                                 E);
    SPK_CUDA_LAUNCHED();
    // cos (B, S) = ehat what^T, into the probs slot
    spk_sgemm_cuda('N', 'T', B, S, E, 1.0f, c.ehat, E, c.what, E, 0.0f, c.probs, S);
    float* row_loss = workspace;
    int* row_ok = (int*)(workspace + B);
    aam_row_kernel<<<spk_rows_grid((size_t)B), SPK_CUDA_THREADS, 0, st>>>(
        c.probs, c.cos_target, row_loss, row_ok, labels, S, scale, margin_of(margin));
    SPK_CUDA_LAUNCHED();
    finalize_kernel<<<1, SPK_CUDA_THREADS, 0, st>>>(loss, correct, row_loss, row_ok, B);
    SPK_CUDA_LAUNCHED();
}

extern "C" void aam_softmax_backward_cuda(float* demb, float* dw, float dloss, const float* cache,
                                          const float* emb, const float* w, const int* labels,
                                          int B, int E, int S, float margin, float scale,
                                          float* workspace) {
    (void)emb;
    (void)w;  // the normalized copies and norms are in the cache
    SPK_ASSERT(B > 0 && E > 0 && S > 0);
    if (!demb && !dw) return;
    cudaStream_t st = spk_cuda_stream_checked();
    const aam_cache_t c = aam_cache_view(cache, B, E, S);
    float* dcos = workspace;               // (B, S)
    float* dehat = dcos + (size_t)B * S;   // (B, E)
    float* dwhat = dehat + (size_t)B * E;  // (S, E)
    const float g = dloss / (float)B * scale;
    const size_t n = (size_t)B * S;
    aam_dcos_kernel<<<spk_grid(n), SPK_CUDA_THREADS, 0, st>>>(dcos, c.probs, c.cos_target, labels,
                                                              g, n, S, margin_of(margin));
    SPK_CUDA_LAUNCHED();
    if (demb) {
        spk_sgemm_cuda('N', 'N', B, E, S, 1.0f, dcos, S, c.what, E, 0.0f, dehat, E);
        normalize_rows_bwd_kernel<<<spk_rows_grid((size_t)B), SPK_CUDA_THREADS, 0, st>>>(
            demb, dehat, c.ehat, c.enorm, E);
        SPK_CUDA_LAUNCHED();
    }
    if (dw) {
        spk_sgemm_cuda('T', 'N', S, E, B, 1.0f, dcos, S, c.ehat, E, 0.0f, dwhat, E);
        normalize_rows_bwd_kernel<<<spk_rows_grid((size_t)S), SPK_CUDA_THREADS, 0, st>>>(
            dw, dwhat, c.what, c.wnorm, E);
        SPK_CUDA_LAUNCHED();
    }
}
