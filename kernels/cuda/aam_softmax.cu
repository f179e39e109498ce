// Additive angular margin head (kernels/aam_softmax.h), the CPU's algorithm on the GPU: rows
// normalised by one block each, cosines and gradients by cuBLAS GEMMs, one block per row for
// logits -> softmax -> loss (the block softmax row of launch.cuh), then the fixed-order batch
// sum of rows.cuh. Layouts: kernels/aam_layout.h (the forward also keeps its per-row results,
// row_loss (B) | row_ok (B ints), in the workspace); margin math: kernels/elementwise_math.h.
#include "kernels/aam_layout.h"
#include "kernels/cuda/rows.cuh"
#include "kernels/exact_sum_math.h"

namespace {

const float kNormEps = AAM_NORM_EPS;

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

// A group of `group` samples' gradient of the class weights, one block per class row s, into
// dw_tmp: dwhat[s] = the sum over the group of dcos[b, s] ehat_b (in sample order), through the
// normalisation of row s (normalize_rows_bwd_kernel's math; linear, so once per group). dcos and
// ehat start at the group's first sample.
__global__ void aam_group_dw_kernel(float *dw_tmp, const float *dcos, const float *ehat, const float *what,
                                    const float *wnorm, int E, int S, int group) {
    __shared__ double sh[SPK_CUDA_THREADS];
    const size_t s = blockIdx.x;
    const float *yr = what + s * E;
    float *d = dw_tmp + s * E;
    const float n = wnorm[s];
    double acc = 0.0;
    SPK_ROW_LOOP(e, E) {
        float a = 0.0f;
        for (int b = 0; b < group; b++) a += dcos[(size_t)b * S + s] * ehat[(size_t)b * E + e];
        d[e] = a;
        acc += yr[e] * a;
    }
    const float dot = (float)spk_block_sum(acc, sh);  // (its barrier orders the writes above)
    if (n > kNormEps) {
        const float inv = 1.0f / n;
        SPK_ROW_LOOP(e, E) d[e] = (d[e] - yr[e] * dot) * inv;
    } else {
        SPK_ROW_LOOP(e, E) d[e] = d[e] / kNormEps;
    }
}

// dw (S x E exact sums) += each group of `group` samples' class-weight gradient as one term
// (dcos sample-major, (B, S)).
void class_grads_exact(xsum_t dw, float *dw_tmp, const float *dcos, const aam_cache_t *c, int B, int E, int S,
                       int group) {
    for (int b0 = 0; b0 < B; b0 += group) {
        SPK_LAUNCH(aam_group_dw_kernel, spk_rows_grid((size_t)S), dw_tmp, dcos + (size_t)b0 * S,
                   c->ehat + (size_t)b0 * E, c->what, c->wnorm, E, S, group);
        xsum_add_cuda(dw, dw_tmp, 1, (int64_t)S * E, 1);
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
    class_grads_exact(dw, dw_tmp, ws.dcos, &c, B, E, S, group);
}

// ---- the head sharded over classes (kernels/aam_shard.h) ----------------------------------------

namespace {

// One block per row g of cos (G, S), in place: logits, the slice's softmax and the row's
// results (shard_row of the CPU). Without `softmax` (the invariant mode) the logits stay and
// rows[g].lse is their largest.
__global__ void aam_shard_row_kernel(float *probs, float *cos_target, float *rows, int *argmax, const int *labels,
                                     int S, int first, float scale, spk_aam_margin_t mc, int softmax) {
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
    const float lse = softmax ? mx + logf(spk_block_softmax_row(row, row, S, mx, sh.d)) : mx;
    if (threadIdx.x == 0) {
        float *out = rows + g * AAM_SHARD_ROW;
        out[AAM_SHARD_LSE] = lse;
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
        dcos[i] =
            j == labels[b] - first ? (factor[b] * p - 1.0f) * gs * spk_aam_dphi(cos_target[b], mc) : gs * factor[b] * p;
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
               scale, spk_aam_margin(margin), 1);
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

// ---- the sharded head in the world-size-invariant mode (kernels/aam_shard.h) ----------------------
// The logits stay sample-major, (G, S), as in the plain kernels (their layout in the cache is
// each backend's own). Every number here is a function of one sample and one class (a cosine is
// one thread's dot product, in order over E) or of one block of classes summed in class order,
// and the sums over classes are exact, so no slice boundary can change a bit.

namespace {

__global__ void shard_cos_fixed_kernel(float *cos, const float *ehat, const float *what, int G, int E, int S) {
    SPK_GRID_LOOP(i, (size_t)G * S) {
        const size_t g = i / S, j = i - g * S;
        const float *a = ehat + g * E, *b = what + j * E;
        float acc = 0.0f;
        for (int e = 0; e < E; e++) acc = fmaf(a[e], b[e], acc);
        cos[i] = acc;
    }
}

// One block per sample g: each thread adds exp(logit[g, j] - mx[g]) of its classes j into a sum
// of its own, the block's sums merge in shared memory, then into sums[g]. Exact sums merge to the
// same bits in any order, so this is the one-thread sum's result, with the block's width.
__global__ void shard_expsum_kernel(xsum_t sums, const float *mx, const float *logits, int S) {
    __shared__ int8_t sb[SPK_CUDA_THREADS];
    __shared__ int64_t shi[SPK_CUDA_THREADS], slo[SPK_CUDA_THREADS];
    const size_t g = blockIdx.x;
    const int t = threadIdx.x;
    const float *l = logits + g * S;
    int J = 0;
    int64_t hi = 0, lo = 0;
    SPK_ROW_LOOP(j, S) xsum_deposit(&J, &hi, &lo, (double)expf(l[j] - mx[g]));
    sb[t] = (int8_t)J;
    shi[t] = hi;
    slo[t] = lo;
    __syncthreads();
    for (int w = SPK_CUDA_THREADS / 2; w > 0; w /= 2) {
        if (t < w) {
            int Jt = sb[t];
            xsum_merge_into(&Jt, &shi[t], &slo[t], sb[t + w], shi[t + w], slo[t + w]);
            sb[t] = (int8_t)Jt;
        }
        __syncthreads();
    }
    if (t == 0) {
        int Jg = sums.bin[g];
        xsum_merge_into(&Jg, &sums.hi[g], &sums.lo[g], sb[0], shi[0], slo[0]);
        sums.bin[g] = (int8_t)Jg;
    }
}

// dcos (G, S) from the whole head's probabilities exp(logit - mx) / sum.
__global__ void shard_dcos_exact_kernel(float *dcos, const float *logits, const float *mx, const float *sum,
                                        const float *cos_target, const int *labels, float gs, int G, int S, int first,
                                        spk_aam_margin_t mc) {
    SPK_GRID_LOOP(i, (size_t)G * S) {
        const size_t b = i / S;
        const int j = (int)(i - b * S);
        const float p = expf(logits[i] - mx[b]) / sum[b];
        dcos[i] = j == labels[b] - first ? gs * (p - 1.0f) * spk_aam_dphi(cos_target[b], mc) : gs * p;
    }
}

// One thread per (g, e): for each block of classes, sum_j dcos[g, j] what[j, e] in class order,
// one term of dehat[g, e]. Row j's class: cls[j], or first + j.
__global__ void shard_dehat_exact_kernel(xsum_t dehat, const float *dcos, const float *what, const int *cls, int G,
                                         int E, int S, int first, int block) {
    SPK_GRID_LOOP(i, (size_t)G * E) {
        const size_t g = i / E, e = i - g * E;
        int J = dehat.bin[i];
        int64_t hi = dehat.hi[i], lo = dehat.lo[i];
        for (int j = 0; j < S;) {
            const int64_t b = (cls ? cls[j] : (int64_t)first + j) / block;
            float v = 0.0f;
            for (; j < S && (cls ? cls[j] : (int64_t)first + j) / block == b; j++)
                v += dcos[g * S + j] * what[(size_t)j * E + e];
            xsum_deposit(&J, &hi, &lo, (double)v);
        }
        dehat.bin[i] = (int8_t)J;
        dehat.hi[i] = hi;
        dehat.lo[i] = lo;
    }
}

}  // namespace

extern "C" void aam_shard_forward_fixed_cuda(float *rows, int *argmax, float *cache, const float *emb, const float *w,
                                             const int *labels, const int * /*cls*/, int G, int E, int S, int first,
                                             int block, float margin, float scale) {
    SPK_ASSERT(G > 0 && E > 0 && S > 0 && block > 0);
    const aam_cache_t c = aam_cache_view(cache, G, E, S);
    SPK_LAUNCH(normalize_rows_kernel, spk_rows_grid((size_t)G), c.ehat, c.enorm, emb, E);
    SPK_LAUNCH(normalize_rows_kernel, spk_rows_grid((size_t)S), c.what, c.wnorm, w, E);
    SPK_LAUNCH(shard_cos_fixed_kernel, spk_grid((size_t)G * S), c.probs, c.ehat, c.what, G, E, S);
    SPK_LAUNCH(aam_shard_row_kernel, spk_rows_grid((size_t)G), c.probs, c.cos_target, rows, argmax, labels, S, first,
               scale, spk_aam_margin(margin), 0);
}

extern "C" void aam_shard_expsum_exact_cuda(xsum_t sums, const float *mx, const float *cache, int G, int E, int S) {
    SPK_ASSERT(G > 0 && E > 0 && S > 0);
    SPK_LAUNCH(shard_expsum_kernel, spk_rows_grid((size_t)G), sums, mx, aam_cache_view(cache, G, E, S).probs, S);
}

extern "C" void aam_shard_backward_exact_cuda(xsum_t dehat, float *dw_tmp, xsum_t dw, const float *mx_sum, float g,
                                              const float *cache, const int *labels, const int *cls, int G, int E,
                                              int S, int first, int block, float margin, float scale, float *workspace,
                                              int group) {
    SPK_ASSERT(G > 0 && E > 0 && S > 0 && block > 0 && group > 0 && G % group == 0);
    const aam_cache_t c = aam_cache_view(cache, G, E, S);
    const aam_workspace_t ws = aam_workspace_view(workspace, G, E, S);
    SPK_LAUNCH(shard_dcos_exact_kernel, spk_grid((size_t)G * S), ws.dcos, c.probs, mx_sum, mx_sum + G, c.cos_target,
               labels, g * scale, G, S, first, spk_aam_margin(margin));
    if (!xsum_empty(dehat))
        SPK_LAUNCH(shard_dehat_exact_kernel, spk_grid((size_t)G * E), dehat, ws.dcos, c.what, cls, G, E, S, first,
                   block);
    if (xsum_empty(dw)) return;
    SPK_ASSERT(dw_tmp != nullptr);
    class_grads_exact(dw, dw_tmp, ws.dcos, &c, G, E, S, group);
}
