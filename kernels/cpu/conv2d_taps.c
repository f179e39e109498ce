// Direct convolutions, one GEMM per output row over its taps (kernels/cpu/conv2d_taps.h).
//
// Forward and weight gradient: output row i of sample b reads the KH input rows
// i SH - PH + r DH, and output position j their positions j - PW + q DW (kernel column q). Its
// tap matrix holds, for each position, the taps in the order k = (q KH + r) Cin + c (zeros
// outside), so that with the weights wf(k, o) = w[o, c, r, q] the row is one GEMM, y(j, .) =
// taps(j, .) wf, and dw += taps^T dy(row). Where DW = 1 the matrix interleaves the input rows
// position by position (row p: input position p - PW of rows r = 0..KH-1) and position j's taps
// are its KW rows from j on, contiguous: KW times fewer copies than one row per position with
// all its taps (im2row), which the dilated layers take. Input gradient: input row u of sample b
// is fed by the output rows i_t = (u + PH - r_t DH) / SH of the kernel rows r_t that divide
// evenly (its class: u modulo SH); its matrix is built the same way from those rows of dy, the
// kernel columns reversed (q' = KW - 1 - q: position v reads dy at v + PW - (KW - 1) DW +
// q' DW), against wb(k, c) = w[o, c, r_t, KW - 1 - q'], k = (q' nt + t) Cout + o.
//
// Workspace (floats): [wf (K x Cout)][wb: each class's (KW nt Cout x Cin), K Cout in all]
// [per thread: a tap matrix and MR floats of slack, the weight gradient's sums (K x Cout)].
#include "kernels/cpu/conv2d_taps.h"

#include <omp.h>
#include <string.h>

#include "kernels/base/spk_assert.h"
#include "kernels/cpu/micro_kernel.h"

enum { MR = SPK_MR, NR = SPK_NR, TAPS_MAX = 16 };

static int min_int(int a, int b) { return a < b ? a : b; }
static int max_int(int a, int b) { return a > b ? a : b; }

int conv2d_taps_shape(const conv2d_shape_t *s) {
    return SPK_MICRO_KERNEL_SIMD && conv2d_shape_ok(s) && s->SW == 1 && s->KH <= TAPS_MAX && s->KW <= TAPS_MAX &&
           s->Cin % NR == 0 && s->Cout % NR == 0;
}

static int taps_k(const conv2d_shape_t *s) { return s->KH * s->KW * s->Cin; }

// Whole tiles of `width` positions (the micro-kernel computes MR rows).
static int tiled(int width) { return (width + MR - 1) / MR * MR; }

// One row per position with all its taps (im2row), or interleaved rows (DW = 1).
static int expanded(const conv2d_shape_t *s) { return s->DW > 1; }

// Rows of a tap matrix for `width` positions: the tiles, and interleaved the kernel's reach.
static int tap_rows(const conv2d_shape_t *s, int width) { return tiled(width) + (expanded(s) ? 0 : s->KW - 1); }

// Floats from one position's taps to the next's, for taps of n rows of C channels.
static int tap_stride(const conv2d_shape_t *s, int n, int C) { return (expanded(s) ? s->KW : 1) * n * C; }

static size_t weights_floats(const conv2d_shape_t *s) { return (size_t)taps_k(s) * s->Cout; }

static size_t matrix_floats(const conv2d_shape_t *s) {
    const int rows = max_int(tap_rows(s, conv2d_out_w(s)), tap_rows(s, s->W));
    return (size_t)rows * tap_stride(s, s->KH, max_int(s->Cin, s->Cout)) + MR;  // + the weight gradient's overreach
}

static size_t slot_floats(const conv2d_shape_t *s) { return matrix_floats(s) + weights_floats(s); }

size_t conv2d_taps_workspace_floats(const conv2d_shape_t *s) {
    return 2 * weights_floats(s) + (size_t)omp_get_max_threads() * slot_floats(s);
}

static float *slot_of(const conv2d_shape_t *s, float *workspace, int thread) {
    return workspace + 2 * weights_floats(s) + (size_t)thread * slot_floats(s);
}

// w (Cout, Cin, KH, KW) at (o, c, r, q).
static float weight_at(const float *w, const conv2d_shape_t *s, int o, int c, int r, int q) {
    return w[(((size_t)o * s->Cin + c) * s->KH + r) * s->KW + q];
}

// wf(k, o), k = (q KH + r) Cin + c.
static void forward_weights(float *wf, const float *w, const conv2d_shape_t *s) {
    for (int q = 0; q < s->KW; q++)
        for (int r = 0; r < s->KH; r++)
            for (int c = 0; c < s->Cin; c++)
                for (int o = 0; o < s->Cout; o++)
                    wf[((size_t)(q * s->KH + r) * s->Cin + c) * s->Cout + o] = weight_at(w, s, o, c, r, q);
}

// The kernel rows r of class m (u + PH - r DH a multiple of SH for the rows u = m modulo SH),
// in order; their count.
static int class_taps(const conv2d_shape_t *s, int m, int r_of[TAPS_MAX]) {
    int n = 0;
    for (int r = 0; r < s->KH; r++)
        if (((m + s->PH - r * s->DH) % s->SH + s->SH) % s->SH == 0) r_of[n++] = r;
    return n;
}

// Class m's weights wb(k, c), k = (q' nt + t) Cout + o, after those of the classes before it.
static float *class_weights(float *wb, const conv2d_shape_t *s, int m) {
    int r_of[TAPS_MAX];
    size_t off = 0;
    for (int k = 0; k < m; k++) off += (size_t)class_taps(s, k, r_of) * s->KW * s->Cout * s->Cin;
    return wb + off;
}

static void backward_weights(float *wb, const float *w, const conv2d_shape_t *s) {
    for (int m = 0; m < s->SH; m++) {
        int r_of[TAPS_MAX];
        const int nt = class_taps(s, m, r_of);
        float *b = class_weights(wb, s, m);
        for (int q = 0; q < s->KW; q++)
            for (int t = 0; t < nt; t++)
                for (int o = 0; o < s->Cout; o++)
                    for (int c = 0; c < s->Cin; c++)
                        b[((size_t)(q * nt + t) * s->Cout + o) * s->Cin + c] =
                            weight_at(w, s, o, c, r_of[t], s->KW - 1 - q);
    }
}

// The tap matrix of n source rows of C channels for `width` positions: position p's taps are
// src[t]'s positions p + offset + q DW (zeros outside [0, src_width), or where src[t] is NULL),
// at k = (q n + t) C + c from its row (tap_stride apart), as the layout puts them.
static void tap_matrix(float *taps, const conv2d_shape_t *s, const float *const *src, int n, int C, int width,
                       int offset, int src_width) {
    const int columns = expanded(s) ? s->KW : 1, step = expanded(s) ? s->DW : 0;
    for (int p = 0; p < tap_rows(s, width); p++)
        for (int q = 0; q < columns; q++)
            for (int t = 0; t < n; t++) {
                float *dst = taps + (((size_t)p * columns + q) * n + t) * C;
                const int v = p + offset + q * step;
                if (src[t] && v >= 0 && v < src_width)
                    memcpy(dst, src[t] + (size_t)v * C, sizeof(float) * C);
                else
                    memset(dst, 0, sizeof(float) * C);
            }
}

// The tap matrix of output row i of sample b.
static void forward_taps(float *taps, const float *x, const conv2d_shape_t *s, int b, int i) {
    const float *src[TAPS_MAX];
    for (int r = 0; r < s->KH; r++) {
        const int u = i * s->SH - s->PH + r * s->DH;
        src[r] = u >= 0 && u < s->H ? x + ((size_t)b * s->H + u) * s->W * s->Cin : NULL;
    }
    tap_matrix(taps, s, src, s->KH, s->Cin, conv2d_out_w(s), -s->PW, s->W);
}

void conv2d_taps_forward(float *y, const float *x, const float *w, const float *bias, const conv2d_shape_t *s,
                         float *workspace) {
    SPK_ASSERT(conv2d_taps_shape(s));
    const int OH = conv2d_out_h(s), OW = conv2d_out_w(s), K = taps_k(s), O = s->Cout;
    const size_t ars = (size_t)tap_stride(s, s->KH, s->Cin);
    float *wf = workspace;
    forward_weights(wf, w, s);
#pragma omp parallel for schedule(static)
    for (int n = 0; n < s->B * OH; n++) {
        float *taps = slot_of(s, workspace, omp_get_thread_num());
        forward_taps(taps, x, s, n / OH, n % OH);
        float *yr = y + (size_t)n * OW * O;
        for (int ob = 0; ob < O; ob += NR)  // a column block's weights stay in L1 across the row
            for (int j = 0; j < OW; j += MR)
                spk_micro_kernel(K, taps + j * ars, ars, 1, wf + ob, (size_t)O, yr + (size_t)j * O + ob, (size_t)O,
                                 min_int(MR, OW - j), 0);
        if (bias)
            for (int j = 0; j < OW; j++)
#pragma omp simd
                for (int o = 0; o < O; o++) yr[(size_t)j * O + o] += bias[o];
    }
}

// dx row (b, u): the rows of dy its class's kernel rows read, then one GEMM.
static void input_gradient(float *dx, int accumulate, const float *dy, const float *w, const conv2d_shape_t *s,
                           float *workspace) {
    const int OH = conv2d_out_h(s), OW = conv2d_out_w(s), O = s->Cout, C = s->Cin;
    float *wb = workspace + weights_floats(s);
    backward_weights(wb, w, s);
#pragma omp parallel for schedule(static)
    for (int n = 0; n < s->B * s->H; n++) {
        const int b = n / s->H, u = n % s->H, m = u % s->SH;
        float *dxr = dx + (size_t)n * s->W * C;
        int r_of[TAPS_MAX];
        const int nt = class_taps(s, m, r_of);
        if (nt == 0) {  // a stride past the kernel's reach skips rows
            if (!accumulate) memset(dxr, 0, sizeof(float) * s->W * C);
            continue;
        }
        const float *src[TAPS_MAX];
        for (int t = 0; t < nt; t++) {
            const int e = u + s->PH - r_of[t] * s->DH, i = e / s->SH;  // e: a multiple of SH
            src[t] = e >= 0 && i < OH ? dy + ((size_t)b * OH + i) * OW * O : NULL;
        }
        float *taps = slot_of(s, workspace, omp_get_thread_num());
        tap_matrix(taps, s, src, nt, O, s->W, s->PW - (s->KW - 1) * s->DW, OW);
        const float *bm = class_weights(wb, s, m);
        const size_t ars = (size_t)tap_stride(s, nt, O);
        for (int cb = 0; cb < C; cb += NR)
            for (int v = 0; v < s->W; v += MR)
                spk_micro_kernel(s->KW * nt * O, taps + v * ars, ars, 1, bm + cb, (size_t)C, dxr + (size_t)v * C + cb,
                                 (size_t)C, min_int(MR, s->W - v), accumulate);
    }
}

// Each thread sums its output rows' products into its own (K x Cout); the sums are added in
// thread order.
static void weight_gradient(float *dw, const float *dy, const float *x, const conv2d_shape_t *s, float *workspace) {
    const int OH = conv2d_out_h(s), OW = conv2d_out_w(s), O = s->Cout, K = taps_k(s);
    const size_t ars = (size_t)tap_stride(s, s->KH, s->Cin);
    const int threads = omp_get_max_threads();
#pragma omp parallel num_threads(threads)
    {
        const int t = omp_get_thread_num(), nth = omp_get_num_threads(), rows_all = s->B * OH;
        float *taps = slot_of(s, workspace, t), *sums = taps + matrix_floats(s);
        memset(sums, 0, sizeof(float) * weights_floats(s));
        const int n0 = (int)((long long)rows_all * t / nth), n1 = (int)((long long)rows_all * (t + 1) / nth);
        for (int n = n0; n < n1; n++) {
            forward_taps(taps, x, s, n / OH, n % OH);
            const float *dyr = dy + (size_t)n * OW * O;
            for (int k = 0; k < K; k += MR)  // MR consecutive rows of wf, over the positions
                for (int ob = 0; ob < O; ob += NR)
                    spk_micro_kernel(OW, taps + k, 1, ars, dyr + ob, (size_t)O, sums + (size_t)k * O + ob, (size_t)O,
                                     min_int(MR, K - k), 1);
        }
#pragma omp barrier
        const size_t stride = slot_floats(s);  // from one thread's sums to the next's
        const float *first_sums = slot_of(s, workspace, 0) + matrix_floats(s);
#pragma omp for schedule(static)
        for (int o = 0; o < O; o++)
            for (int c = 0; c < s->Cin; c++)
                for (int r = 0; r < s->KH; r++)
                    for (int q = 0; q < s->KW; q++) {
                        const size_t k = (size_t)(q * s->KH + r) * s->Cin + c;
                        float g = 0.0f;
                        for (int u = 0; u < nth; u++) g += first_sums[u * stride + k * O + o];
                        dw[(((size_t)o * s->Cin + c) * s->KH + r) * s->KW + q] += g;
                    }
    }
}

void conv2d_taps_backward(float *dx, int dx_accumulate, float *dw, const float *dy, const float *x, const float *w,
                          const conv2d_shape_t *s, float *workspace) {
    SPK_ASSERT(conv2d_taps_shape(s));
    if (dx) input_gradient(dx, dx_accumulate, dy, w, s, workspace);
    if (dw) weight_gradient(dw, dy, x, s, workspace);
}
