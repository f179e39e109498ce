// Row tiles of a GEMM checked against the whole GEMM (kernels/cpu/gemm_row_tiles.h).
//
// A GEMM's element is a dot product over k whose order the library's kernel fixes, usually the
// same whatever rows the call covers; but a library may switch paths by the shapes (oneDNN's
// float32 GEMM on one thread: a 768 x 1536 x 3200 product differs from its 512-row tiles in 76%
// of its elements, while 512 x 1536 and every tiling of it agree), so no tiling is taken on
// trust: each is compared once, on random operands, with the call it replaces.
#include "kernels/cpu/gemm_row_tiles.h"

#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/check.h"
#include "kernels/base/rng.h"
#include "kernels/bf16.h"
#include "kernels/gemm.h"

typedef struct {
    gemm_any_fn *gemm;
    spk_gemm_backend backend;  // (the library behind gemm, chosen process-wide)
    size_t elem;
    int m, n, k, lda, ldb, ldc, rows;
    int exact;
} verdict_t;

#define MAX_VERDICTS 1024  // (a training run meets a few dozen)
static verdict_t g_verdicts[MAX_VERDICTS];
static int g_count, g_allowed;

// Random operand values in [-1, 1) (bf16: rounded), the same for every check.
static void *random_operand(size_t count, size_t elem, rng_t *r) {
    char *p = mallocCheck(count * elem);
    for (size_t i = 0; i < count; i++) {
        const float f = (float)(2.0 * rng_uniform(r) - 1.0);
        if (elem == sizeof(float)) {
            memcpy(p + i * elem, &f, sizeof f);
        } else {
            const spk_bf16 h = spk_bf16_round(f);
            memcpy(p + i * elem, &h, sizeof h);
        }
    }
    return p;
}

// Both ways on this thread alone, as the weight gradient's tasks call the GEMM inside a parallel
// region: a library that may thread a call from a serial region plans it for one thread. Fresh
// buffers: the libraries' paths depend on the shapes, not on where the operands lie.
static int compare(gemm_any_fn *gemm, size_t elem, int m, int n, int k, int lda, int ldb, int ldc, int rows) {
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    rng_t r = rng_init(0, RNG_PURPOSE_GEMM_CHECK, 0, 0);
    const size_t nc = (size_t)(m - 1) * ldc + n;  // C's floats, rows of ldc
    void *A = random_operand((size_t)(m - 1) * lda + k, elem, &r);
    void *B = random_operand((size_t)(n - 1) * ldb + k, elem, &r);
    float *start = random_operand(nc, sizeof(float), &r), *C[2];
    for (int way = 0; way < 2; way++) {
        C[way] = mallocCheck(nc * sizeof(float));
        memcpy(C[way], start, nc * sizeof(float));
    }
    int same = 1;
    for (int pass = 0; pass < 2 && same; pass++) {  // beta 0, then 1: the chunks of a group add up so
        for (int way = 0; way < 2; way++) {
            const int step = way ? rows : m;
            for (int r0 = 0; r0 < m; r0 += step)
                gemm('N', 'T', m - r0 < step ? m - r0 : step, n, k, (const char *)A + (size_t)r0 * lda * elem, lda, B,
                     ldb, pass ? 1.0f : 0.0f, C[way] + (size_t)r0 * ldc, ldc);
        }
        for (int i = 0; i < m && same; i++)
            same = memcmp(C[0] + (size_t)i * ldc, C[1] + (size_t)i * ldc, n * sizeof(float)) == 0;
    }
    free(A);
    free(B);
    free(start);
    free(C[0]);
    free(C[1]);
    omp_set_num_threads(threads);
    return same;
}

int gemm_row_tiles_exact(gemm_any_fn *gemm, size_t elem, int m, int n, int k, int lda, int ldb, int ldc, int rows) {
    if (rows >= m) return 1;
    const spk_gemm_backend backend = spk_gemm_get_backend();
    int exact = -1;
#pragma omp critical(gemm_row_tiles)
    {
        for (int i = 0; i < g_count && exact < 0; i++) {
            const verdict_t *v = &g_verdicts[i];
            if (v->gemm == gemm && v->backend == backend && v->elem == elem && v->m == m && v->n == n && v->k == k &&
                v->lda == lda && v->ldb == ldb && v->ldc == ldc && v->rows == rows)
                exact = v->exact;
        }
        if (exact < 0 && g_count == MAX_VERDICTS) {
            exact = 0;  // (a full table: whole blocks, without checking again at every call)
        } else if (exact < 0) {
            exact = compare(gemm, elem, m, n, k, lda, ldb, ldc, rows);
            g_allowed += exact;
            g_verdicts[g_count++] = (verdict_t){gemm, backend, elem, m, n, k, lda, ldb, ldc, rows, exact};
        }
    }
    return exact;
}

int gemm_row_tile_rows(int nt, int blocks, int m) {
    const int per_block = (nt + blocks - 1) / blocks;
    if (per_block < 2 || m < 128) return m;
    const int tiles = per_block < m / 64 ? per_block : m / 64;
    return ((m + tiles - 1) / tiles + 63) / 64 * 64;
}

int gemm_row_tiles_allowed(void) {
    int n;
#pragma omp critical(gemm_row_tiles)
    n = g_allowed;
    return n;
}
