// Conv1d with bf16 operands (kernels/conv1d_bf16.h): the float32 convolution's schedule
// (kernels/cpu/conv1d.c) over bf16 operands and spk_gemm_bf16. The input (into xh) and the
// output gradient (into the head of the workspace, once per backward; the schedule's scratch
// follows) are rounded into the layout with the batch folded into time, (C, B*T): the
// per-sample GEMMs read a sample as a column block of it, and the weight gradient's GEMM reads
// it in place, with no gathering copy.
#include "kernels/conv1d_bf16.h"

#include <string.h>

#include "kernels/base/spk_assert.h"
#include "kernels/cpu/bf16_fold.h"
#include "kernels/cpu/conv1d_layout.h"
#include "kernels/cpu/conv1d_schedule.h"
#include "kernels/cpu/exact_rows.h"
#include "kernels/gemm_bf16.h"

static void gemm_operands(char ta, char tb, int M, int N, int K, const void *A, int lda, const void *B, int ldb,
                          float beta, float *C, int ldc) {
    spk_gemm_bf16(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
}

// The folded schedule by default: with the operands folded already, it copies nothing for K = 1
// and its GEMMs take ~2000 columns per call instead of T per sample; with bf16 operands it
// measured faster than the per-sample schedule overall (docs/kernels.md).
static const conv_operands_t operands = {sizeof(spk_bf16), gemm_operands, 1};

static void gemm_fixed_operands(char ta, char tb, int M, int N, int K, const void *A, int lda, const void *B, int ldb,
                                float beta, float *C, int ldc) {
    spk_gemm_bf16_fixed(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
}

// The world-size-invariant mode's: every GEMM planned for one thread.
static const conv_operands_t operands_fixed = {sizeof(spk_bf16), gemm_fixed_operands, 0};

// Bytes of the rounded output gradient (B, Cout, T), rounded up to a cache line.
static size_t dy_bytes(int B, int Cout, int T) { return conv_round_up((size_t)B * Cout * T * sizeof(spk_bf16)); }

size_t conv1d_bf16_workspace_floats(int B, int Cin, int Cout, int T, int K, int dilation) {
    const size_t bytes = dy_bytes(B, Cout, T) + conv_schedule_bytes(&operands, B, Cin, Cout, T, K, dilation);
    return (bytes + sizeof(float) - 1) / sizeof(float);
}

// The folded layout as the schedule sees it.
static conv_tensor_t folded(const spk_bf16 *p, int B, int T) { return (conv_tensor_t){p, (size_t)T, (size_t)B * T}; }

void conv1d_bf16_forward(float *y, spk_bf16 *xh, const float *x, const spk_bf16 *w, const float *bias, int B, int Cin,
                         int Cout, int T, int K, int dilation, float *workspace) {
    conv_check_shape(B, Cin, Cout, T, K, dilation);
    if (x) bf16_fold_from_f32(xh, NULL, x, B, Cin, T);
    conv_schedule_forward(&operands, y, folded(xh, B, T), w, bias, B, Cin, Cout, T, K, dilation, workspace);
}

void conv1d_bf16_backward(float *dx, int dx_accumulate, float *dw, float *dbias, const float *dy, const spk_bf16 *dyh,
                          const spk_bf16 *xh, const spk_bf16 *w, int B, int Cin, int Cout, int T, int K, int dilation,
                          float *workspace) {
    conv_check_shape(B, Cin, Cout, T, K, dilation);
    SPK_ASSERT(!dyh != !dy && (!dyh || !dbias));
    if (!dx && !dw && !dbias) return;
    if (!dyh) {
        spk_bf16 *r = (spk_bf16 *)workspace;           // (Cout, B*T)
        bf16_fold_from_f32(r, dbias, dy, B, Cout, T);  // and the bias gradient, in one pass
        dyh = r;
    }
    if (dx || dw)
        conv_schedule_backward(&operands, dx, dx_accumulate, dw, folded(dyh, B, T), folded(xh, B, T), w, B, Cin, Cout,
                               T, K, dilation, (char *)workspace + dy_bytes(B, Cout, T));
}

// ---- the world-size-invariant mode (kernels/conv1d_bf16.h) ------------------------------------
// The operands are rounded into groups of `group` samples, each folded (C, group*T): a group's
// GEMMs then read it in place with strides set by the group alone, so their plans (and sums) do
// not depend on B; with groups of one sample that is the (B, C, T) layout.

// Bytes of each group's bias sums (B/group, Cout) at most, rounded up to a cache line.
static size_t sums_bytes(int B, int Cout) { return conv_round_up((size_t)B * Cout * sizeof(float)); }

size_t conv1d_bf16_workspace_floats_fixed(int B, int Cin, int Cout, int T, int K, int dilation) {
    const size_t bytes = dy_bytes(B, Cout, T) + sums_bytes(B, Cout) +
                         conv_schedule_bytes_fixed(&operands_fixed, B, Cin, Cout, T, K, dilation);
    return (bytes + sizeof(float) - 1) / sizeof(float);
}

static conv_tensor_t by_group(const spk_bf16 *p, int C, int T, int group) {
    return group == 1 ? (conv_tensor_t){p, (size_t)C * T, (size_t)T} : (conv_tensor_t){p, (size_t)T, (size_t)group * T};
}

void conv1d_bf16_forward_grouped(float *y, spk_bf16 *xh, const float *x, const spk_bf16 *w, const float *bias, int B,
                                 int Cin, int Cout, int T, int K, int dilation, float *workspace, int group) {
    conv_check_shape(B, Cin, Cout, T, K, dilation);
    SPK_ASSERT(group > 0 && B % group == 0);
    if (x) bf16_fold_groups_from_f32(xh, NULL, x, B, Cin, T, group);
    conv_schedule_forward_fixed(&operands_fixed, y, by_group(xh, Cin, T, group), w, bias, B, Cin, Cout, T, K, dilation,
                                workspace, group);
}

void conv1d_bf16_forward_fixed(float *y, spk_bf16 *xh, const float *x, const spk_bf16 *w, const float *bias, int B,
                               int Cin, int Cout, int T, int K, int dilation, float *workspace) {
    conv1d_bf16_forward_grouped(y, xh, x, w, bias, B, Cin, Cout, T, K, dilation, workspace, 1);
}

void conv1d_bf16_backward_exact(float *dx, int dx_accumulate, float *dw_tmp, xsum_t dw, xsum_t dbias, const float *dy,
                                const spk_bf16 *dyh, const spk_bf16 *xh, const spk_bf16 *w, int B, int Cin, int Cout,
                                int T, int K, int dilation, float *workspace, int group) {
    conv_check_shape(B, Cin, Cout, T, K, dilation);
    SPK_ASSERT(group > 0 && B % group == 0);
    SPK_ASSERT(!dy != !dyh && (dy || xsum_empty(dbias)));
    if (!dyh && (dx || !xsum_empty(dw))) {  // rounded, and the bias gradient's terms, in one pass
        spk_bf16 *r = (spk_bf16 *)workspace;
        float *sums = xsum_empty(dbias) ? NULL : (float *)((char *)workspace + dy_bytes(B, Cout, T));
        if (sums) memset(sums, 0, (size_t)B / group * Cout * sizeof *sums);
        bf16_fold_groups_from_f32(r, sums, dy, B, Cout, T, group);
        for (int g = 0; sums && g < B / group; g++) xsum_add_row(xsum_at(dbias, 0), sums + (size_t)g * Cout, Cout);
        dyh = r;
        dbias = xsum_none();
    }
    conv_schedule_backward_exact(&operands_fixed, dx, dx_accumulate, dw_tmp, dw, dbias, dy,
                                 by_group(dyh, Cout, T, group), by_group(xh, Cin, T, group), w, B, Cin, Cout, T, K,
                                 dilation, (char *)workspace + dy_bytes(B, Cout, T) + sums_bytes(B, Cout), group);
}
