// The 1-D convolution's data movement (kernels/cpu/conv1d_layout.h).
#include "kernels/cpu/conv1d_layout.h"

#include <string.h>

// One element of 2 or 4 bytes (the operand types), without a memcpy call per element.
static inline void copy_elem(char *dst, const char *src, size_t elem) {
    if (elem == 2)
        memcpy(dst, src, 2);
    else
        memcpy(dst, src, 4);
}

// Reflect index for u in (-T, 2T - 1): torch 'reflect' (edge sample not repeated).
static inline int reflect_index(int u, int T) { return u < 0 ? -u : (u >= T ? 2 * (T - 1) - u : u); }

int conv_chunk_samples_of(int B, int T, int cols) {
    int nb = (cols + T - 1) / T;
    if (nb < 1) nb = 1;
    if (nb > B) nb = B;
    const int nchunks = (B + nb - 1) / nb;
    return (B + nchunks - 1) / nchunks;  // balance the chunks
}

int conv_chunk_samples(int B, int T) { return conv_chunk_samples_of(B, T, CONV_CHUNK_COLS); }

// In 32 x 32 tiles.
void conv_transpose_weight(void *wt, const void *w, int Cout, int CK, size_t elem) {
#pragma omp parallel for collapse(2) schedule(static)
    for (int o0 = 0; o0 < Cout; o0 += 32) {
        for (int i0 = 0; i0 < CK; i0 += 32) {
            const int o1 = o0 + 32 < Cout ? o0 + 32 : Cout, i1 = i0 + 32 < CK ? i0 + 32 : CK;
            for (int i = i0; i < i1; i++)
                for (int o = o0; o < o1; o++)
                    copy_elem((char *)wt + ((size_t)i * Cout + o) * elem, (const char *)w + ((size_t)o * CK + i) * elem,
                              elem);
        }
    }
}

// One row of an im2col: dst[t] = xr[r(t + off)] for t < T
static inline void im2col_row(char *dst, const char *xr, int off, int T, size_t elem) {
    const int t_lo = off < 0 ? -off : 0;     // first t with t + off >= 0
    const int t_hi = off > 0 ? T - off : T;  // first t with t + off >= T
    for (int t = 0; t < t_lo; t++) copy_elem(dst + t * elem, xr + reflect_index(t + off, T) * elem, elem);
    memcpy(dst + t_lo * elem, xr + (t_lo + off) * elem, elem * (size_t)(t_hi - t_lo));
    for (int t = t_hi; t < T; t++) copy_elem(dst + t * elem, xr + reflect_index(t + off, T) * elem, elem);
}

// The fold of one im2col row back: dxr[r(t + off)] += src[t] for t < T.
static inline void col2im_row_add(float *dxr, const float *src, int off, int T) {
    const int t_lo = off < 0 ? -off : 0;
    const int t_hi = off > 0 ? T - off : T;
    for (int t = 0; t < t_lo; t++) dxr[reflect_index(t + off, T)] += src[t];
#pragma omp simd
    for (int t = t_lo; t < t_hi; t++) dxr[t + off] += src[t];
    for (int t = t_hi; t < T; t++) dxr[reflect_index(t + off, T)] += src[t];
}

void conv_im2col(void *col, int ldc, conv_tensor_t x, int b0, int nb, int Cin, int T, int K, int dilation,
                 size_t elem) {
    const int p = conv_pad(K, dilation);
#pragma omp parallel for collapse(2) schedule(static) if ((size_t)Cin * K * ldc >= CONV_PAR_MIN_COPY)
    for (int ci = 0; ci < Cin; ci++) {
        for (int k = 0; k < K; k++) {
            char *row = (char *)col + ((size_t)ci * K + k) * ldc * elem;
            for (int bi = 0; bi < nb; bi++)
                im2col_row(row + (size_t)bi * T * elem, conv_row_at(x, b0 + bi, ci, elem), k * dilation - p, T, elem);
        }
    }
}

void conv_fold_rows(void *dst, conv_tensor_t x, int b0, int nb, int C, int T, size_t elem) {
    const size_t nc = (size_t)nb * T;
#pragma omp parallel for collapse(2) schedule(static) if ((size_t)C * nc >= CONV_PAR_MIN_COPY)
    for (int c = 0; c < C; c++)
        for (int bi = 0; bi < nb; bi++)
            memcpy((char *)dst + ((size_t)c * nc + (size_t)bi * T) * elem, conv_row_at(x, b0 + bi, c, elem),
                   elem * (size_t)T);
}

void conv_col2im_add(float *dx, const float *col, int ldc, int b0, int nb, int Cin, int T, int K, int dilation,
                     int dx_set) {
    const int p = conv_pad(K, dilation);
#pragma omp parallel for collapse(2) schedule(static) if ((size_t)Cin * K * ldc >= CONV_PAR_MIN_COPY)
    for (int bi = 0; bi < nb; bi++) {
        for (int ci = 0; ci < Cin; ci++) {
            float *dxr = dx + ((size_t)(b0 + bi) * Cin + ci) * T;
            if (dx_set) memset(dxr, 0, (size_t)T * sizeof *dxr);
            for (int k = 0; k < K; k++)
                col2im_row_add(dxr, col + ((size_t)ci * K + k) * ldc + (size_t)bi * T, k * dilation - p, T);
        }
    }
}

void conv_im2col_sample(void *col, conv_tensor_t x, int b, int c0, int c1, int T, int K, int dilation, size_t elem) {
    const int p = conv_pad(K, dilation);
    for (int ci = c0; ci < c1; ci++)
        for (int k = 0; k < K; k++)
            im2col_row((char *)col + ((size_t)(ci - c0) * K + k) * T * elem, conv_row_at(x, b, ci, elem),
                       k * dilation - p, T, elem);
}

void conv_col2im_add_sample(float *dxb, const float *dcol, int Cin, int T, int K, int dilation) {
    const int p = conv_pad(K, dilation);
    for (int ci = 0; ci < Cin; ci++)
        for (int k = 0; k < K; k++)
            col2im_row_add(dxb + (size_t)ci * T, dcol + ((size_t)ci * K + k) * T, k * dilation - p, T);
}
