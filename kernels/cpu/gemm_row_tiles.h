// Whether a GEMM library gives C = A B^T the same bits computed whole and in tiles of rows, for
// one set of shapes: the invariant mode's weight gradients may then spread a block over more
// threads than the shapes make blocks, and keep the bits of any thread count. Private to
// kernels/cpu.
#pragma once
#include <stddef.h>

#include "kernels/cpu/gemm_any.h"

// gemm('N', 'T', m, n, k, A, lda, B, ldb, beta, C, ldc) with beta 0 and then 1, once whole and
// once in tiles of `rows` rows, on random operands of `elem` bytes: 1 when every element of C has
// the same bits both ways after each call. The verdict is computed once per (gemm, its library,
// elem, shapes, rows) and kept (past 1024 of them, new shapes get 0 unchecked); thread-safe.
int gemm_row_tiles_exact(gemm_any_fn *gemm, size_t elem, int m, int n, int k, int lda, int ldb, int ldc, int rows);

// Rows per tile for nt threads over `blocks` blocks of m rows: m itself (no tiles) when the
// blocks already occupy the threads or m is below two tiles of 64 rows; else about m / ceil(nt /
// blocks) rounded up to a multiple of 64 (so the tasks may fall short of nt).
int gemm_row_tile_rows(int nt, int blocks, int m);

// Verdicts computed so far that allowed tiles (for the tests).
int gemm_row_tiles_allowed(void);
