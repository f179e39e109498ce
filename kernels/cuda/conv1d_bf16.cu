// Conv1d with bf16 operands (kernels/conv1d_bf16.h) as im2col + cuBLAS bf16 GEMMs
// (spk_gemm_bf16*_cuda: bf16 inputs, float32 accumulation and output, tensor cores). x and dy
// are rounded into the folded layout (C, B*T) (xh is the contract's; dyf the workspace's):
//   forward      y_b = W col_b for every sample in one strided-batched GEMM (col_b is sample b's
//                column block of xh for K = 1), then the bias;
//   backward     one GEMM each: dW += dyf colf^T with colf (Cin*K, B*T) the im2col of the
//                whole batch (xh itself for K = 1), and dcol = W^T dyf, gathered back onto dx
//                (the reflect padding's adjoint).
// Every output element is summed by one thread or one GEMM in a fixed order: no atomics.
//
// workspace = [ col: Cin*K*B*T bf16 ][ dyf: Cout*B*T bf16 ][ dcol: Cin*K*B*T float32 ], each
// region rounded up to 256 bytes.
#include "kernels/cuda/conv1d_common.cuh"
#include "kernels/cuda/group_calls.cuh"
#include "kernels/cuda/launch.cuh"

namespace {

size_t round256(size_t bytes) { return (bytes + 255) & ~(size_t)255; }

void check_shape(int B, int Cin, int Cout, int T, int K, int dilation) {
    conv_check_contract(B, Cin, Cout, T, K, dilation);
    SPK_ASSERT((size_t)B * T < 0x7fffffffu && (size_t)Cin * K < 0x7fffffffu);  // cuBLAS dimensions are int
}

struct Regions {
    spk_bf16 *col;  // (Cin*K, B*T) folded, or (B, Cin*K, T) per sample
    spk_bf16 *dyf;  // (Cout, B*T)
    float *dcol;    // (Cin*K, B*T)
};

Regions regions(float *workspace, int B, int Cin, int Cout, int T, int K) {
    const size_t bt = (size_t)B * T, ck = (size_t)Cin * K;
    char *p = (char *)workspace;
    Regions r;
    r.col = (spk_bf16 *)p;
    p += round256(ck * bt * sizeof(spk_bf16));
    r.dyf = (spk_bf16 *)p;
    p += round256((size_t)Cout * bt * sizeof(spk_bf16));
    r.dcol = (float *)p;
    return r;
}

// col[b * sb + (ci*K + k) * sr + t] = x[ci, b*T + r(t + k*d - p)] from the folded x: per sample
// (sb = Cin*K*T, sr = T) or folded (sb = T, sr = B*T).
__global__ void im2col_kernel(spk_bf16 *col, const spk_bf16 *x, int B, int Cin, int T, int K, int d, size_t sb,
                              size_t sr) {
    const int p = d * (K - 1) / 2;
    SPK_GRID_LOOP(i, (size_t)B * Cin * K * T) {
        const int t = (int)(i % T);
        size_t rest = i / T;
        const int k = (int)(rest % K);
        rest /= K;
        const size_t ci = rest % Cin, b = rest / Cin;
        int u = t + k * d - p;
        u = u < 0 ? -u : (u >= T ? 2 * (T - 1) - u : u);
        col[b * sb + (ci * K + k) * sr + t] = x[(ci * B + b) * T + u];
    }
}

// dx[b, ci, u] += sum over (k, t) with r(t + k*d - p) = u of dcol[ci*K + k, b*T + t]: for each k
// the direct source t = u - off, the left reflection (t + off = -u) and the right one
// (t + off = 2(T-1) - u), each taken when it lies inside the row. One thread per element of
// dx, summing in k order.
__global__ void col2im_gather_kernel(float *dx, const float *dcol, int B, int Cin, int T, int K, int d) {
    const int p = d * (K - 1) / 2;
    const size_t bt = (size_t)B * T;
    SPK_GRID_LOOP(i, (size_t)B * Cin * T) {
        const int u = (int)(i % T);
        const size_t bc = i / T, ci = bc % Cin, b = bc / Cin;
        float acc = 0.0f;
        for (int k = 0; k < K; k++) {
            const int off = k * d - p;
            const float *row = dcol + (ci * K + k) * bt + b * T;
            const int direct = u - off, left = -u - off, right = 2 * (T - 1) - u - off;
            if (direct >= 0 && direct < T) acc += row[direct];
            if (u > 0 && left >= 0 && left < T) acc += row[left];
            if (u < T - 1 && right >= 0 && right < T) acc += row[right];
        }
        dx[i] += acc;
    }
}

}  // namespace

extern "C" size_t conv1d_bf16_workspace_floats_cuda(int B, int Cin, int Cout, int T, int K, int dilation) {
    check_shape(B, Cin, Cout, T, K, dilation);
    const size_t bt = (size_t)B * T, ck = (size_t)Cin * K;
    const size_t bytes = round256(ck * bt * sizeof(spk_bf16)) + round256((size_t)Cout * bt * sizeof(spk_bf16)) +
                         round256(ck * bt * sizeof(float));
    return bytes / sizeof(float);
}

extern "C" void conv1d_bf16_forward_cuda(float *y, spk_bf16 *xh, const float *x, const spk_bf16 *w, const float *bias,
                                         int B, int Cin, int Cout, int T, int K, int dilation, float *workspace) {
    check_shape(B, Cin, Cout, T, K, dilation);
    if (x) bf16_fold_from_f32_cuda(xh, NULL, x, B, Cin, T);
    const int CK = Cin * K;
    const spk_bf16 *src = xh;  // sample b: columns b*T.. of the folded xh
    int ld = B * T;
    int64_t stride = T;
    if (K > 1) {
        const Regions r = regions(workspace, B, Cin, Cout, T, K);
        SPK_LAUNCH(im2col_kernel, spk_grid((size_t)CK * B * T), r.col, xh, B, Cin, T, K, dilation, (size_t)CK * T,
                   (size_t)T);
        src = r.col;
        ld = T;
        stride = (int64_t)CK * T;
    }
    spk_gemm_bf16_batched_cuda('N', 'N', Cout, T, CK, w, CK, 0, src, ld, stride, 0.0f, y, T, (int64_t)Cout * T, B);
    if (bias) conv_bias_forward(y, bias, B, Cout, T);
}

// dx overwritten: zeroed first, then the accumulating passes.
extern "C" void conv1d_bf16_backward_cuda(float *dx, int dx_accumulate, float *dw, float *dbias, const float *dy,
                                          const spk_bf16 *dyh, const spk_bf16 *xh, const spk_bf16 *w, int B, int Cin,
                                          int Cout, int T, int K, int dilation, float *workspace) {
    check_shape(B, Cin, Cout, T, K, dilation);
    SPK_ASSERT(!dyh != !dy && (!dyh || !dbias));
    if (dx && !dx_accumulate) spk_cuda_memset0(dx, (size_t)B * Cin * T * sizeof(float));
    if (!dx && !dw) {
        if (dbias) conv_bias_backward(dbias, dy, B, Cout, T);
        return;
    }
    const Regions r = regions(workspace, B, Cin, Cout, T, K);
    const int CK = Cin * K, BT = B * T;
    const spk_bf16 *dyf = dyh;
    if (!dyf) {
        bf16_fold_from_f32_cuda(r.dyf, dbias, dy, B, Cout, T);
        dyf = r.dyf;
    }
    if (dw) {
        const spk_bf16 *colf = xh;  // K = 1: the folded input is the im2col
        if (K > 1) {
            SPK_LAUNCH(im2col_kernel, spk_grid((size_t)CK * BT), r.col, xh, B, Cin, T, K, dilation, (size_t)T,
                       (size_t)BT);
            colf = r.col;
        }
        spk_gemm_bf16_cuda('N', 'T', Cout, CK, BT, dyf, BT, colf, BT, 1.0f, dw, CK);
    }
    if (dx) {
        spk_gemm_bf16_cuda('T', 'N', CK, BT, Cout, w, CK, dyf, BT, 0.0f, r.dcol, BT);
        SPK_LAUNCH(col2im_gather_kernel, spk_grid((size_t)B * Cin * T), dx, r.dcol, B, Cin, T, K, dilation);
    }
}

// ---- the world-size-invariant mode (kernels/conv1d_bf16.h) ---------------------------------------
// Every group of samples gets calls of its own, on the shapes of B = group (cuBLAS's algorithm
// may depend on the shape). A group's block of the mode's xh is the folded layout of those calls.

extern "C" size_t conv1d_bf16_workspace_floats_fixed_cuda(int B, int Cin, int Cout, int T, int K, int dilation) {
    return conv1d_bf16_workspace_floats_cuda(B, Cin, Cout, T, K, dilation);  // room for any group of B
}

extern "C" void conv1d_bf16_forward_grouped_cuda(float *y, spk_bf16 *xh, const float *x, const spk_bf16 *w,
                                                 const float *bias, int B, int Cin, int Cout, int T, int K,
                                                 int dilation, float *workspace, int group) {
    check_shape(B, Cin, Cout, T, K, dilation);
    SPK_ASSERT(group > 0 && B % group == 0);
    const size_t nx = (size_t)group * Cin * T, ny = (size_t)group * Cout * T;
    for (int g = 0; g < B / group; g++)
        conv1d_bf16_forward_cuda(y + g * ny, xh + g * nx, x ? x + g * nx : nullptr, w, bias, group, Cin, Cout, T, K,
                                 dilation, workspace);
}

extern "C" void conv1d_bf16_forward_fixed_cuda(float *y, spk_bf16 *xh, const float *x, const spk_bf16 *w,
                                               const float *bias, int B, int Cin, int Cout, int T, int K, int dilation,
                                               float *workspace) {
    conv1d_bf16_forward_grouped_cuda(y, xh, x, w, bias, B, Cin, Cout, T, K, dilation, workspace, 1);
}

extern "C" void conv1d_bf16_backward_exact_cuda(float *dx, int dx_accumulate, float *dw_tmp, xsum_t dw, xsum_t dbias,
                                                const float *dy, const spk_bf16 *dyh, const spk_bf16 *xh,
                                                const spk_bf16 *w, int B, int Cin, int Cout, int T, int K, int dilation,
                                                float *workspace, int group) {
    check_shape(B, Cin, Cout, T, K, dilation);
    SPK_ASSERT(group > 0 && B % group == 0);
    SPK_ASSERT(!dy != !dyh && (dy || xsum_empty(dbias)));
    const size_t nx = (size_t)group * Cin * T, ny = (size_t)group * Cout * T, nw = (size_t)Cout * Cin * K;
    if (dx || !xsum_empty(dw))
        by_group_terms(B / group, dw_tmp, dw, nw, [&](int g, float *dwg) {
            conv1d_bf16_backward_cuda(dx ? dx + g * nx : nullptr, dx_accumulate, dwg, nullptr, dy ? dy + g * ny : nullptr,
                                      dyh ? dyh + g * ny : nullptr, xh + g * nx, w, group, Cin, Cout, T, K, dilation,
                                      workspace);
        });
    if (!xsum_empty(dbias))  // of dy as float32, as the default backward's: the float32 path's sums
        conv1d_backward_exact_cuda(nullptr, 0, nullptr, xsum_none(), dbias, dy, nullptr, nullptr, B, Cin, Cout, T, K,
                                   dilation, workspace, group);
}
