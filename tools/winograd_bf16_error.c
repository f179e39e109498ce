// How much a bf16 Winograd convolution would lose, before anyone builds one: one 3x3 layer
// (stride 1, padding 1) of channels-last activations, its output's normwise error against
// float64 sums of the float32 operands, for
//   - the direct convolution of bf16-rounded operands with float32 sums (the bf16 mode's);
//   - Winograd on the same rounded operands, its transformed tiles kept in float32 (the
//     widened path: the products as exact as the direct ones');
//   - Winograd whose transformed tiles are rounded to bf16, as a kernel on bf16 dot products
//     would hold them: F(4x4, 3x3) at kernels/cpu/conv2d_winograd.c's points (0, +-2/3, +-3/2,
//     infinity) and F(2x2, 3x3) (0, +-1, infinity).
// Inputs like a ReLU's (a half-normal) or centred, weights He-initialised.
//   usage: winograd_bf16_error [channels [centred [map]]]
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/bf16.h"

static float bf16(float v) { return spk_bf16_to_f32(spk_bf16_round(v)); }

static double uniform(void) { return (rand() + 1.0) / ((double)RAND_MAX + 2.0); }
static double normal(void) { return sqrt(-2.0 * log(uniform())) * cos(6.283185307179586 * uniform()); }

static void *alloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "winograd_bf16_error: out of memory\n");
        exit(1);
    }
    return p;
}

// F(m x m, 3x3) with t = m + 2: V = B^T d B, U = G g G^T, Y = A^T (U . V) A.
typedef struct {
    int m, t;
    const double *bt, *g, *at;  // (t, t), (t, 3), (m, t), row-major
    const char *name;
} winograd_t;

static const double BT4[36] = {1, 0,       -97.0 / 36, 0,        1, 0, 0, -1.5,     -2.25,    2.0 / 3,    1, 0,
                               0, 1.5,     -2.25,      -2.0 / 3, 1, 0, 0, -2.0 / 3, -4.0 / 9, 1.5,        1, 0,
                               0, 2.0 / 3, -4.0 / 9,   -1.5,     1, 0, 0, 1,        0,        -97.0 / 36, 0, 1};
static const double G4[18] = {1,           0,          0,          -81.0 / 130, -27.0 / 65, -18.0 / 65,
                              -81.0 / 130, 27.0 / 65,  -18.0 / 65, 8.0 / 65,    12.0 / 65,  18.0 / 65,
                              8.0 / 65,    -12.0 / 65, 18.0 / 65,  0,           0,          1};
static const double AT4[24] = {1, 1,       1,       1,    1,    0, 0, 2.0 / 3,  -2.0 / 3,  1.5,   -1.5,   0,
                               0, 4.0 / 9, 4.0 / 9, 2.25, 2.25, 0, 0, 8.0 / 27, -8.0 / 27, 3.375, -3.375, 1};
static const double BT2[16] = {1, 0, -1, 0, 0, 1, 1, 0, 0, -1, 1, 0, 0, 1, 0, -1};
static const double G2[12] = {1, 0, 0, 0.5, 0.5, 0.5, 0.5, -0.5, 0.5, 0, 0, 1};
static const double AT2[8] = {1, 1, 1, 0, 0, 1, -1, -1};

// out (r, r) = L (r, k) in (k, k) L^T, the sums of each product rounded to float where rounded
// (as a float32 kernel's transforms round them), else kept in double.
static void sandwich(double *out, const double *L, int r, int k, const double *in, int rounded) {
    double mid[36];
    for (int i = 0; i < r; i++)
        for (int j = 0; j < k; j++) {
            double a = 0;
            for (int l = 0; l < k; l++) a += L[i * k + l] * in[l * k + j];
            mid[i * k + j] = rounded ? (float)a : a;
        }
    for (int i = 0; i < r; i++)
        for (int j = 0; j < r; j++) {
            double a = 0;
            for (int l = 0; l < k; l++) a += mid[i * k + l] * L[j * k + l];
            out[i * r + j] = rounded ? (float)a : a;
        }
}

typedef struct {
    int H, W, C, O;
    const float *x, *w;  // bf16-rounded: (H, W, C) and (O, C, 3, 3)
} layer_t;

static float pixel(const layer_t *l, int u, int v, int c) {
    return u < 0 || u >= l->H || v < 0 || v >= l->W ? 0.0f : l->x[((size_t)u * l->W + v) * l->C + c];
}

// y (H, W, O) by F.
static void winograd(float *y, const layer_t *l, const winograd_t *f, int round_tiles) {
    const int t = f->t, m = f->m, tt = t * t;
    double *U = alloc(sizeof(double) * tt * l->O * l->C), *V = alloc(sizeof(double) * tt * l->C);
    for (int o = 0; o < l->O; o++)  // G g G^T in double, as the kernel transforms the weights
        for (int c = 0; c < l->C; c++) {
            const float *g = l->w + ((size_t)o * l->C + c) * 9;
            double gx[9], u[36];
            for (int i = 0; i < 9; i++) gx[i] = g[i];
            sandwich(u, f->g, t, 3, gx, 0);
            for (int e = 0; e < tt; e++) U[((size_t)e * l->O + o) * l->C + c] = (float)u[e];
        }
    for (int ti = 0; ti < (l->H + m - 1) / m; ti++)
        for (int tj = 0; tj < (l->W + m - 1) / m; tj++) {
            for (int c = 0; c < l->C; c++) {
                double d[36], v[36];
                for (int r = 0; r < t; r++)
                    for (int q = 0; q < t; q++) d[r * t + q] = pixel(l, m * ti - 1 + r, m * tj - 1 + q, c);
                sandwich(v, f->bt, t, t, d, 1);
                for (int e = 0; e < tt; e++) V[(size_t)e * l->C + c] = v[e];
            }
            for (int o = 0; o < l->O; o++) {
                double M[36], out[16];
                for (int e = 0; e < tt; e++) {
                    float s = 0.0f;
                    for (int c = 0; c < l->C; c++) {
                        float u = (float)U[((size_t)e * l->O + o) * l->C + c], v = (float)V[(size_t)e * l->C + c];
                        if (round_tiles) u = bf16(u), v = bf16(v);
                        s += u * v;
                    }
                    M[e] = s;
                }
                sandwich(out, f->at, m, t, M, 1);
                for (int r = 0; r < m; r++)
                    for (int q = 0; q < m; q++)
                        if (m * ti + r < l->H && m * tj + q < l->W)
                            y[(((size_t)m * ti + r) * l->W + m * tj + q) * l->O + o] = (float)out[r * m + q];
            }
        }
    free(U);
    free(V);
}

static double error(const float *y, const double *ref, size_t n) {
    double e = 0, r = 0;
    for (size_t i = 0; i < n; i++) e += (y[i] - ref[i]) * (y[i] - ref[i]), r += ref[i] * ref[i];
    return sqrt(e / r);
}

int main(int argc, char **argv) {
    const int C = argc > 1 ? atoi(argv[1]) : 64, centred = argc > 2 && atoi(argv[2]), H = argc > 3 ? atoi(argv[3]) : 20;
    if (C < 1 || C > 1024 || H < 1 || H > 200) {
        fprintf(stderr, "winograd_bf16_error: channels 1-1024, map 1-200\n");
        return 2;
    }
    const int W = H, O = C;
    const size_t nx = (size_t)H * W * C, nw = (size_t)O * C * 9, ny = (size_t)H * W * O;
    float *x = alloc(sizeof(float) * nx), *w = alloc(sizeof(float) * nw), *xb = alloc(sizeof(float) * nx),
          *wb = alloc(sizeof(float) * nw), *y = alloc(sizeof(float) * ny);
    double *ref = alloc(sizeof(double) * ny);
    srand(7);
    for (size_t i = 0; i < nx; i++) x[i] = (float)(centred ? normal() : fabs(normal())), xb[i] = bf16(x[i]);
    for (size_t i = 0; i < nw; i++) w[i] = (float)(normal() * sqrt(2.0 / (9.0 * C))), wb[i] = bf16(w[i]);
    const layer_t exact = {H, W, C, O, x, w}, rounded = {H, W, C, O, xb, wb};
    for (int i = 0; i < H; i++)  // float64 sums of the float32 operands; the bf16 mode's direct sums
        for (int j = 0; j < W; j++)
            for (int o = 0; o < O; o++) {
                double a = 0;
                float s = 0.0f;
                for (int r = 0; r < 3; r++)
                    for (int q = 0; q < 3; q++)
                        for (int c = 0; c < C; c++) {
                            const size_t k = ((size_t)o * C + c) * 9 + r * 3 + q;
                            a += (double)pixel(&exact, i - 1 + r, j - 1 + q, c) * w[k];
                            s += pixel(&rounded, i - 1 + r, j - 1 + q, c) * wb[k];
                        }
                ref[((size_t)i * W + j) * O + o] = a, y[((size_t)i * W + j) * O + o] = s;
            }
    const double direct = error(y, ref, ny);
    printf("%d channels, %dx%d map, %s inputs: normwise error against float64\n", C, H, W,
           centred ? "centred" : "ReLU-like");
    printf("  direct, bf16 operands, float32 sums:          %.3e\n", direct);
    const winograd_t f4 = {4, 6, BT4, G4, AT4, "F(4x4, 3x3)"}, f2 = {2, 4, BT2, G2, AT2, "F(2x2, 3x3)"};
    winograd(y, &rounded, &f4, 0);
    printf("  %s, bf16 operands, float32 tiles:    %.3e (%.2fx direct)\n", f4.name, error(y, ref, ny),
           error(y, ref, ny) / direct);
    for (int k = 0; k < 2; k++) {
        const winograd_t *f = k ? &f2 : &f4;
        winograd(y, &rounded, f, 1);
        printf("  %s, tiles rounded to bf16:           %.3e (%.2fx direct)\n", f->name, error(y, ref, ny),
               error(y, ref, ny) / direct);
    }
    free(x), free(w), free(xb), free(wb), free(y), free(ref);
    return 0;
}
