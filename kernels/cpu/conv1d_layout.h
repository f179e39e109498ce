// The 1-D convolution's data movement, under the schedules of kernels/cpu/conv1d.c: operand
// rows, the im2col matrix (reflect 'same' padding) and its fold back onto dx, samples folded
// into columns, the transposed weight. Operands have elements of `elem` bytes (2: bf16, 4:
// float32); folds back are float32. Private to kernels/cpu.
#pragma once
#include <stddef.h>

#include "kernels/cpu/conv1d_schedule.h"

#define CONV_PAR_MIN_COPY 32768  // elements: below this, copies run on the calling thread

#define CONV_ALIGN 64  // bytes: workspace regions start on cache lines

static inline size_t conv_round_up(size_t n) { return (n + CONV_ALIGN - 1) / CONV_ALIGN * CONV_ALIGN; }

// Weights larger than L2 get a transposed copy for the per-sample input gradient: a GEMM on
// W^T re-packs W for every sample, which measured ~1.5x slower than packing a plain W^T.
#define CONV_BIG_WEIGHT_FLOATS (1u << 20)

static inline int conv_big_weight(int Cin, int Cout, int K) { return (size_t)Cin * K * Cout >= CONV_BIG_WEIGHT_FLOATS; }

// A per-thread slot of the per-sample schedule: an im2col (Cin*K, T) of operands, or the float32
// GEMM output dcol of the same shape.
static inline size_t conv_slot_bytes(int Cin, int T, int K) { return (size_t)Cin * K * T * sizeof(float); }

// The (Cout, nc) part of a chunk of the folded schedules laid out for nc columns (after the
// (Cin*K, nc) im2col or float32 dcol).
static inline char *conv_chunk_second(void *chunk, int Cin, int K, size_t nc) {
    return (char *)chunk + conv_round_up((size_t)Cin * K * nc * sizeof(float));
}

// Group g of a tensor of the invariant mode's layout: groups of `group` samples one after
// another, each in C * group * T elements, its samples (C, T) each or folded together
// (C, group * T).
static inline conv_tensor_t conv_group_at(conv_tensor_t x, int g, int group, int C, int T, size_t e) {
    return (conv_tensor_t){(const char *)x.p + (size_t)g * group * C * T * e, x.sample, x.row};
}

// Row c of sample b of an operand tensor.
static inline const char *conv_row_at(conv_tensor_t x, int b, int c, size_t elem) {
    return (const char *)x.p + ((size_t)b * x.sample + (size_t)c * x.row) * elem;
}

// The B samples of the tensor follow each other along its rows: any run of samples is a run of
// columns, which the folded schedule's GEMMs read in place.
static inline int conv_is_folded(conv_tensor_t x, int B, int T) {
    return x.sample == (size_t)T && x.row >= (size_t)B * T;
}

#define CONV_CHUNK_COLS 2048

// Samples per chunk of the folded schedule (about CONV_CHUNK_COLS columns, balanced over B), or
// of about `cols` columns.
int conv_chunk_samples(int B, int T);
int conv_chunk_samples_of(int B, int T, int cols);
// wt (CK, Cout) = w (Cout, CK)^T.
void conv_transpose_weight(void *wt, const void *w, int Cout, int CK, size_t elem);
// col[(ci*K + k) * ldc + bi*T + t] = x[b0 + bi, ci, r(t + k*d - p)], bi < nb.
void conv_im2col(void *col, int ldc, conv_tensor_t x, int b0, int nb, int Cin, int T, int K, int dilation, size_t elem);
// dst (C, nb*T) = samples b0 .. b0+nb of x folded together: row c holds their rows c in turn.
void conv_fold_rows(void *dst, conv_tensor_t x, int b0, int nb, int C, int T, size_t elem);
// dx[b0 + bi, ci, r(t + k*d - p)] += col[(ci*K + k) * ldc + bi*T + t]; dx_set: each row zeroed
// first (in cache, instead of a pass over the whole dx beforehand).
void conv_col2im_add(float *dx, const float *col, int ldc, int b0, int nb, int Cin, int T, int K, int dilation,
                     int dx_set);
// col = rows c0*K .. c1*K of the im2col matrix of sample b (T columns).
void conv_im2col_sample(void *col, conv_tensor_t x, int b, int c0, int c1, int T, int K, int dilation, size_t elem);
// dx_b (Cin, T) += the fold of dcol (Cin*K, T).
void conv_col2im_add_sample(float *dxb, const float *dcol, int Cin, int T, int K, int dilation);
