// Winograd F(4x4, 3x3) convolutions (kernels/cpu/conv2d_winograd.h).
//
// Tiles: output tile (b, ti, tj) covers rows 4 ti .. 4 ti + 3 and columns 4 tj .. 4 tj + 3 of
// sample b's output (cropped at the edges) and reads the 6x6 input patch one row and column
// further out on each side (zeros outside). A transformed 6x6 tile has 36 elements e = 6 i + j.
//
// The products: for each element e, a block's transformed tiles (NT, K) times the transformed
// weights (K, N) - 36 GEMMs a block, each with the block's tiles as rows. The blocks are small
// enough to stay in cache between the transforms and the GEMMs; threads take whole blocks.
//
// Workspace (floats): [weights transformed: 36 x K x N16][zeros (channels)][a slot per thread:
// tiles in (36 x NT x K) + slack][tiles out (36 x NT x N16)][weight-gradient partial
// (36 x Cin x Cout16)], where N16 is N rounded up to sixteens (the micro-kernel's columns).
#include "kernels/cpu/conv2d_winograd.h"

#include <omp.h>
#include <string.h>

#include "kernels/base/spk_assert.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

enum {
    E = 36,    // elements of a transformed tile
    NT = 24,   // tiles a block, a multiple of MR (ResNet34's 3x3 layers on AVX2: 12-48 alike, 96 12% slower)
    MR = 6,    // the micro-kernel's rows ...
    NR = 16,   // ... and columns
    CB = 64,   // channels a transform handles at once (its temporaries stay in L1)
    SLACK = 8  // floats past the tiles in: the weight gradient's micro-kernel reads up to MR - 1 past a row
};

static size_t round16(int n) { return (size_t)(n + NR - 1) / NR * NR; }
static int max_int(int a, int b) { return a > b ? a : b; }
static int min_int(int a, int b) { return a < b ? a : b; }

int conv2d_winograd_shape(const conv2d_shape_t *s) {
    return conv2d_shape_ok(s) && s->Cin % 16 == 0 && s->Cout % 16 == 0 && s->KH == 3 && s->KW == 3 && s->SH == 1 &&
           s->SW == 1 && s->PH == 1 && s->PW == 1 && s->DH == 1 && s->DW == 1;
}

typedef struct {
    int B, H, W;    // batch and map (input = output)
    int th, tw;     // tiles a column and a row
    size_t tiles;   // B th tw
    size_t blocks;  // of NT tiles
} tiling_t;

static tiling_t tiling_of(const conv2d_shape_t *s) {
    tiling_t t = {s->B, s->H, s->W, (s->H + 3) / 4, (s->W + 3) / 4, 0, 0};
    t.tiles = (size_t)t.B * t.th * t.tw;
    t.blocks = (t.tiles + NT - 1) / NT;
    return t;
}

static size_t weights_floats(const conv2d_shape_t *s) {
    const size_t a = (size_t)s->Cin * round16(s->Cout), b = (size_t)s->Cout * round16(s->Cin);
    return E * (a > b ? a : b);
}
static size_t in_floats(const conv2d_shape_t *s) { return (size_t)E * NT * max_int(s->Cin, s->Cout) + SLACK; }
static size_t out_floats(const conv2d_shape_t *s) {
    const size_t a = round16(s->Cin), b = round16(s->Cout);
    return (size_t)E * NT * (a > b ? a : b);
}
static size_t partial_floats(const conv2d_shape_t *s) { return (size_t)E * s->Cin * round16(s->Cout); }
static size_t slot_floats(const conv2d_shape_t *s) { return in_floats(s) + out_floats(s) + partial_floats(s); }

size_t conv2d_winograd_workspace_floats(const conv2d_shape_t *s) {
    SPK_ASSERT(conv2d_winograd_shape(s));
    return weights_floats(s) + (size_t)max_int(s->Cin, s->Cout) + (size_t)omp_get_max_threads() * slot_floats(s);
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

// The weights as the products read them: up[((e nob + ob) K + k) 16 + j] holds element e of
// kernel (k -> n = 16 ob + j), zero for n >= N. flip 0: the convolution itself (K = Cin, N =
// Cout); 1: its input gradient's (K = Cout, N = Cin), kernel (o -> c) rotated half a turn.
static void weights_transform(float *up, const float *w, int K, int N, int flip) {
    const int nob = (int)(round16(N) / NR);
    memset(up, 0, sizeof(float) * E * round16(N) * K);
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) {
            const float *g = flip ? w + ((size_t)k * N + n) * 9 : w + ((size_t)n * K + k) * 9;
            double gd[9], u[E];
            for (int i = 0; i < 9; i++) gd[i] = g[flip ? 8 - i : i];
            weight_tile(u, gd);
            for (int e = 0; e < E; e++) up[(((size_t)e * nob + n / NR) * K + k) * NR + n % NR] = (float)u[e];
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

// ---- the products: C (MR x NR) = or += A (MR x K) B (K x NR) -----------------------------------
// a(i, k) = a[i ars + k aks], b(k, j) = b[k bks + j], c(i, j) = c[i ldc + j]; rows i >= mr are
// computed (their a must be readable) and not stored.
#if defined(__AVX2__) && defined(__FMA__)
// Twelve named accumulators: an array indexed after the loop would live on the stack.
static void micro_kernel(int K, const float *a, size_t ars, size_t aks, const float *b, size_t bks, float *c,
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
    const __m256 acc[2 * MR] = {c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51};
    for (int i = 0; i < mr; i++) {
        float *ci = c + i * ldc;
        __m256 lo = acc[2 * i], hi = acc[2 * i + 1];
        if (add) lo = _mm256_add_ps(lo, _mm256_loadu_ps(ci)), hi = _mm256_add_ps(hi, _mm256_loadu_ps(ci + 8));
        _mm256_storeu_ps(ci, lo);
        _mm256_storeu_ps(ci + 8, hi);
    }
}
#else
static void micro_kernel(int K, const float *a, size_t ars, size_t aks, const float *b, size_t bks, float *c,
                         size_t ldc, int mr, int add) {
    float acc[MR][NR] = {{0}};
    for (int k = 0; k < K; k++, a += aks, b += bks)
        for (int i = 0; i < MR; i++) {
            const float ai = a[i * ars];
#pragma omp simd
            for (int j = 0; j < NR; j++) acc[i][j] += ai * b[j];
        }
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < NR; j++) c[i * ldc + j] = add ? c[i * ldc + j] + acc[i][j] : acc[i][j];
}
#endif

// ---- the passes --------------------------------------------------------------------------------

typedef struct {
    float *weights, *zeros, *slots;
    size_t slot;  // floats a slot
    size_t in, out;
} parts_t;

static parts_t parts_of(const conv2d_shape_t *s, float *workspace) {
    const int channels = max_int(s->Cin, s->Cout);
    parts_t p = {workspace, workspace + weights_floats(s), NULL, slot_floats(s), in_floats(s), out_floats(s)};
    p.slots = p.zeros + channels;
    memset(p.zeros, 0, sizeof(float) * channels);
    return p;
}

// The calling thread's slot.
static float *slot_of(const parts_t *p) { return p->slots + (size_t)omp_get_thread_num() * p->slot; }

// Tiles in block blk (NT but for the last).
static int block_tiles(const tiling_t *t, size_t blk) {
    const size_t left = t->tiles - blk * NT;
    return left < NT ? (int)left : NT;
}

static void tile_origin(const tiling_t *t, size_t tile, int *b, int *i0, int *j0) {
    const size_t per_sample = (size_t)t->th * t->tw, r = tile % per_sample;
    *b = (int)(tile / per_sample);
    *i0 = 4 * (int)(r / t->tw);
    *j0 = 4 * (int)(r % t->tw);
}

// y (K -> N channels) = or += the convolution of x with the transformed weights up.
static void convolve(float *y, int accumulate, const float *x, const float *up, const float *bias, int K, int N,
                     const tiling_t *t, const parts_t *p) {
    const size_t ldn = round16(N), nob = ldn / NR;
#pragma omp parallel
    {
        float *in = slot_of(p), *out = in + p->in;
        memset(in, 0, sizeof(float) * (p->in + p->out));  // rows past a short block are read, not used
#pragma omp for schedule(static)
        for (size_t blk = 0; blk < t->blocks; blk++) {
            const size_t first = blk * NT;
            const int nt = block_tiles(t, blk);
            int b, i0, j0;
            for (int k = 0; k < nt; k++) {
                tile_origin(t, first + k, &b, &i0, &j0);
                input_tile(in + (size_t)k * K, (size_t)NT * K, x, t, K, b, i0, j0, p->zeros);
            }
            for (int e = 0; e < E; e++)
                for (size_t ob = 0; ob < nob; ob++) {
                    const float *w = up + ((size_t)e * nob + ob) * K * NR;
                    for (int r = 0; r < nt; r += MR)
                        micro_kernel(K, in + ((size_t)e * NT + r) * K, K, 1, w, NR,
                                     out + ((size_t)e * NT + r) * ldn + ob * NR, ldn, min_int(MR, nt - r), 0);
                }
            for (int k = 0; k < nt; k++) {
                tile_origin(t, first + k, &b, &i0, &j0);
                output_tile(y, accumulate, out + (size_t)k * ldn, (size_t)NT * ldn, bias, t, N, b, i0, j0);
            }
        }
    }
}

// dw += G^T [sum over tiles (A dy A^T) . (B^T x B)] G: each thread sums its blocks' products
// into its partial (36, Cin, Cout16); the partials are added in thread order.
static void weight_gradient(float *dw, const float *dy, const float *x, const conv2d_shape_t *s, const tiling_t *t,
                            const parts_t *p) {
    const int Cin = s->Cin, Cout = s->Cout;
    const size_t ldo = round16(Cout), nob = ldo / NR, np = partial_floats(s);
    int threads = 1;
#pragma omp parallel
    {
        float *in = slot_of(p), *z = in + p->in, *part = z + p->out;
        memset(in, 0, sizeof(float) * p->slot);  // z's padded columns, and the slack, stay zero
#pragma omp single
        threads = omp_get_num_threads();
#pragma omp for schedule(static)
        for (size_t blk = 0; blk < t->blocks; blk++) {
            const int nt = block_tiles(t, blk);
            const size_t first = blk * NT;
            int b, i0, j0;
            for (int k = 0; k < nt; k++) {
                tile_origin(t, first + k, &b, &i0, &j0);
                input_tile(in + (size_t)k * Cin, (size_t)NT * Cin, x, t, Cin, b, i0, j0, p->zeros);
                grad_tile(z + (size_t)k * ldo, (size_t)NT * ldo, dy, t, Cout, b, i0, j0, p->zeros);
            }
            for (int e = 0; e < E; e++)
                for (int c = 0; c < Cin; c += MR)
                    for (size_t ob = 0; ob < nob; ob++)
                        micro_kernel(nt, in + (size_t)e * NT * Cin + c, 1, (size_t)Cin,
                                     z + (size_t)e * NT * ldo + ob * NR, ldo,
                                     part + ((size_t)e * Cin + c) * ldo + ob * NR, ldo, min_int(MR, Cin - c), 1);
        }
    }
    float *sum = p->slots + p->in + p->out;  // thread 0's partial
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < np; i++)
        for (int k = 1; k < threads; k++) sum[i] += sum[(size_t)k * p->slot + i];
#pragma omp parallel for schedule(static)
    for (int o = 0; o < Cout; o++)
        for (int c = 0; c < Cin; c++) {
            double st[E], g[9];
            for (int e = 0; e < E; e++) st[e] = sum[((size_t)e * Cin + c) * ldo + o];
            kernel_of_sums(g, st);
            float *d = dw + ((size_t)o * Cin + c) * 9;
            for (int i = 0; i < 9; i++) d[i] += (float)g[i];
        }
}

void conv2d_winograd_forward(float *y, int accumulate, const float *x, const float *w, const float *bias,
                             const conv2d_shape_t *s, float *workspace) {
    SPK_ASSERT(conv2d_winograd_shape(s));
    const tiling_t t = tiling_of(s);
    const parts_t p = parts_of(s, workspace);
    weights_transform(p.weights, w, s->Cin, s->Cout, 0);
    convolve(y, accumulate, x, p.weights, bias, s->Cin, s->Cout, &t, &p);
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
