// Additive angular margin head (kernels/aam_softmax.h), the CPU's algorithm on the GPU: rows
// normalised by one block each, cosines and gradients by cuBLAS GEMMs, one block per row for
// logits -> softmax -> loss (the block softmax row of launch.cuh), then the fixed-order batch
// sum of rows.cuh. Layouts: kernels/aam_layout.h (the forward also keeps its per-row results,
// row_loss (B) | row_ok (B ints), in the workspace); margin math: kernels/elementwise_math.h.
#include "kernels/aam_layout.h"
#include "kernels/cuda/rows.cuh"

namespace {

const float kNormEps = 1e-12f;  // F.normalize default

// out = in / max(|in|, eps) row by row; norm = |in| (unclamped). One block per row.
__global__ void normalize_rows_kernel(float *out, float *norm, const float *in, int E) {
    __shared__ spk_fsum sh[SPK_CUDA_THREADS];
    const size_t r = blockIdx.x;
    const float *x = in + r * E;
    float *y = out + r * E;
    spk_fsum acc = spk_fsum_zero();
    SPK_ROW_LOOP(e, E) spk_fsum_add(&acc, x[e] * x[e]);
    const float n = sqrtf(spk_fsum_value(spk_block_sum(acc, sh)));
    if (threadIdx.x == 0) norm[r] = n;
    const float inv = 1.0f / (n > kNormEps ? n : kNormEps);
    SPK_ROW_LOOP(e, E) y[e] = x[e] * inv;
}

// Backward of normalize_rows_kernel: dx += (g - y (y.g)) / |x| where |x| > eps, else g / eps.
__global__ void normalize_rows_bwd_kernel(float *dx, const float *g, const float *y, const float *norm, int E) {
    __shared__ spk_fsum sh[SPK_CUDA_THREADS];
    const size_t r = blockIdx.x;
    const float *gr = g + r * E;
    const float *yr = y + r * E;
    float *d = dx + r * E;
    const float n = norm[r];  // the same for the whole block, so the branch is uniform
    if (n > kNormEps) {
        spk_fsum acc = spk_fsum_zero();
        SPK_ROW_LOOP(e, E) spk_fsum_add(&acc, yr[e] * gr[e]);
        const float dot = spk_fsum_value(spk_block_sum(acc, sh));
        const float inv = 1.0f / n;
        SPK_ROW_LOOP(e, E) d[e] += (gr[e] - yr[e] * dot) * inv;
    } else {
        SPK_ROW_LOOP(e, E) d[e] += gr[e] / kNormEps;
    }
}

// One block per row b of cos (B, S), in place in the probs slot: cos -> logits (scale * cos,
// scale * phi at the label) -> softmax. Also the row's loss, argmax(cos) hit and cos_target.
__global__ void aam_row_kernel(float *probs, float *cos_target, float *row_loss, int *row_ok, const int *labels, int S,
                               float scale, spk_aam_margin_t mc) {
    __shared__ spk_row_shared_t sh;
    const size_t b = blockIdx.x;
    const int y = labels[b];
    spk_check_label(y, S);
    float *row = probs + b * S;
    const float ct = row[y];  // every thread reads it before the argmax's barriers
    const int am = spk_block_row_argmax(row, S, sh.f, sh.i);
    // From here each thread reads and writes only its own positions j.
    const float zy = scale * spk_aam_phi(ct, mc);
    float mv = -INFINITY;
    SPK_ROW_LOOP(j, S) {
        const float z = j == y ? zy : row[j] * scale;
        row[j] = z;
        mv = fmaxf(mv, z);
    }
    const float mx = spk_block_max(mv, sh.f);
    const float s = spk_block_softmax_row(row, row, S, mx, sh.d);
    if (threadIdx.x == 0) {
        cos_target[b] = ct;
        row_loss[b] = mx + logf(s) - zy;
        row_ok[b] = am == y;
    }
}

// dcos = d loss / d cos: g * probs, and g * (p - 1) * dphi/dcos at the label (g = dloss/B * s)
__global__ void aam_dcos_kernel(float *dcos, const float *probs, const float *cos_target, const int *labels, float g,
                                size_t n, int S, spk_aam_margin_t mc) {
    SPK_GRID_LOOP(i, n) {
        const size_t b = i / S;
        const int j = (int)(i - b * S);
        const float p = probs[i];
        dcos[i] = j == labels[b] ? g * (p - 1.0f) * spk_aam_dphi(cos_target[b], mc) : g * p;
    }
}

}  // namespace

extern "C" size_t aam_softmax_cache_floats_cuda(int B, int E, int S) { return aam_cache_floats(B, E, S); }

// The backward's (B*S + B*E + S*E) always covers the forward's 2B.
extern "C" size_t aam_softmax_workspace_floats_cuda(int B, int E, int S) { return aam_workspace_floats(B, E, S); }

extern "C" void aam_softmax_forward_cuda(float *loss, int *correct, float *cache, const float *emb, const float *w,
                                         const int *labels, int B, int E, int S, float margin, float scale,
                                         float *workspace) {
    SPK_ASSERT(B > 0 && E > 0 && S > 0);
    const aam_cache_t c = aam_cache_view(cache, B, E, S);
    SPK_LAUNCH(normalize_rows_kernel, spk_rows_grid((size_t)B), c.ehat, c.enorm, emb, E);
    SPK_LAUNCH(normalize_rows_kernel, spk_rows_grid((size_t)S), c.what, c.wnorm, w, E);
    // cos (B, S) = ehat what^T, into the probs slot
    spk_sgemm_cuda('N', 'T', B, S, E, 1.0f, c.ehat, E, c.what, E, 0.0f, c.probs, S);
    float *row_loss = workspace;
    int *row_ok = (int *)(workspace + B);
    SPK_LAUNCH(aam_row_kernel, spk_rows_grid((size_t)B), c.probs, c.cos_target, row_loss, row_ok, labels, S, scale,
               spk_aam_margin(margin));
    spk_row_losses_cuda(loss, correct, row_loss, row_ok, B);
}

extern "C" void aam_softmax_backward_cuda(float *demb, float *dw, float dloss, const float *cache, const float *emb,
                                          const float *w, const int *labels, int B, int E, int S, float margin,
                                          float scale, float *workspace) {
    (void)emb;
    (void)w;  // the normalized copies and norms are in the cache
    SPK_ASSERT(B > 0 && E > 0 && S > 0);
    if (!demb && !dw) return;
    const aam_cache_t c = aam_cache_view(cache, B, E, S);
    const aam_workspace_t ws = aam_workspace_view(workspace, B, E, S);
    const float g = dloss / (float)B * scale;
    const size_t n = (size_t)B * S;
    SPK_LAUNCH(aam_dcos_kernel, spk_grid(n), ws.dcos, c.probs, c.cos_target, labels, g, n, S, spk_aam_margin(margin));
    if (demb) {
        spk_sgemm_cuda('N', 'N', B, E, S, 1.0f, ws.dcos, S, c.what, E, 0.0f, ws.dehat, E);
        SPK_LAUNCH(normalize_rows_bwd_kernel, spk_rows_grid((size_t)B), demb, ws.dehat, c.ehat, c.enorm, E);
    }
    if (dw) {
        spk_sgemm_cuda('T', 'N', S, E, B, 1.0f, ws.dcos, S, c.ehat, E, 0.0f, ws.dwhat, E);
        SPK_LAUNCH(normalize_rows_bwd_kernel, spk_rows_grid((size_t)S), dw, ws.dwhat, c.what, c.wnorm, E);
    }
}

// ---- the world-size-invariant mode (kernels/aam_softmax.h) --------------------------------------

namespace {

// Sample b's gradient of the class weights, one block per class row s, into dw_tmp (added to it
// when `add`, else from zero): dwhat[s] = dcos[b, s] ehat_b through the normalisation of row s
// (normalize_rows_bwd_kernel's math).
__global__ void aam_sample_dw_kernel(float *dw_tmp, const float *dcos_b, const float *ehat_b, const float *what,
                                     const float *wnorm, int E, int add) {
    __shared__ double sh[SPK_CUDA_THREADS];
    const size_t s = blockIdx.x;
    const float gs = dcos_b[s];
    const float *yr = what + s * E;
    float *d = dw_tmp + s * E;
    const float n = wnorm[s];
    if (n > kNormEps) {
        double acc = 0.0;
        SPK_ROW_LOOP(e, E) acc += yr[e] * (gs * ehat_b[e]);
        const float dot = (float)spk_block_sum(acc, sh);
        const float inv = 1.0f / n;
        SPK_ROW_LOOP(e, E) d[e] = (add ? d[e] : 0.0f) + (gs * ehat_b[e] - yr[e] * dot) * inv;
    } else {
        SPK_ROW_LOOP(e, E) d[e] = (add ? d[e] : 0.0f) + gs * ehat_b[e] / kNormEps;
    }
}

}  // namespace

extern "C" void aam_softmax_forward_rows_cuda(float *row_loss, int *correct, float *cache, const float *emb,
                                              const float *w, const int *labels, int B, int E, int S, float margin,
                                              float scale, float *workspace) {
    SPK_ASSERT(B > 0 && E > 0 && S > 0);
    const aam_cache_t c = aam_cache_view(cache, B, E, S);
    SPK_LAUNCH(normalize_rows_kernel, spk_rows_grid((size_t)B), c.ehat, c.enorm, emb, E);
    SPK_LAUNCH(normalize_rows_kernel, spk_rows_grid((size_t)S), c.what, c.wnorm, w, E);
    spk_sgemm_rows_cuda('N', 'T', B, S, E, 1.0f, c.ehat, E, c.what, E, 0.0f, c.probs, S);
    int *row_ok = (int *)workspace;
    float *unused = workspace + B;  // the mean loss of spk_row_losses_kernel
    SPK_LAUNCH(aam_row_kernel, spk_rows_grid((size_t)B), c.probs, c.cos_target, row_loss, row_ok, labels, S, scale,
               spk_aam_margin(margin));
    spk_row_losses_cuda(unused, correct, row_loss, row_ok, B);
}

// emb and w: their normalized copies and norms are in the cache.
extern "C" void aam_softmax_backward_exact_cuda(float *demb, float *dw_tmp, xsum_t dw, float dloss, const float *cache,
                                                const float * /*emb*/, const float * /*w*/, const int *labels, int B,
                                                int E, int S, float margin, float scale, float *workspace, int group) {
    SPK_ASSERT(B > 0 && E > 0 && S > 0 && group > 0 && B % group == 0);
    const size_t n = (size_t)B * S;
    const aam_workspace_t ws = aam_workspace_view(workspace, B, E, S);
    const aam_cache_t c = aam_cache_view(cache, B, E, S);
    SPK_LAUNCH(aam_dcos_kernel, spk_grid(n), ws.dcos, c.probs, c.cos_target, labels, dloss * scale, n, S,
               spk_aam_margin(margin));  // a sum over samples: no 1/B
    if (demb) {
        spk_sgemm_rows_cuda('N', 'N', B, E, S, 1.0f, ws.dcos, S, c.what, E, 0.0f, ws.dehat, E);
        SPK_LAUNCH(normalize_rows_bwd_kernel, spk_rows_grid((size_t)B), demb, ws.dehat, c.ehat, c.enorm, E);
    }
    if (xsum_empty(dw)) return;
    SPK_ASSERT(dw_tmp != nullptr);
    for (int b = 0; b < B; b++) {  // a group's gradients add up in dw_tmp, then one term
        SPK_LAUNCH(aam_sample_dw_kernel, spk_rows_grid((size_t)S), dw_tmp, ws.dcos + (size_t)b * S,
                   c.ehat + (size_t)b * E, c.what, c.wnorm, E, b % group != 0);
        if (b % group == group - 1) xsum_add_cuda(dw, dw_tmp, 1, (int64_t)S * E, 1);
    }
}

// ---- the head sharded over classes (kernels/aam_shard.h) ----------------------------------------

namespace {

// One block per row g of cos (G, S), in place: logits, the slice's softmax and the row's
// results (shard_row of the CPU).
__global__ void aam_shard_row_kernel(float *probs, float *cos_target, float *rows, int *argmax, const int *labels,
                                     int S, int first, float scale, spk_aam_margin_t mc) {
    __shared__ spk_row_shared_t sh;
    const size_t g = blockIdx.x;
    const int y = labels[g] - first;
    const int here = y >= 0 && y < S;
    float *row = probs + g * S;
    const float ct = here ? row[y] : 0.0f;  // every thread reads it before the argmax's barriers
    const int am = spk_block_row_argmax(row, S, sh.f, sh.i);
    const float cmax = row[am];
    __syncthreads();  // everyone has read row[am] before any thread rewrites its positions
    const float zy = scale * spk_aam_phi(ct, mc);
    float mv = -INFINITY;
    SPK_ROW_LOOP(j, S) {
        const float z = here && j == y ? zy : row[j] * scale;
        row[j] = z;
        mv = fmaxf(mv, z);
    }
    const float mx = spk_block_max(mv, sh.f);
    const float s = spk_block_softmax_row(row, row, S, mx, sh.d);
    if (threadIdx.x == 0) {
        float *out = rows + g * AAM_SHARD_ROW;
        out[AAM_SHARD_LSE] = mx + logf(s);
        out[AAM_SHARD_TARGET] = here ? zy : 0.0f;
        out[AAM_SHARD_COSMAX] = cmax;
        argmax[g] = first + am;
        cos_target[g] = ct;
    }
}

// dcos = g * s * (factor * probs), minus the label's 1 times dphi/dcos where the label is here.
__global__ void aam_shard_dcos_kernel(float *dcos, const float *probs, const float *factor, const float *cos_target,
                                      const int *labels, float gs, size_t n, int S, int first, spk_aam_margin_t mc) {
    SPK_GRID_LOOP(i, n) {
        const size_t b = i / S;
        const int j = (int)(i - b * S);
        const float p = probs[i];
        dcos[i] = j == labels[b] - first ? (factor[b] * p - 1.0f) * gs * spk_aam_dphi(cos_target[b], mc)
                                         : gs * factor[b] * p;
    }
}

}  // namespace

extern "C" size_t aam_shard_cache_floats_cuda(int G, int E, int S) { return aam_cache_floats(G, E, S); }

extern "C" size_t aam_shard_workspace_floats_cuda(int G, int E, int S) { return aam_workspace_floats(G, E, S); }

extern "C" void aam_shard_forward_cuda(float *rows, int *argmax, float *cache, const float *emb, const float *w,
                                       const int *labels, int G, int E, int S, int first, float margin, float scale) {
    SPK_ASSERT(G > 0 && E > 0 && S > 0);
    const aam_cache_t c = aam_cache_view(cache, G, E, S);
    SPK_LAUNCH(normalize_rows_kernel, spk_rows_grid((size_t)G), c.ehat, c.enorm, emb, E);
    SPK_LAUNCH(normalize_rows_kernel, spk_rows_grid((size_t)S), c.what, c.wnorm, w, E);
    spk_sgemm_cuda('N', 'T', G, S, E, 1.0f, c.ehat, E, c.what, E, 0.0f, c.probs, S);
    SPK_LAUNCH(aam_shard_row_kernel, spk_rows_grid((size_t)G), c.probs, c.cos_target, rows, argmax, labels, S, first,
               scale, spk_aam_margin(margin));
}

extern "C" void aam_shard_backward_cuda(float *demb, float *dw, const float *factor, float g, const float *cache,
                                        const int *labels, int G, int E, int S, int first, float margin, float scale,
                                        float *workspace) {
    SPK_ASSERT(G > 0 && E > 0 && S > 0);
    if (!demb && !dw) return;
    const aam_cache_t c = aam_cache_view(cache, G, E, S);
    const aam_workspace_t ws = aam_workspace_view(workspace, G, E, S);
    const size_t n = (size_t)G * S;
    SPK_LAUNCH(aam_shard_dcos_kernel, spk_grid(n), ws.dcos, c.probs, factor, c.cos_target, labels, g * scale, n, S,
               first, spk_aam_margin(margin));
    if (demb) {
        spk_sgemm_cuda('N', 'N', G, E, S, 1.0f, ws.dcos, S, c.what, E, 0.0f, ws.dehat, E);
        vec_zero_cuda(demb, (size_t)G * E);
        SPK_LAUNCH(normalize_rows_bwd_kernel, spk_rows_grid((size_t)G), demb, ws.dehat, c.ehat, c.enorm, E);
    }
    if (dw) {
        spk_sgemm_cuda('T', 'N', S, E, G, 1.0f, ws.dcos, S, c.ehat, E, 0.0f, ws.dwhat, E);
        SPK_LAUNCH(normalize_rows_bwd_kernel, spk_rows_grid((size_t)S), dw, ws.dwhat, c.what, c.wnorm, E);
    }
}
