// Row helpers of the CPU softmaxes, loss heads and reductions (xent.c, aam_softmax.c,
// pooling.c, batchnorm.c, conv1d.c, conv2d.c), as kernels/cuda/rows.cuh and launch.cuh are on the GPU.
#pragma once
#include <stddef.h>

#include "kernels/elementwise_math.h"

// The sum of x[0..n) in float, vectorized (in the same order wherever it is used: BatchNorm's
// channel sums, the convolution's bias gradient).
static inline float spk_row_sum(const float *x, int n) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int j = 0; j < n; j++) s += x[j];
    return s;
}

// sums[c] += the sum over the N rows of x (N, C) of column c: channels-last maps' channel sums
// (the 2-D convolutions' bias gradient). Threads take blocks of 16 columns, each summed over
// the rows in order in double, so the result does not depend on the thread count.
static inline void spk_rows_channel_sums(float *sums, const float *x, size_t N, int C) {
#pragma omp parallel for schedule(static)
    for (int c0 = 0; c0 < C; c0 += 16) {
        const int cn = C - c0 < 16 ? C - c0 : 16;
        double acc[16] = {0};
        for (size_t i = 0; i < N; i++)
            for (int c = 0; c < cn; c++) acc[c] += x[i * (size_t)C + c0 + c];
        for (int c = 0; c < cn; c++) sums[c0 + c] += (float)acc[c];
    }
}

// total = the sum in double over j in [0, n) of `term`, an expression of j of type T (which may
// also store per-j results), in an order that depends on n alone: term j goes to lane
// j % SPK_LANES, the lanes are added pairwise at the end. An `omp simd` reduction's order may
// follow the row's alignment, so a row would not give the same bits wherever it sits in a batch.
// The terms of a block are formed apart from the lanes, so that loop vectorizes (GCC leaves
// double terms of float math such as spk_expf scalar: give those as float).
#define SPK_LANES 8
#define SPK_LANE_SUM(total, T, j, n, term)                                \
    do {                                                                  \
        double lane_[SPK_LANES] = {0};                                    \
        const int n_ = (n);                                               \
        int j0_ = 0;                                                      \
        for (; j0_ + SPK_LANES <= n_; j0_ += SPK_LANES) {                 \
            T t_[SPK_LANES];                                              \
            _Pragma("omp simd") for (int l_ = 0; l_ < SPK_LANES; l_++) {  \
                const int j = j0_ + l_;                                   \
                t_[l_] = (term);                                          \
            }                                                             \
            for (int l_ = 0; l_ < SPK_LANES; l_++) lane_[l_] += t_[l_];   \
        }                                                                 \
        for (int l_ = 0; j0_ + l_ < n_; l_++) {                           \
            const int j = j0_ + l_;                                       \
            lane_[l_] += (T)(term);                                       \
        }                                                                 \
        const double lo_ = (lane_[0] + lane_[1]) + (lane_[2] + lane_[3]); \
        (total) = lo_ + ((lane_[4] + lane_[5]) + (lane_[6] + lane_[7]));  \
    } while (0)

// First index of the maximum of z[0..n).
static inline int spk_row_argmax(const float *z, int n) {
    int am = 0;
    for (int j = 1; j < n; j++)
        if (z[j] > z[am]) am = j;
    return am;
}

// p = softmax(z) over n positions given the row's maximum mx: p[j] = exp(z[j] - mx) / s with
// s = sum_j exp(z[j] - mx), returned (logsumexp(z) = mx + log(s)). p may alias z.
static inline float spk_softmax_row(float *p, const float *z, int n, float mx) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int j = 0; j < n; j++) {
        const float e = spk_expf(z[j] - mx);
        p[j] = e;
        s += e;
    }
    const float inv = 1.0f / s;
#pragma omp simd
    for (int j = 0; j < n; j++) p[j] *= inv;
    return s;
}

// ---- the batch loss of a row-wise loss head -------------------------------------------------
typedef struct {
    float loss;  // the row's loss
    int ok;      // 1 when the row's prediction is its label
} spk_row_loss_t;

// *loss = mean over the B rows of row(ctx, b).loss, *correct = the rows that are ok. Rows run
// in parallel (when B * row_floats is worth the threads); their results are summed in row
// order, through blocks of a fixed-size buffer, so the sum does not depend on the thread count.
#define SPK_ROW_BLOCK 256
static inline void spk_row_losses(float *loss, int *correct, int B, size_t row_floats,
                                  spk_row_loss_t (*row)(void *ctx, int b), void *ctx) {
    double total = 0.0;
    int ncorrect = 0;
    for (int b0 = 0; b0 < B; b0 += SPK_ROW_BLOCK) {
        const int nb = B - b0 < SPK_ROW_BLOCK ? B - b0 : SPK_ROW_BLOCK;
        spk_row_loss_t r[SPK_ROW_BLOCK];
#pragma omp parallel for schedule(dynamic, 1) if ((size_t)nb * row_floats >= 32768)
        for (int i = 0; i < nb; i++) r[i] = row(ctx, b0 + i);
        for (int i = 0; i < nb; i++) {
            total += r[i].loss;
            ncorrect += r[i].ok;
        }
    }
    *loss = (float)(total / B);
    *correct = ncorrect;
}
