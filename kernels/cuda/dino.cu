// DINO cross-entropy (kernels/dino.h), the steps of kernels/cpu/dino.c: one block per teacher row
// (its softmax into the workspace), one block per student row (its loss over its teacher views
// and its gradient), then one thread per utterance for the mean of its student rows' losses in
// view order. Sums are compensated, by launch.cuh's fixed trees: the same bits on every run,
// whatever B.
#include "kernels/cuda/launch.cuh"

namespace {

// p = softmax((t - centre) * inv_tau) of one row per block
__global__ void dino_teacher_kernel(float *pt, const float *t, const float *centre, int K, float inv_tau) {
    __shared__ float shf[SPK_CUDA_THREADS];
    __shared__ spk_fsum shd[SPK_CUDA_THREADS];
    const size_t r = blockIdx.x;
    float *p = pt + r * K;
    const float *tr = t + r * K;
    float mx = -INFINITY;
    SPK_ROW_LOOP(k, K) {
        const float b = (tr[k] - centre[k]) * inv_tau;
        p[k] = b;
        mx = fmaxf(mx, b);
    }
    mx = spk_block_max(mx, shf);
    spk_fsum acc = spk_fsum_zero();
    SPK_ROW_LOOP(k, K) {
        const float e = spk_expf(p[k] - mx);
        p[k] = e;
        spk_fsum_add(&acc, e);
    }
    const float inv = (float)(1.0 / spk_fsum_double(spk_block_sum(acc, shd)));
    SPK_ROW_LOOP(k, K) p[k] *= inv;
}

// Student row r = u*V + v per block: ds = cn ps - c T with T = sum_{g != v} pt[u,g] (added in g
// order); view_loss[r] = -sum_k T[k] log ps[k]
__global__ void dino_student_kernel(float *ds, float *view_loss, const float *s, const float *pt, int V, int Vg, int K,
                                    float inv_tau, float c) {
    __shared__ float shf[SPK_CUDA_THREADS];
    __shared__ spk_fsum shd[SPK_CUDA_THREADS];
    const size_t r = blockIdx.x;
    const int u = (int)(r / V), v = (int)(r - (size_t)u * V);
    const float *sr = s + r * K, *pu = pt + (size_t)u * Vg * K;
    float *dr = ds + r * K;
    float mx = -INFINITY;
    SPK_ROW_LOOP(k, K) mx = fmaxf(mx, sr[k] * inv_tau);
    mx = spk_block_max(mx, shf);
    spk_fsum acc = spk_fsum_zero();
    SPK_ROW_LOOP(k, K) spk_fsum_add(&acc, spk_expf(sr[k] * inv_tau - mx));
    const double sum = spk_fsum_double(spk_block_sum(acc, shd));
    const float log_sum = (float)log(sum), inv_sum = (float)(1.0 / sum);
    const int nv = Vg - (v < Vg);
    const float cn = c * (float)nv;
    spk_fsum tlp = spk_fsum_zero();  // sum_k T[k] log ps[k]
    SPK_ROW_LOOP(k, K) {
        float T = 0.0f;
        bool first = true;
        for (int g = 0; g < Vg; g++) {
            if (g == v) continue;
            const float p = pu[(size_t)g * K + k];
            T = first ? p : T + p;
            first = false;
        }
        const float a = sr[k] * inv_tau - mx;
        dr[k] = cn * (spk_expf(a) * inv_sum) - c * T;
        spk_fsum_add(&tlp, T * (a - log_sum));
    }
    const float total = spk_fsum_value(spk_block_sum(tlp, shd));
    if (threadIdx.x == 0) view_loss[r] = -total;
}

// row_loss[u] = the sum of utterance u's V view losses, in view order, / P
__global__ void dino_rows_kernel(float *row_loss, const float *view_loss, int B, int V, int P) {
    SPK_GRID_LOOP(u, (size_t)B) {
        double sum = 0.0;
        for (int v = 0; v < V; v++) sum += view_loss[u * V + v];
        row_loss[u] = (float)(sum / P);
    }
}

}  // namespace

extern "C" size_t dino_xent_workspace_floats_cuda(int B, int V, int Vg, int K) {
    return dino_xent_work_floats(B, V, Vg, K);
}

extern "C" void dino_xent_cuda(float *row_loss, float *ds, const float *s, const float *t, const float *centre, int B,
                               int V, int Vg, int K, float inv_tau_s, float inv_tau_t, float grad_scale, float *work) {
    SPK_ASSERT(B > 0 && V >= 2 && Vg >= 1 && Vg <= V && K > 0);
    const int P = Vg * (V - 1);
    float *pt = work, *view_loss = work + (size_t)B * Vg * K;
    const float c = (float)((double)grad_scale * inv_tau_s / P);
    SPK_LAUNCH(dino_teacher_kernel, spk_rows_grid((size_t)B * Vg), pt, t, centre, K, inv_tau_t);
    SPK_LAUNCH(dino_student_kernel, spk_rows_grid((size_t)B * V), ds, view_loss, s, pt, V, Vg, K, inv_tau_s, c);
    SPK_LAUNCH(dino_rows_kernel, spk_grid((size_t)B), row_loss, view_loss, B, V, P);
}
