// Winograd F(4x4, 3x3) convolutions (kernels/cpu/conv2d_winograd.h).
//
// Tiles: output tile (b, ti, tj) covers rows 4 ti .. 4 ti + 3 and columns 4 tj .. 4 tj + 3 of
// sample b's output (cropped at the edges) and reads the 6x6 input patch one row and column
// further out on each side (zeros outside). A transformed 6x6 tile has 36 elements e = 6 i + j.
//
// The products: for each element e, a block's transformed tiles (tiles x K) times the transformed
// weights (K x N): 36 GEMMs a block, each with the block's tiles as rows, on a 6x16 micro-kernel
// (6x32 on AVX-512: kernels/cpu/micro_kernel.h).
// Forward and input gradient: a thread takes a block of up to NT tiles, transforms its patches,
// multiplies and transforms the products back into its output tiles; every tile's arithmetic is
// the same whichever thread and block run it. Weight gradient: the sums over tiles (36 x Cin x
// Cout) are either kept per thread, each thread adding its blocks' products into its own copy
// and the copies added in thread order at the end (the fastest while the copies are small), or
// kept once, the threads transforming a super-block of SB tiles together and then splitting its
// 36 x Cin/6 GEMMs (K = the tiles) between them (where the copies would take more than
// PER_THREAD_SUMS_MAX bytes: wide layers on many threads).
//
// Workspace (floats): [weights transformed, or the weight gradient's sums: 36 x Cin x Cout]
// [zeros: max(Cin, Cout)][a slot of tiles in and out (36 x NT x (Cin + Cout)) per thread, or the
// super-block (36 x SB x (Cin + Cout)), whichever is larger][slack][the other threads' sums,
// when kept per thread].
#include "kernels/cpu/conv2d_winograd.h"

#include <omp.h>
#include <string.h>

#include "kernels/base/spk_assert.h"
#include "kernels/cpu/micro_kernel.h"

enum {
    E = 36,       // elements of a transformed tile
    NT = 24,      // tiles a block, a multiple of MR (ResNet34's 3x3 layers on AVX2: 12-48 alike, 96 12% slower)
    SB = 96,      // tiles a super-block of the weight gradient's shared sums (the K of its GEMMs)
    MR = SPK_MR,  // the micro-kernel's rows ...
    NR = SPK_NR,  // ... and columns (the channel counts are multiples)
    CB = 64,      // channels a transform handles at once (its temporaries stay in L1)
    SLACK = 8     // floats past the tiles: the weight gradient's micro-kernel reads up to MR - 1 past a row's end
};

static int max_int(int a, int b) { return a > b ? a : b; }
static int min_int(int a, int b) { return a < b ? a : b; }

int conv2d_winograd_shape(const conv2d_shape_t *s) {
    return conv2d_shape_ok(s) && s->Cin % NR == 0 && s->Cout % NR == 0 && s->KH == 3 && s->KW == 3 && s->SH == 1 &&
           s->SW == 1 && s->PH == 1 && s->PW == 1 && s->DH == 1 && s->DW == 1;
}

int conv2d_winograd_avx512(void) { return SPK_MICRO_KERNEL_AVX512; }

typedef struct {
    int B, H, W;   // batch and map (input = output)
    int th, tw;    // tiles a column and a row
    size_t tiles;  // B th tw
} tiling_t;

static tiling_t tiling_of(const conv2d_shape_t *s) {
    tiling_t t = {s->B, s->H, s->W, (s->H + 3) / 4, (s->W + 3) / 4, 0};
    t.tiles = (size_t)t.B * t.th * t.tw;
    return t;
}

static size_t sums_floats(const conv2d_shape_t *s) { return (size_t)E * s->Cin * s->Cout; }
static size_t slot_floats(const conv2d_shape_t *s) { return (size_t)E * NT * (s->Cin + s->Cout); }
static size_t tiles_floats(const conv2d_shape_t *s) {
    const size_t slots = (size_t)omp_get_max_threads() * slot_floats(s), super = (size_t)E * SB * (s->Cin + s->Cout);
    return (slots > super ? slots : super) + SLACK;
}

// Per-thread sums while all of them fit in this many bytes: on 2 threads they ran ResNet34's
// weight gradients 10-30% faster than the shared sums (32-256 channels; 19 MB at 256).
#define PER_THREAD_SUMS_MAX (64u << 20)

static int sums_per_thread(const conv2d_shape_t *s) {
    return (size_t)omp_get_max_threads() * sums_floats(s) * sizeof(float) <= PER_THREAD_SUMS_MAX;
}

size_t conv2d_winograd_workspace_floats(const conv2d_shape_t *s) {
    SPK_ASSERT(conv2d_winograd_shape(s));
    const size_t others = sums_per_thread(s) ? (size_t)(omp_get_max_threads() - 1) * sums_floats(s) : 0;
    return sums_floats(s) + (size_t)max_int(s->Cin, s->Cout) + tiles_floats(s) + others;
}

// ---- the transforms ---------------------------------------------------------------------------
// F(4, 3) on one axis at the points 0, +-2/3, +-3/2 and infinity: B^T (input, 6 -> 6), G
// (weights, 3 -> 6), A^T (output, 6 -> 4), and for the weight gradient the adjoints A (4 -> 6)
// and G^T (6 -> 3). Lavin and Gray's points 0, +-1, +-2 give the same operation count; these
// round less (measured on 64-channel layers: 2.2x smaller normwise error, 8.2e-7 against 1.8e-6
// with centred inputs), as the sums that cancel are of terms closer in size. Each 2-D transform
// applies its matrix down the columns, then along the rows. Channels run in the vector lanes.

#define B_D2 (97.0f / 36)
#define B_P  (3.0f / 2)
#define B_Q  (2.0f / 3)
#define B_P2 (9.0f / 4)
#define B_Q2 (4.0f / 9)
#define B_P3 (27.0f / 8)
#define B_Q3 (8.0f / 27)

// out[k][c] = (B^T in)[k], c < n.
static void bt_1d(float *const out[6], const float *const in[6], int n) {
    const float *d0 = in[0], *d1 = in[1], *d2 = in[2], *d3 = in[3], *d4 = in[4], *d5 = in[5];
#pragma omp simd
    for (int c = 0; c < n; c++) {
        const float e1 = d4[c] - B_P2 * d2[c], o1 = B_P * d1[c] - B_Q * d3[c];
        const float e2 = d4[c] - B_Q2 * d2[c], o2 = B_Q * d1[c] - B_P * d3[c];
        out[0][c] = d0[c] - B_D2 * d2[c] + d4[c];
        out[1][c] = e1 - o1;
        out[2][c] = e1 + o1;
        out[3][c] = e2 - o2;
        out[4][c] = e2 + o2;
        out[5][c] = d1[c] - B_D2 * d3[c] + d5[c];
    }
}

// out[k][c] = (A^T in)[k] + add[c] (add NULL: 0), c < n.
static void at_1d(float *const out[4], const float *const in[6], const float *add, int n) {
    const float *m0 = in[0], *m1 = in[1], *m2 = in[2], *m3 = in[3], *m4 = in[4], *m5 = in[5];
#pragma omp simd
    for (int c = 0; c < n; c++) {
        const float s1 = m1[c] + m2[c], d1 = m1[c] - m2[c], s2 = m3[c] + m4[c], d2 = m3[c] - m4[c];
        const float a = add ? add[c] : 0.0f;
        out[0][c] = m0[c] + s1 + s2 + a;
        out[1][c] = B_Q * d1 + B_P * d2 + a;
        out[2][c] = B_Q2 * s1 + B_P2 * s2 + a;
        out[3][c] = B_Q3 * d1 + B_P3 * d2 + m5[c] + a;
    }
}

// out[k][c] = (A in)[k], c < n: the output gradient's tile into the transformed domain.
static void a_1d(float *const out[6], const float *const in[4], int n) {
    const float *d0 = in[0], *d1 = in[1], *d2 = in[2], *d3 = in[3];
#pragma omp simd
    for (int c = 0; c < n; c++) {
        const float eq = d0[c] + B_Q2 * d2[c], oq = B_Q * d1[c] + B_Q3 * d3[c];
        const float ep = d0[c] + B_P2 * d2[c], op = B_P * d1[c] + B_P3 * d3[c];
        out[0][c] = d0[c];
        out[1][c] = eq + oq;
        out[2][c] = eq - oq;
        out[3][c] = ep + op;
        out[4][c] = ep - op;
        out[5][c] = d3[c];
    }
}

// u = G g (3 -> 6), in double: the weights are transformed once a call.
static void g_apply(double *u, size_t us, const double *g, size_t gs) {
    const double g0 = g[0], g1 = g[gs], g2 = g[2 * gs];
    const double near = -81.0 / 130 * g0 - 18.0 / 65 * g2, far = 8.0 / 65 * g0 + 18.0 / 65 * g2;
    u[0] = g0;
    u[us] = near - 27.0 / 65 * g1;
    u[2 * us] = near + 27.0 / 65 * g1;
    u[3 * us] = far + 12.0 / 65 * g1;
    u[4 * us] = far - 12.0 / 65 * g1;
    u[5 * us] = g2;
}

// w = G^T s (6 -> 3).
static void gt_apply(double *w, size_t ws, const double *s, size_t ss) {
    const double s1 = s[ss], s2 = s[2 * ss], s3 = s[3 * ss], s4 = s[4 * ss];
    w[0] = s[0] - 81.0 / 130 * (s1 + s2) + 8.0 / 65 * (s3 + s4);
    w[ws] = -27.0 / 65 * (s1 - s2) + 12.0 / 65 * (s3 - s4);
    w[2 * ws] = -18.0 / 65 * (s1 + s2) + 18.0 / 65 * (s3 + s4) + s[5 * ss];
}

// G g G^T of a 3x3 kernel g (rows: height taps).
static void weight_tile(double u[E], const double g[9]) {
    double t[18];  // (6, 3): G down the columns
    for (int c = 0; c < 3; c++) g_apply(t + c, 3, g + c, 3);
    for (int i = 0; i < 6; i++) g_apply(u + 6 * i, 1, t + 3 * i, 1);
}

// G^T s G of a transformed tile's sums s (6x6) into a 3x3 kernel.
static void kernel_of_sums(double g[9], const double s[E]) {
    double h[18];  // (3, 6): G^T down the columns
    for (int j = 0; j < 6; j++) gt_apply(h + j, 6, s + j, 6);
    for (int r = 0; r < 3; r++) gt_apply(g + 3 * r, 1, h + 6 * r, 1);
}

// The weights as the products read them: up[((e N/16 + n/16) K + k) 16 + n%16] holds element e
// of kernel (k -> n). flip 0: the convolution itself (K = Cin, N = Cout); 1: its input
// gradient's (K = Cout, N = Cin), kernel (o -> c) rotated half a turn. Squares of 16 x 16
// kernels at a time, so that every store fills a cache line (scattered, they cost more than
// the transforms: 190 ms of CPU a ResNet34 step).
static void weights_transform(float *up, const float *w, int K, int N, int flip) {
    const int nob = N / NR, kb = (K + NR - 1) / NR;
#pragma omp parallel for schedule(static)
    for (int sq = 0; sq < nob * kb; sq++) {
        const int ob = sq / kb, k0 = sq % kb * NR, nk = min_int(NR, K - k0);
        float u[NR][E][NR];  // [k - k0][e][n - 16 ob]
        for (int j = 0; j < NR; j++)
            for (int kk = 0; kk < nk; kk++) {
                const int n = ob * NR + j, k = k0 + kk;
                const float *g = flip ? w + ((size_t)k * N + n) * 9 : w + ((size_t)n * K + k) * 9;
                double gd[9], ud[E];
                for (int i = 0; i < 9; i++) gd[i] = g[flip ? 8 - i : i];
                weight_tile(ud, gd);
                for (int e = 0; e < E; e++) u[kk][e][j] = (float)ud[e];
            }
        for (int kk = 0; kk < nk; kk++)
            for (int e = 0; e < E; e++)
                memcpy(up + (((size_t)e * nob + ob) * K + k0 + kk) * NR, u[kk][e], sizeof u[kk][e]);
    }
}

// Element e of the input patch at output (i0, j0) of sample b: v[e estride + c], channels c < C.
static void input_tile(float *v, size_t estride, const float *x, const tiling_t *t, int C, int b, int i0, int j0,
                       const float *zeros) {
    const float *p[6][6];
    for (int r = 0; r < 6; r++)
        for (int q = 0; q < 6; q++) {
            const int u = i0 - 1 + r, w = j0 - 1 + q;
            p[r][q] = u >= 0 && u < t->H && w >= 0 && w < t->W ? x + (((size_t)b * t->H + u) * t->W + w) * C : zeros;
        }
    for (int c0 = 0; c0 < C; c0 += CB) {
        const int n = min_int(CB, C - c0);
        float m[6][6][CB];  // B^T d: [row i][column q]
        for (int q = 0; q < 6; q++)
            bt_1d((float *const[]){m[0][q], m[1][q], m[2][q], m[3][q], m[4][q], m[5][q]},
                  (const float *const[]){p[0][q] + c0, p[1][q] + c0, p[2][q] + c0, p[3][q] + c0, p[4][q] + c0,
                                         p[5][q] + c0},
                  n);
        for (int i = 0; i < 6; i++) {
            float *vi = v + (size_t)6 * i * estride + c0;
            bt_1d((float *const[]){vi, vi + estride, vi + 2 * estride, vi + 3 * estride, vi + 4 * estride,
                                   vi + 5 * estride},
                  (const float *const[]){m[i][0], m[i][1], m[i][2], m[i][3], m[i][4], m[i][5]}, n);
        }
    }
}

// A^T m A of the products m[e estride + c] into the output tile at (i0, j0) of sample b
// (cropped), plus bias, stored (accumulate 0) or added (1).
static void output_tile(float *y, int accumulate, const float *m, size_t estride, const float *bias, const tiling_t *t,
                        int N, int b, int i0, int j0) {
    const int rows = min_int(4, t->H - i0), cols = min_int(4, t->W - j0);
    for (int c0 = 0; c0 < N; c0 += CB) {
        const int n = min_int(CB, N - c0);
        float a[4][6][CB], o[4][CB];  // A^T down the columns: [output row][column j]; one output row
        for (int j = 0; j < 6; j++) {
            const float *mj = m + (size_t)j * estride + c0;
            at_1d((float *const[]){a[0][j], a[1][j], a[2][j], a[3][j]},
                  (const float *const[]){mj, mj + 6 * estride, mj + 12 * estride, mj + 18 * estride, mj + 24 * estride,
                                         mj + 30 * estride},
                  NULL, n);
        }
        for (int r = 0; r < rows; r++) {
            at_1d((float *const[]){o[0], o[1], o[2], o[3]},
                  (const float *const[]){a[r][0], a[r][1], a[r][2], a[r][3], a[r][4], a[r][5]}, bias ? bias + c0 : NULL,
                  n);
            for (int q = 0; q < cols; q++) {
                float *out = y + (((size_t)b * t->H + i0 + r) * t->W + j0 + q) * N + c0;
                if (accumulate) {
#pragma omp simd
                    for (int c = 0; c < n; c++) out[c] += o[q][c];
                } else
                    memcpy(out, o[q], sizeof(float) * n);
            }
        }
    }
}

// A dy A^T of the output gradient's tile at (i0, j0) of sample b (zeros past the output's edge).
static void grad_tile(float *z, size_t estride, const float *dy, const tiling_t *t, int N, int b, int i0, int j0,
                      const float *zeros) {
    const float *p[4][4];
    for (int r = 0; r < 4; r++)
        for (int q = 0; q < 4; q++)
            p[r][q] = i0 + r < t->H && j0 + q < t->W ? dy + (((size_t)b * t->H + i0 + r) * t->W + j0 + q) * N : zeros;
    for (int c0 = 0; c0 < N; c0 += CB) {
        const int n = min_int(CB, N - c0);
        float a[6][4][CB];  // A down the columns: [row i][column q]
        for (int q = 0; q < 4; q++)
            a_1d((float *const[]){a[0][q], a[1][q], a[2][q], a[3][q], a[4][q], a[5][q]},
                 (const float *const[]){p[0][q] + c0, p[1][q] + c0, p[2][q] + c0, p[3][q] + c0}, n);
        for (int i = 0; i < 6; i++) {
            float *zi = z + (size_t)6 * i * estride + c0;
            a_1d((float *const[]){zi, zi + estride, zi + 2 * estride, zi + 3 * estride, zi + 4 * estride,
                                  zi + 5 * estride},
                 (const float *const[]){a[i][0], a[i][1], a[i][2], a[i][3]}, n);
        }
    }
}

// ---- the passes --------------------------------------------------------------------------------

// C's column panel at b0 (16 columns), and with two the next one at b1 as well: the products'
// GEMMs take their columns in pairs, which AVX-512 runs as one kernel of full vectors.
static inline void panels(int two, int K, const float *a, size_t ars, size_t aks, const float *b0, const float *b1,
                          size_t bks, float *c, size_t ldc, int mr, int add) {
    if (two)
        spk_micro_kernel_pair(K, a, ars, aks, b0, b1, bks, c, ldc, mr, add);
    else
        spk_micro_kernel(K, a, ars, aks, b0, bks, c, ldc, mr, add);
}

typedef struct {
    float *weights;  // the transformed weights, or the weight gradient's sums (thread 0's)
    float *zeros;    // max(Cin, Cout)
    float *tiles;    // the slots, or the super-block
    float *others;   // threads 1, 2, ...'s sums, when kept per thread
    size_t slot;     // floats a slot
} parts_t;

static parts_t parts_of(const conv2d_shape_t *s, float *workspace) {
    const int channels = max_int(s->Cin, s->Cout);
    parts_t p = {workspace, workspace + sums_floats(s), NULL, NULL, slot_floats(s)};
    p.tiles = p.zeros + channels;
    p.others = p.tiles + tiles_floats(s);
    memset(p.zeros, 0, sizeof(float) * channels);
    memset(p.others - SLACK, 0, sizeof(float) * SLACK);
    return p;
}

static void tile_origin(const tiling_t *t, size_t tile, int *b, int *i0, int *j0) {
    const size_t per_sample = (size_t)t->th * t->tw, r = tile % per_sample;
    *b = (int)(tile / per_sample);
    *i0 = 4 * (int)(r / t->tw);
    *j0 = 4 * (int)(r % t->tw);
}

// Tiles in the block of at most `size` that starts at tile `first`.
static int block_tiles(const tiling_t *t, size_t first, size_t size) {
    return (int)(t->tiles - first < size ? t->tiles - first : size);
}

// The weight gradient's two transforms of tile `tile`, into row k of blocks of `rows` tiles:
// B^T x B into xt (Cin a row), A dy A^T into zt (Cout a row).
static void gradient_tiles(float *xt, float *zt, size_t rows, int k, size_t tile, const float *x, const float *dy,
                           const conv2d_shape_t *s, const tiling_t *t, const float *zeros) {
    int b, i0, j0;
    tile_origin(t, tile, &b, &i0, &j0);
    input_tile(xt + (size_t)k * s->Cin, rows * s->Cin, x, t, s->Cin, b, i0, j0, zeros);
    grad_tile(zt + (size_t)k * s->Cout, rows * s->Cout, dy, t, s->Cout, b, i0, j0, zeros);
}

// sums[e][c..c+5][:] += the products of element e over the nt tiles of blocks of `rows` tiles
// (a row past Cin reads the next tile's, or the slack, and is not stored).
static void add_products(float *sums, const float *xt, const float *zt, size_t rows, int nt, int e, int c,
                         const conv2d_shape_t *s) {
    const int Cin = s->Cin, Cout = s->Cout, nob = Cout / NR;
    for (int ob = 0; ob < nob; ob += 2) {
        const float *b0 = zt + (size_t)e * rows * Cout + ob * NR;
        panels(ob + 1 < nob, nt, xt + (size_t)e * rows * Cin + c, 1, (size_t)Cin, b0, b0 + NR, (size_t)Cout,
               sums + ((size_t)e * Cin + c) * Cout + ob * NR, (size_t)Cout, min_int(MR, Cin - c), 1);
    }
}

// y (K -> N channels) = or += the convolution of x with the transformed weights up. Blocks of
// up to NT tiles, fewer where that leaves a thread without one (a short batch in inference).
static void convolve(float *y, int accumulate, const float *x, const float *up, const float *bias, int K, int N,
                     const tiling_t *t, const parts_t *p) {
    const size_t nob = (size_t)N / NR, per_thread = (t->tiles + omp_get_max_threads() - 1) / omp_get_max_threads();
    const size_t bt = per_thread >= NT ? NT : per_thread <= MR ? MR : (per_thread + MR - 1) / MR * MR;
    const size_t blocks = (t->tiles + bt - 1) / bt;
#pragma omp parallel
    {
        float *in = p->tiles + (size_t)omp_get_thread_num() * p->slot, *out = in + (size_t)E * NT * K;
#pragma omp for schedule(static)
        for (size_t blk = 0; blk < blocks; blk++) {
            const size_t first = blk * bt;
            const int nt = block_tiles(t, first, bt);
            int b, i0, j0;
            for (int k = 0; k < nt; k++) {
                tile_origin(t, first + k, &b, &i0, &j0);
                input_tile(in + (size_t)k * K, (size_t)NT * K, x, t, K, b, i0, j0, p->zeros);
            }
            for (int e = 0; e < E; e++)  // rows past nt (up to MR - 1) are computed, not stored
                for (size_t ob = 0; ob < nob; ob += 2) {
                    const float *b0 = up + ((size_t)e * nob + ob) * K * NR;
                    for (int r = 0; r < nt; r += MR)
                        panels(ob + 1 < nob, K, in + ((size_t)e * NT + r) * K, K, 1, b0, b0 + (size_t)K * NR, NR,
                               out + ((size_t)e * NT + r) * N + ob * NR, N, min_int(MR, nt - r), 0);
                }
            for (int k = 0; k < nt; k++) {
                tile_origin(t, first + k, &b, &i0, &j0);
                output_tile(y, accumulate, out + (size_t)k * N, (size_t)NT * N, bias, t, N, b, i0, j0);
            }
        }
    }
}

// sums = sum over tiles (A dy A^T) . (B^T x B), kept once. Per super-block of SB tiles: the
// threads transform its tiles (x's and dy's), then each (element, six input channels) unit adds
// the super-block's products into its rows of the sums; the super-blocks in order.
static void sums_shared(float *sums, const float *dy, const float *x, const conv2d_shape_t *s, const tiling_t *t,
                        const parts_t *p) {
    const int cblocks = (s->Cin + MR - 1) / MR;
    const size_t supers = (t->tiles + SB - 1) / SB;
    float *xt = p->tiles, *zt = xt + (size_t)E * SB * s->Cin;
#pragma omp parallel
    for (size_t sb = 0; sb < supers; sb++) {
        const int nt = block_tiles(t, sb * SB, SB);
#pragma omp for schedule(static)
        for (int k = 0; k < nt; k++) gradient_tiles(xt, zt, SB, k, sb * SB + k, x, dy, s, t, p->zeros);
#pragma omp for schedule(static)
        for (int u = 0; u < E * cblocks; u++) add_products(sums, xt, zt, SB, nt, u / cblocks, u % cblocks * MR, s);
    }
}

// own += the products of block blk (NT tiles) of the tiling, transformed in the slot at in.
static void block_sums(float *own, float *in, size_t blk, const float *dy, const float *x, const conv2d_shape_t *s,
                       const tiling_t *t, const float *zeros) {
    float *z = in + (size_t)E * NT * s->Cin;
    const int nt = block_tiles(t, blk * NT, NT);
    for (int k = 0; k < nt; k++) gradient_tiles(in, z, NT, k, blk * NT + k, x, dy, s, t, zeros);
    for (int e = 0; e < E; e++)
        for (int c = 0; c < s->Cin; c += MR) add_products(own, in, z, NT, nt, e, c, s);
}

// The same sums kept per thread: each thread adds its blocks' products into its own copy (thread
// 0's is sums), and the copies are added in thread order.
static void sums_per_thread_run(float *sums, const float *dy, const float *x, const conv2d_shape_t *s,
                                const tiling_t *t, const parts_t *p) {
    const size_t ns = sums_floats(s), blocks = (t->tiles + NT - 1) / NT;
    int threads = 1;
#pragma omp parallel
    {
        const int me = omp_get_thread_num();
        float *in = p->tiles + (size_t)me * p->slot;
        float *own = me ? p->others + (size_t)(me - 1) * ns : sums;
        memset(own, 0, sizeof(float) * ns);
#pragma omp single
        threads = omp_get_num_threads();
#pragma omp for schedule(static)
        for (size_t blk = 0; blk < blocks; blk++) block_sums(own, in, blk, dy, x, s, t, p->zeros);
    }
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < ns; i++)
        for (int k = 1; k < threads; k++) sums[i] += p->others[(size_t)(k - 1) * ns + i];
}

// dw += G^T sums G, kernel by kernel. An input channel's sums of 16 output channels are read
// together, each of the 36 elements' rows a stretch of 64 bytes (one kernel at a time read 36
// lines for 36 floats: the default ResNet34 step's 42 ms of CPU).
static void kernels_of_sums(float *dw, const float *sums, const conv2d_shape_t *s) {
    const int Cin = s->Cin, Cout = s->Cout;
#pragma omp parallel for schedule(static)
    for (int c = 0; c < Cin; c++)
        for (int o0 = 0; o0 < Cout; o0 += NR) {
            double st[NR][E], g[9];
            for (int e = 0; e < E; e++) {
                const float *row = sums + ((size_t)e * Cin + c) * Cout + o0;
                for (int j = 0; j < NR; j++) st[j][e] = row[j];
            }
            for (int j = 0; j < NR; j++) {
                kernel_of_sums(g, st[j]);
                float *d = dw + ((size_t)(o0 + j) * Cin + c) * 9;
                for (int i = 0; i < 9; i++) d[i] += (float)g[i];
            }
        }
}

// dw += G^T [sum over tiles (A dy A^T) . (B^T x B)] G.
static void weight_gradient(float *dw, const float *dy, const float *x, const conv2d_shape_t *s, const tiling_t *t,
                            const parts_t *p) {
    float *sums = p->weights;  // (36, Cin, Cout)
    if (sums_per_thread(s))
        sums_per_thread_run(sums, dy, x, s, t, p);
    else {
        memset(sums, 0, sizeof(float) * sums_floats(s));
        sums_shared(sums, dy, x, s, t, p);
    }
    kernels_of_sums(dw, sums, s);
}

void conv2d_winograd_forward(float *y, const float *x, const float *w, const float *bias, const conv2d_shape_t *s,
                             float *workspace) {
    SPK_ASSERT(conv2d_winograd_shape(s));
    const tiling_t t = tiling_of(s);
    const parts_t p = parts_of(s, workspace);
    weights_transform(p.weights, w, s->Cin, s->Cout, 0);
    convolve(y, 0, x, p.weights, bias, s->Cin, s->Cout, &t, &p);
}

void conv2d_winograd_backward(float *dx, int dx_accumulate, float *dw, const float *dy, const float *x, const float *w,
                              const conv2d_shape_t *s, float *workspace) {
    SPK_ASSERT(conv2d_winograd_shape(s));
    const tiling_t t = tiling_of(s);
    const parts_t p = parts_of(s, workspace);
    if (dx) {
        weights_transform(p.weights, w, s->Cout, s->Cin, 1);
        convolve(dx, dx_accumulate, dy, p.weights, NULL, s->Cout, s->Cin, &t, &p);
    }
    if (dw) weight_gradient(dw, dy, x, s, &t, &p);
}

size_t conv2d_winograd_sums_floats(const conv2d_shape_t *s) {
    SPK_ASSERT(conv2d_winograd_shape(s));
    return sums_floats(s);
}

// [zeros][one slot][slack]
size_t conv2d_winograd_serial_workspace_floats(const conv2d_shape_t *s) {
    SPK_ASSERT(conv2d_winograd_shape(s));
    return (size_t)max_int(s->Cin, s->Cout) + slot_floats(s) + SLACK;
}

void conv2d_winograd_weight_sums_serial(float *sums, const float *dy, const float *x, const conv2d_shape_t *s,
                                        float *workspace) {
    SPK_ASSERT(conv2d_winograd_shape(s));
    const tiling_t t = tiling_of(s);
    float *zeros = workspace, *slot = zeros + max_int(s->Cin, s->Cout);
    memset(sums, 0, sizeof(float) * sums_floats(s));
    memset(zeros, 0, sizeof(float) * max_int(s->Cin, s->Cout));
    memset(slot + slot_floats(s), 0, sizeof(float) * SLACK);
    for (size_t blk = 0; blk < (t.tiles + NT - 1) / NT; blk++) block_sums(sums, slot, blk, dy, x, s, &t, zeros);
}

void conv2d_winograd_weight_of_sums(float *dw, const float *sums, const conv2d_shape_t *s) {
    SPK_ASSERT(conv2d_winograd_shape(s));
    kernels_of_sums(dw, sums, s);
}
