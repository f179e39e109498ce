// Direct 3x3 convolutions, one GEMM per output row over its taps (kernels/cpu/conv2d_taps.h).
//
// Forward and weight gradient: output row i of sample b reads input rows i SH - 1 + r (r = 0, 1,
// 2). Its tap matrix has P = the width in whole tiles + 2 rows of 3 x 3 x Cin: row p holds, for
// r = 0..2, input row r's position p - 1 (zeros outside), so output position j's nine taps are
// the 9 Cin floats from row j on, in the order k = (q 3 + r) Cin + c for column tap q. Hence
// y(j, o) = sum_k taps[j 3 Cin + k] wf[k, o], and dw(k, o) += sum_j taps[j 3 Cin + k] dy(j, o).
// Input gradient: input row u is fed by output rows (u + 1 - r) / SH for the taps r = u + 1
// modulo SH (its class); its matrix interleaves those rows of dy the same way (nt taps of Cout),
// and dx(v, c) = sum over k = (q' nt + t) Cout + o of taps[v nt Cout + k] w[o, c, r_t, 2 - q'].
//
// Workspace (floats): [wf (9 Cin x Cout)][wb: each class's weights (3 nt Cout x Cin), 9 Cin Cout
// in all][per thread: a tap matrix (P x 3 max(Cin, Cout)), weight-gradient sums (9 Cin x Cout)].
#include "kernels/cpu/conv2d_taps.h"

#include <omp.h>
#include <string.h>

#include "kernels/base/spk_assert.h"
#include "kernels/cpu/micro_kernel.h"

enum { MR = SPK_MR, NR = SPK_NR };

static int min_int(int a, int b) { return a < b ? a : b; }
static int max_int(int a, int b) { return a > b ? a : b; }

int conv2d_taps_shape(const conv2d_shape_t *s) {
    return SPK_MICRO_KERNEL_SIMD && conv2d_shape_ok(s) && s->KH == 3 && s->KW == 3 && s->PH == 1 && s->PW == 1 &&
           s->DH == 1 && s->DW == 1 && s->SW == 1 && s->Cin % NR == 0 && s->Cout % NR == 0;
}

// Rows of a tap matrix for `width` positions: whole tiles (the micro-kernel reads MR rows) and
// the padding on each side.
static int tap_rows(int width) { return (width + MR - 1) / MR * MR + 2; }

static size_t weights_floats(const conv2d_shape_t *s) { return (size_t)9 * s->Cin * s->Cout; }

static size_t slot_floats(const conv2d_shape_t *s) {
    const int P = tap_rows(max_int(conv2d_out_w(s), s->W));
    return (size_t)P * 3 * max_int(s->Cin, s->Cout) + weights_floats(s);
}

size_t conv2d_taps_workspace_floats(const conv2d_shape_t *s) {
    return 2 * weights_floats(s) + (size_t)omp_get_max_threads() * slot_floats(s);
}

static float *slot_of(const conv2d_shape_t *s, float *workspace, int thread) {
    return workspace + 2 * weights_floats(s) + (size_t)thread * slot_floats(s);
}

// w (Cout, Cin, 3, 3) at (o, c, r, q).
static float weight_at(const float *w, const conv2d_shape_t *s, int o, int c, int r, int q) {
    return w[(((size_t)o * s->Cin + c) * 3 + r) * 3 + q];
}

// wf(k, o), k = (q 3 + r) Cin + c.
static void forward_weights(float *wf, const float *w, const conv2d_shape_t *s) {
    for (int q = 0; q < 3; q++)
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < s->Cin; c++)
                for (int o = 0; o < s->Cout; o++)
                    wf[((size_t)(q * 3 + r) * s->Cin + c) * s->Cout + o] = weight_at(w, s, o, c, r, q);
}

// The taps r of class m (r = m modulo SH), in order; their count.
static int class_taps(int m, int SH, int r_of[3]) {
    int n = 0;
    for (int r = 0; r < 3; r++)
        if (r % SH == m) r_of[n++] = r;
    return n;
}

// The classes' weights one after another: class m's (k, c), k = (q' nt + t) Cout + o, is
// w[o, c, r_t, 2 - q']. Returns class m's.
static const float *class_weights(const float *wb, const conv2d_shape_t *s, int m) {
    int r_of[3];
    size_t off = 0;
    for (int k = 0; k < m; k++) off += (size_t)3 * class_taps(k, s->SH, r_of) * s->Cout * s->Cin;
    return wb + off;
}

static void backward_weights(float *wb, const float *w, const conv2d_shape_t *s) {
    for (int m = 0; m < s->SH && m < 3; m++) {
        int r_of[3];
        const int nt = class_taps(m, s->SH, r_of);
        float *b = (float *)class_weights(wb, s, m);
        for (int q = 0; q < 3; q++)
            for (int t = 0; t < nt; t++)
                for (int o = 0; o < s->Cout; o++)
                    for (int c = 0; c < s->Cin; c++)
                        b[((size_t)(q * nt + t) * s->Cout + o) * s->Cin + c] = weight_at(w, s, o, c, r_of[t], 2 - q);
    }
}

// Fills P rows of a tap matrix of n rows of `rows` (NULL where outside: zeros), C channels each.
static void tap_matrix(float *taps, const float *const *rows, int n, int C, int width, int P) {
    for (int p = 0; p < P; p++)
        for (int t = 0; t < n; t++) {
            float *dst = taps + ((size_t)p * n + t) * C;
            if (rows[t] && p >= 1 && p <= width)
                memcpy(dst, rows[t] + (size_t)(p - 1) * C, sizeof(float) * C);
            else
                memset(dst, 0, sizeof(float) * C);
        }
}

// The input rows output row i of sample b reads (NULL: padding).
static void forward_rows(const float *rows[3], const float *x, const conv2d_shape_t *s, int b, int i) {
    for (int r = 0; r < 3; r++) {
        const int u = i * s->SH - 1 + r;
        rows[r] = u >= 0 && u < s->H ? x + ((size_t)b * s->H + u) * s->W * s->Cin : NULL;
    }
}

void conv2d_taps_forward(float *y, const float *x, const float *w, const float *bias, const conv2d_shape_t *s,
                         float *workspace) {
    SPK_ASSERT(conv2d_taps_shape(s));
    const int OH = conv2d_out_h(s), OW = conv2d_out_w(s), K = 9 * s->Cin, O = s->Cout, P = tap_rows(OW);
    float *wf = workspace;
    forward_weights(wf, w, s);
#pragma omp parallel for schedule(static)
    for (int n = 0; n < s->B * OH; n++) {
        float *taps = slot_of(s, workspace, omp_get_thread_num());
        const float *rows[3];
        forward_rows(rows, x, s, n / OH, n % OH);
        tap_matrix(taps, rows, 3, s->Cin, s->W, P);
        float *yr = y + (size_t)n * OW * O;
        for (int ob = 0; ob < O; ob += NR)  // a column block's weights stay in L1 across the row
            for (int j = 0; j < OW; j += MR)
                spk_micro_kernel(K, taps + (size_t)j * 3 * s->Cin, (size_t)3 * s->Cin, 1, wf + ob, (size_t)O,
                                 yr + (size_t)j * O + ob, (size_t)O, min_int(MR, OW - j), 0);
        if (bias)
            for (int j = 0; j < OW; j++)
#pragma omp simd
                for (int o = 0; o < O; o++) yr[(size_t)j * O + o] += bias[o];
    }
}

// dx row (b, u): the rows of dy its class's taps read, then one GEMM.
static void input_gradient(float *dx, int accumulate, const float *dy, const float *w, const conv2d_shape_t *s,
                           float *workspace) {
    const int OH = conv2d_out_h(s), OW = conv2d_out_w(s), O = s->Cout, C = s->Cin, P = tap_rows(s->W);
    float *wb = workspace + weights_floats(s);
    backward_weights(wb, w, s);
#pragma omp parallel for schedule(static)
    for (int n = 0; n < s->B * s->H; n++) {
        const int b = n / s->H, u = n % s->H, m = (u + 1) % s->SH;
        float *dxr = dx + (size_t)n * s->W * C;
        int r_of[3];
        const int nt = m < 3 ? class_taps(m, s->SH, r_of) : 0;
        if (nt == 0) {  // a stride above 3 skips rows
            if (!accumulate) memset(dxr, 0, sizeof(float) * s->W * C);
            continue;
        }
        const float *rows[3];
        for (int t = 0; t < nt; t++) {
            const int i = (u + 1 - r_of[t]) / s->SH;  // exact: r = u + 1 modulo SH
            rows[t] = u + 1 - r_of[t] >= 0 && i < OH ? dy + ((size_t)b * OH + i) * OW * O : NULL;
        }
        float *taps = slot_of(s, workspace, omp_get_thread_num());
        tap_matrix(taps, rows, nt, O, OW, P);
        const float *bm = class_weights(wb, s, m);
        for (int cb = 0; cb < C; cb += NR)
            for (int v = 0; v < s->W; v += MR)
                spk_micro_kernel(3 * nt * O, taps + (size_t)v * nt * O, (size_t)nt * O, 1, bm + cb, (size_t)C,
                                 dxr + (size_t)v * C + cb, (size_t)C, min_int(MR, s->W - v), accumulate);
    }
}

// Each thread sums its output rows' products into its own (9 Cin x Cout); the sums are added in
// thread order.
static void weight_gradient(float *dw, const float *dy, const float *x, const conv2d_shape_t *s, float *workspace) {
    const int OH = conv2d_out_h(s), OW = conv2d_out_w(s), O = s->Cout, K = 9 * s->Cin, P = tap_rows(OW);
    const int threads = omp_get_max_threads();
    const size_t tap_floats = (size_t)P * 3 * max_int(s->Cin, s->Cout);
#pragma omp parallel num_threads(threads)
    {
        const int t = omp_get_thread_num(), nth = omp_get_num_threads(), rows_all = s->B * OH;
        float *taps = slot_of(s, workspace, t), *sums = taps + tap_floats;
        memset(sums, 0, sizeof(float) * weights_floats(s));
        const int n0 = (int)((long long)rows_all * t / nth), n1 = (int)((long long)rows_all * (t + 1) / nth);
        for (int n = n0; n < n1; n++) {
            const float *rows[3];
            forward_rows(rows, x, s, n / OH, n % OH);
            tap_matrix(taps, rows, 3, s->Cin, s->W, P);
            const float *dyr = dy + (size_t)n * OW * O;
            for (int k = 0; k < K; k += MR)  // 6 consecutive taps-by-channel rows, over the positions
                for (int ob = 0; ob < O; ob += NR)
                    spk_micro_kernel(OW, taps + k, 1, (size_t)3 * s->Cin, dyr + ob, (size_t)O,
                                     sums + (size_t)k * O + ob, (size_t)O, MR, 1);
        }
#pragma omp barrier
#pragma omp for schedule(static)
        for (int o = 0; o < O; o++)
            for (int c = 0; c < s->Cin; c++)
                for (int r = 0; r < 3; r++)
                    for (int q = 0; q < 3; q++) {
                        const size_t k = (size_t)(q * 3 + r) * s->Cin + c;
                        float g = 0.0f;
                        for (int u = 0; u < nth; u++) g += (slot_of(s, workspace, u) + tap_floats)[k * O + o];
                        dw[(((size_t)o * s->Cin + c) * 3 + r) * 3 + q] += g;
                    }
    }
}

void conv2d_taps_backward(float *dx, int dx_accumulate, float *dw, const float *dy, const float *x, const float *w,
                          const conv2d_shape_t *s, float *workspace) {
    SPK_ASSERT(conv2d_taps_shape(s));
    if (dx) input_gradient(dx, dx_accumulate, dy, w, s, workspace);
    if (dw) weight_gradient(dw, dy, x, s, workspace);
}
