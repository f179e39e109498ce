// The 6x16 GEMM micro-kernel of our own convolutions (kernels/cpu/conv2d_winograd.c,
// conv2d_taps.c): C (SPK_MR x SPK_NR) = or += A (SPK_MR x K) B (K x SPK_NR), with
// a(i, k) = a[i ars + k aks], b(k, j) = b[k bks + j], c(i, j) = c[i ldc + j]. Both strides of A
// are free, so one kernel serves rows of positions (ars = the channels) and rows of channels
// (ars = 1). Rows i >= mr are computed (their a must be readable) and not stored; add: C += the
// product, else C = it. AVX2 and FMA where the compiler targets them, plain loops elsewhere.
// spk_micro_kernel_pair does two such column panels at once (C's columns 0-15 from b0, 16-31
// from b1): on AVX-512 one 6x32 kernel whose twelve accumulators are full vectors, elsewhere
// the 6x16 kernel twice.
#pragma once
#include <stddef.h>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

enum { SPK_MR = 6, SPK_NR = 16 };

#if defined(__AVX2__) && defined(__FMA__)
#define SPK_MICRO_KERNEL_SIMD 1  // the vector kernel below, not the plain loops
#else
#define SPK_MICRO_KERNEL_SIMD 0
#endif
#if defined(__AVX512F__)
#define SPK_MICRO_KERNEL_AVX512 1  // the pair kernel is AVX-512's
#else
#define SPK_MICRO_KERNEL_AVX512 0
#endif

#if defined(__AVX2__) && defined(__FMA__)
// Twelve named accumulators: an array indexed after the loop would live on the stack.
static inline void spk_micro_kernel(int K, const float *a, size_t ars, size_t aks, const float *b, size_t bks, float *c,
                                    size_t ldc, int mr, int add) {
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00,
           c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    for (int k = 0; k < K; k++, a += aks, b += bks) {
        const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
        __m256 ai = _mm256_broadcast_ss(a);
        c00 = _mm256_fmadd_ps(ai, b0, c00), c01 = _mm256_fmadd_ps(ai, b1, c01);
        ai = _mm256_broadcast_ss(a + ars);
        c10 = _mm256_fmadd_ps(ai, b0, c10), c11 = _mm256_fmadd_ps(ai, b1, c11);
        ai = _mm256_broadcast_ss(a + 2 * ars);
        c20 = _mm256_fmadd_ps(ai, b0, c20), c21 = _mm256_fmadd_ps(ai, b1, c21);
        ai = _mm256_broadcast_ss(a + 3 * ars);
        c30 = _mm256_fmadd_ps(ai, b0, c30), c31 = _mm256_fmadd_ps(ai, b1, c31);
        ai = _mm256_broadcast_ss(a + 4 * ars);
        c40 = _mm256_fmadd_ps(ai, b0, c40), c41 = _mm256_fmadd_ps(ai, b1, c41);
        ai = _mm256_broadcast_ss(a + 5 * ars);
        c50 = _mm256_fmadd_ps(ai, b0, c50), c51 = _mm256_fmadd_ps(ai, b1, c51);
    }
    const __m256 acc[2 * SPK_MR] = {c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51};
    for (int i = 0; i < mr; i++) {
        float *ci = c + i * ldc;
        __m256 lo = acc[2 * i], hi = acc[2 * i + 1];
        if (add) lo = _mm256_add_ps(lo, _mm256_loadu_ps(ci)), hi = _mm256_add_ps(hi, _mm256_loadu_ps(ci + 8));
        _mm256_storeu_ps(ci, lo);
        _mm256_storeu_ps(ci + 8, hi);
    }
}
#else
static inline void spk_micro_kernel(int K, const float *a, size_t ars, size_t aks, const float *b, size_t bks, float *c,
                                    size_t ldc, int mr, int add) {
    float acc[SPK_MR][SPK_NR] = {{0}};
    for (int k = 0; k < K; k++, a += aks, b += bks)
        for (int i = 0; i < SPK_MR; i++) {
            const float ai = a[i * ars];
#pragma omp simd
            for (int j = 0; j < SPK_NR; j++) acc[i][j] += ai * b[j];
        }
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < SPK_NR; j++) c[i * ldc + j] = add ? c[i * ldc + j] + acc[i][j] : acc[i][j];
}
#endif

#if defined(__AVX512F__)
// Twelve named accumulators, as above: six rows by two 16-float vectors.
static inline void spk_micro_kernel_pair(int K, const float *a, size_t ars, size_t aks, const float *b0,
                                         const float *b1, size_t bks, float *c, size_t ldc, int mr, int add) {
    __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00,
           c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    for (int k = 0; k < K; k++, a += aks, b0 += bks, b1 += bks) {
        const __m512 v0 = _mm512_loadu_ps(b0), v1 = _mm512_loadu_ps(b1);
        __m512 ai = _mm512_set1_ps(a[0]);
        c00 = _mm512_fmadd_ps(ai, v0, c00), c01 = _mm512_fmadd_ps(ai, v1, c01);
        ai = _mm512_set1_ps(a[ars]);
        c10 = _mm512_fmadd_ps(ai, v0, c10), c11 = _mm512_fmadd_ps(ai, v1, c11);
        ai = _mm512_set1_ps(a[2 * ars]);
        c20 = _mm512_fmadd_ps(ai, v0, c20), c21 = _mm512_fmadd_ps(ai, v1, c21);
        ai = _mm512_set1_ps(a[3 * ars]);
        c30 = _mm512_fmadd_ps(ai, v0, c30), c31 = _mm512_fmadd_ps(ai, v1, c31);
        ai = _mm512_set1_ps(a[4 * ars]);
        c40 = _mm512_fmadd_ps(ai, v0, c40), c41 = _mm512_fmadd_ps(ai, v1, c41);
        ai = _mm512_set1_ps(a[5 * ars]);
        c50 = _mm512_fmadd_ps(ai, v0, c50), c51 = _mm512_fmadd_ps(ai, v1, c51);
    }
    const __m512 acc[2 * SPK_MR] = {c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51};
    for (int i = 0; i < mr; i++) {
        float *ci = c + i * ldc;
        __m512 lo = acc[2 * i], hi = acc[2 * i + 1];
        if (add) lo = _mm512_add_ps(lo, _mm512_loadu_ps(ci)), hi = _mm512_add_ps(hi, _mm512_loadu_ps(ci + SPK_NR));
        _mm512_storeu_ps(ci, lo);
        _mm512_storeu_ps(ci + SPK_NR, hi);
    }
}
#else
static inline void spk_micro_kernel_pair(int K, const float *a, size_t ars, size_t aks, const float *b0,
                                         const float *b1, size_t bks, float *c, size_t ldc, int mr, int add) {
    spk_micro_kernel(K, a, ars, aks, b0, bks, c, ldc, mr, add);
    spk_micro_kernel(K, a, ars, aks, b1, bks, c + SPK_NR, ldc, mr, add);
}
#endif
