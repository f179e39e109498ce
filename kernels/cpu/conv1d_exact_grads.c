// The world-size-invariant mode's exact weight and bias gradients of the 1-D convolution
// (kernels/cpu/conv1d_exact_grads.h).
#include "kernels/cpu/conv1d_exact_grads.h"

#include <omp.h>

#include "kernels/cpu/conv1d_layout.h"
#include "kernels/cpu/exact_rows.h"
#include "kernels/cpu/gemm_row_tiles.h"

// The exact weight gradient of samples one by one (groups of 1), by blocks of output channels x
// input channels, set by the shapes only: rows of up to 256 floats (whole input channels), 32K
// floats a block. Each block is owned by one thread, which computes every sample's part of it
// into dw_tmp and adds it to the sums: the block and its sums stay in cache while the samples go
// by.
#define EXACT_BLOCK_COLS   256
#define EXACT_BLOCK_FLOATS 32768

static void weight_grad_by_sample(const conv_operands_t *op, float *dw_tmp, xsum_t dw, conv_tensor_t dy,
                                  conv_tensor_t x, int B, int Cin, int Cout, int T, int K, int dilation, void *scratch,
                                  int nt) {
    const int CK = Cin * K;
    const size_t e = op->elem;
    int cols = EXACT_BLOCK_COLS / K;  // input channels per block
    cols = cols < 1 ? 1 : (cols > Cin ? Cin : cols);
    int rows = EXACT_BLOCK_FLOATS / (cols * K);
    rows = rows < 1 ? 1 : (rows > Cout ? Cout : rows);
    const int ncol = (Cin + cols - 1) / cols, nrow = (Cout + rows - 1) / rows;
#pragma omp parallel num_threads(nt)
    {
        char *col = K > 1 ? (char *)scratch + (size_t)omp_get_thread_num() * conv_slot_bytes(Cin, T, K) : NULL;
#pragma omp for schedule(dynamic, 1)
        for (int blk = 0; blk < ncol * nrow; blk++) {
            const int c0 = blk % ncol * cols, c1 = c0 + cols < Cin ? c0 + cols : Cin;
            const int o0 = blk / ncol * rows, o1 = o0 + rows < Cout ? o0 + rows : Cout;
            const int n = (c1 - c0) * K;
            for (int b = 0; b < B; b++) {
                const void *src = conv_row_at(x, b, c0, e);  // rows c0*K .. c1*K of col_b
                int ld = (int)x.row;
                if (K > 1) {
                    conv_im2col_sample(col, x, b, c0, c1, T, K, dilation, e);
                    src = col;
                    ld = T;
                }
                float *t = dw_tmp + (size_t)o0 * CK + (size_t)c0 * K;
                op->gemm('N', 'T', o1 - o0, n, T, conv_row_at(dy, b, o0, e), (int)dy.row, src, ld, 0.0f, t, CK);
                for (int o = o0; o < o1; o++)
                    xsum_add_row(xsum_at(dw, (int64_t)o * CK + (int64_t)c0 * K), t + (size_t)(o - o0) * CK, n);
            }
        }
    }
}

// Groups of G > 1: each group's gradient is the GEMM dW = dYg colg^T over the group's columns,
// then one term of the sums, by blocks of dW (one thread each, the block's terms deposited while
// it is in cache). How the columns meet depends on G, T and the layer only: float32 K = 1 layers
// whose weights fit L2 add each sample's GEMM over time into blocks of EXACT_FOLD_COLS columns,
// reading x and dy in place (as the default per-sample schedule; no copies); the others fold the
// group's columns (G T of them, in chunks of conv_chunk_samples(G, T) samples whose products add up in
// dw_tmp), as the default folded weight gradient, in blocks of half the rows (at least 256:
// exact_folded_part) by EXACT_FOLDED_COLS columns. Each block's GEMM packs its rows of dYg and
// its columns of colg, so more blocks pack more: blocks of whole rows and 256 columns packed the
// 1536 x 1536 layer's dYg six times (the exact weight gradient 25-40 ms slower than the
// default's, one thread, batch 16); blocks of 512 x 768 left it 10% slower and ECAPA C=1024's
// 3072 x 3072 layer 11%, quarters or halves of the columns 12-17% on the first; halves of the
// rows by 1536 columns 1-5% on both, on one thread and on two (T = 200). The blocks depend on the
// shape only: 2 for 1024 and 1536 channels, 4 for 3072. Threads past the blocks split them into
// tiles of rows (block_tile_rows) where the GEMM gives a block's tiles the block's own bits
// (checked once per shape), so the result never depends on the thread count: oneDNN's bf16
// matmul does for every block here; its float32 GEMM does up to 512 x 1536 x 3200, but not for
// the blocks of the 1536- and 3072-channel layers (768 and 1536 rows by 1536 columns), which keep
// 2 and 4 threads in float32 (blocks of 512 or 384 rows, which it would tile, cost the first
// 7-14% on one thread and on two). Scratch:
// the folded schedule's (folded_bytes), which holds conv_chunk_samples(B, T) >=
// conv_chunk_samples(G, T) samples' columns.
#define EXACT_FOLD_COLS   256
#define EXACT_ROW_PARTS   2
#define EXACT_FOLDED_COLS 1536

// A block's rows of n: n / parts, at least 256, a multiple of 64.
static int exact_folded_part(int n, int parts) {
    const int m = (n + parts - 1) / parts;
    return m < 256 ? 256 : (m + 63) / 64 * 64;
}

static void deposit_block(xsum_t dw, const float *dw_tmp, int o0, int o1, int CK, int n0, int n1) {
    for (int o = o0; o < o1; o++)
        xsum_add_row(xsum_at(dw, (int64_t)o * CK + n0), dw_tmp + (size_t)o * CK + n0, n1 - n0);
}

// Rows a task takes of the weight gradient's blocks (rows x cols of dW (Cout, CK), the last ones
// possibly smaller; GEMMs over k columns of operands with leading dimensions lda and ldb): the
// block's rows, or, when nt threads outnumber the blocks, tiles of them, if the GEMM gives every
// block shape the same bits in those tiles as whole (gemm_row_tiles_exact). Either way the
// result does not depend on nt.
static int block_tile_rows(const conv_operands_t *op, int nt, int Cout, int rows, int CK, int cols, int k, int lda,
                           int ldb) {
    const int frows = (Cout + rows - 1) / rows, fcols = (CK + cols - 1) / cols, m = rows < Cout ? rows : Cout;
    const int tile = gemm_row_tile_rows(nt, frows * fcols, m);
    if (tile >= m) return rows;
    const int ms[2] = {m, Cout - (frows - 1) * rows};
    const int ns[2] = {cols < CK ? cols : CK, CK - (fcols - 1) * cols};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            if (!gemm_row_tiles_exact(op->gemm, op->elem, ms[i], ns[j], k, lda, ldb, CK, tile)) return rows;
    return tile;
}

static void weight_grad_by_group(const conv_operands_t *op, float *dw_tmp, xsum_t dw, conv_tensor_t dy, conv_tensor_t x,
                                 int B, int Cin, int Cout, int T, int K, int dilation, void *scratch, int nt,
                                 int group) {
    const int CK = Cin * K, nb_max = conv_chunk_samples(group, T), ncol = (CK + EXACT_FOLD_COLS - 1) / EXACT_FOLD_COLS;
    const int cols = EXACT_FOLDED_COLS, fcols = (CK + cols - 1) / cols;
    const int rows = exact_folded_part(Cout, EXACT_ROW_PARTS), frows = (Cout + rows - 1) / rows;
    const size_t e = op->elem;
    const int in_place = K == 1 && e == sizeof(float) && !conv_big_weight(Cin, Cout, K);
    SPK_ASSERT(nb_max <= conv_chunk_samples(B, T));
    char *col = scratch;                                                      // (CK, nc)
    char *dyf_copy = conv_chunk_second(scratch, Cin, K, (size_t)nb_max * T);  // (Cout, nc)
    const int ptile =
        in_place ? block_tile_rows(op, nt, Cout, Cout, CK, EXACT_FOLD_COLS, T, (int)dy.row, (int)x.row) : 0;
    for (int g0 = 0; g0 < B; g0 += group) {
        if (in_place) {
            const int tile = ptile, tiles = (Cout + tile - 1) / tile;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
            for (int task = 0; task < ncol * tiles; task++) {
                const int blk = task / tiles, o0 = task % tiles * tile, o1 = o0 + tile < Cout ? o0 + tile : Cout;
                const int n0 = blk * EXACT_FOLD_COLS, n1 = n0 + EXACT_FOLD_COLS < CK ? n0 + EXACT_FOLD_COLS : CK;
                for (int b = g0; b < g0 + group; b++)
                    op->gemm('N', 'T', o1 - o0, n1 - n0, T, conv_row_at(dy, b, o0, e), (int)dy.row,
                             conv_row_at(x, b, n0, e), (int)x.row, b > g0 ? 1.0f : 0.0f, dw_tmp + (size_t)o0 * CK + n0,
                             CK);
                deposit_block(dw, dw_tmp, o0, o1, CK, n0, n1);
            }
            continue;
        }
        const int g = g0 / group;
        const conv_tensor_t xg = conv_group_at(x, g, group, Cin, T, e), dyg = conv_group_at(dy, g, group, Cout, T, e);
        const int dy_in_place = conv_is_folded(dyg, group, T), x_in_place = K == 1 && conv_is_folded(xg, group, T);
        const int per = dy_in_place && x_in_place ? group : nb_max;  // with no copy to bound, one GEMM a group
        for (int b0 = 0; b0 < group; b0 += per) {
            const int nb = group - b0 < per ? group - b0 : per, nc = nb * T, last = b0 + nb == group;
            const char *dyf = conv_row_at(dyg, b0, 0, e), *xf = conv_row_at(xg, b0, 0, e);
            int lddy = (int)dyg.row, ldx = (int)xg.row;
            if (!x_in_place) {
                conv_im2col(col, nc, xg, b0, nb, Cin, T, K, dilation, e);
                xf = col, ldx = nc;
            }
            if (!dy_in_place) {
                conv_fold_rows(dyf_copy, dyg, b0, nb, Cout, T, e);
                dyf = dyf_copy, lddy = nc;
            }
            const int tile = block_tile_rows(op, nt, Cout, rows, CK, cols, nc, lddy, ldx),
                      tiles = (rows + tile - 1) / tile;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
            for (int task = 0; task < fcols * frows * tiles; task++) {
                const int blk = task / tiles, n0 = blk % fcols * cols, r0 = blk / fcols * rows;
                const int o0 = r0 + task % tiles * tile, r1 = r0 + rows < Cout ? r0 + rows : Cout;
                const int n1 = n0 + cols < CK ? n0 + cols : CK, o1 = o0 + tile < r1 ? o0 + tile : r1;
                if (o0 >= o1) continue;  // (the last block's tiles past its rows)
                op->gemm('N', 'T', o1 - o0, n1 - n0, nc, dyf + (size_t)o0 * lddy * e, lddy, xf + (size_t)n0 * ldx * e,
                         ldx, b0 > 0 ? 1.0f : 0.0f, dw_tmp + (size_t)o0 * CK + n0, CK);  // the chunks add up in dw_tmp
                if (last) deposit_block(dw, dw_tmp, o0, o1, CK, n0, n1);
            }
        }
    }
}

void conv_bias_grad_exact(xsum_t dbias, const float *dy, int B, int Cout, int T, int group) {
#pragma omp parallel for schedule(static) if ((size_t)B * Cout * T >= CONV_PAR_MIN_COPY)
    for (int co = 0; co < Cout; co++) {
        float g = 0.0f;
        for (int b = 0; b < B; b++) {
            const float *src = dy + ((size_t)b * Cout + co) * T;
            float s = 0.0f;
#pragma omp simd reduction(+ : s)
            for (int t = 0; t < T; t++) s += src[t];
            g = b % group ? g + s : s;
            if (b % group == group - 1) xsum_add_one(xsum_at(dbias, co), g);
        }
    }
}

void conv_weight_grad_exact(const conv_operands_t *op, float *dw_tmp, xsum_t dw, conv_tensor_t dy, conv_tensor_t x,
                            int B, int Cin, int Cout, int T, int K, int dilation, void *scratch, int nt, int group) {
    if (group == 1)
        weight_grad_by_sample(op, dw_tmp, dw, dy, x, B, Cin, Cout, T, K, dilation, scratch, nt);
    else
        weight_grad_by_group(op, dw_tmp, dw, dy, x, B, Cin, Cout, T, K, dilation, scratch, nt, group);
}
